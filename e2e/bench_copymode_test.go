package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkCopyModeStart: `git sandbox start -d --engine two` of a
// 5,000-file repository on the second engine (copy mode) until the agent
// runs, against doing it by hand: a volume, `git archive | docker run -i …
// tar x` into it, and `docker run -d` of the same image on it.
func BenchmarkCopyModeStart(b *testing.B) {
	host := startEngine2(b)
	e := NewEnv(b)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n", baseImage, host)
	bigRepo(b, e, 5_000)
	docker := []string{"-H", host}
	var ours, raw []time.Duration
	for i := 0; i < benchRounds; i++ {
		branch := "bc-" + strconv.Itoa(i)
		ours = append(ours, timeIt(b, func() {
			r := e.Run(e.Repo, []string{os.Getenv("BENCH_TRACE")}, filepath.Join(binDir, "git-sandbox"), "start", "-d", branch, "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "600")
			if r.Code != 0 {
				b.Fatalf("start: %s", r)
			}
			if os.Getenv("BENCH_TRACE") != "" {
				fmt.Print(r.Stderr)
			}
		}))
		vol := fmt.Sprintf("gsbench-%s-%d", e.RepoID(), i)
		raw = append(raw, timeIt(b, func() {
			runOK(b, e.Repo, nil, "docker", append(docker, "volume", "create", "--label", "git-sandbox.repo="+e.RepoID(), vol)...)
			runOK(b, e.Repo, nil, "sh", "-c", fmt.Sprintf("git archive HEAD | docker -H %s run -i --rm --network none -v %s:/w %s tar -x -C /w", host, vol, baseImage))
			runOK(b, e.Repo, nil, "docker", append(docker, "run", "-d", "--label", "git-sandbox.repo="+e.RepoID(),
				"--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "256",
				"--memory", "1g", "--init", "-w", "/workspace", "-v", vol+":/workspace", baseImage, "sleep", "600")...)
		}))
	}
	b.Cleanup(func() {
		out, _ := exec.Command("docker", "-H", host, "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"-H", host, "rm", "-f"}, ids...)...).Run()
		}
		out, _ = exec.Command("docker", "-H", host, "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"-H", host, "volume", "rm", "-f"}, ids...)...).Run()
		}
	})
	report(b, "copy-mode start, 5k files", median(ours), median(raw), 1.5)
}

// BenchmarkCopyModeSnapshot: a snapshot round trip of 200 changed and
// added files in the 100,000-file repository on the second engine (stage
// and write the tree there, bring the pack back, index and check it here,
// commit), against the same pack transfer by hand: git add -A and
// write-tree in the helper with a copy of its index, pack-objects there
// piped through docker exec into git index-pack here.
func BenchmarkCopyModeSnapshot(b *testing.B) {
	host := startEngine2(b)
	e := NewEnv(b)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n[limits]\nmemory = \"2g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n", baseImage, host)
	bigRepo(b, e, 100_000)
	began := time.Now()
	e.MustSandbox("start", "-d", "snap", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "3600")
	fmt.Printf("bench: copy-mode start of 100k files: %.1f ms\n", ms(time.Since(began)))
	var agent, helper string
	for _, id := range containersOn(b, host, e.RepoID()) {
		switch dockerAt(b, host, "inspect", "--format", `{{index .Config.Labels "git-sandbox.role"}}`, id) {
		case "agent":
			agent = id
		case "helper":
			helper = id
		}
	}
	b.Cleanup(func() { e.Sandbox("rm", "--force", "snap") })
	touch := func(round int) {
		dockerAt(b, host, "exec", agent, "sh", "-c", fmt.Sprintf(`mkdir -p added; i=0; while [ $i -lt 100 ]; do n=$(( (i*7) %% 1000 )); echo "changed $i %d" >src/d$(printf %%03d $n)/f$(printf %%06d $n).txt; echo "new $i %d" >added/n$i-%d.txt; i=$((i+1)); done`, round, round, round))
	}
	// The by-hand side indexes into a repository of its own here.
	rawRepo := filepath.Join(e.Root, "rawrepo")
	runOK(b, "", nil, "git", "init", "-q", "--bare", rawRepo)
	must(b, os.WriteFile(filepath.Join(rawRepo, "objects", "info", "alternates"), []byte(filepath.Join(e.Repo, ".git", "objects")+"\n"), 0o644))
	gitEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}

	var ours, raw []time.Duration
	for round := 0; round < benchRounds; round++ {
		touch(2 * round)
		ours = append(ours, timeIt(b, func() { benchSandbox(b, e, "rescue", "snapshot", "snap") }))

		touch(2*round + 1)
		prev := e.Git("rev-parse", "refs/sandbox/snap/rescue^{tree}")
		raw = append(raw, timeIt(b, func() {
			tree := dockerAt(b, host, "exec", helper, "sh", "-c",
				"cp /sandbox-state/index /sandbox-state/raw.index && cd /workspace && GIT_DIR=/sandbox-state/scratch GIT_INDEX_FILE=/sandbox-state/raw.index GIT_WORK_TREE=/workspace git add -A && GIT_DIR=/sandbox-state/scratch GIT_INDEX_FILE=/sandbox-state/raw.index git write-tree")
			runOK(b, "", gitEnv, "sh", "-c", fmt.Sprintf("docker -H %s exec %s sh -c 'printf \"%%s\\n--not\\n%%s\\n\" %s %s | GIT_DIR=/sandbox-state/scratch git pack-objects --revs --stdout -q' | git --git-dir=%s index-pack --stdin --strict >/dev/null", host, helper, tree, prev, rawRepo))
		}))
	}
	report(b, "copy-mode snapshot, 100k, 200 changed", median(ours), median(raw), 1.5)
}
