package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// Speed targets are ratios against the raw git and Docker commands doing
// the same work, measured in the same run (make bench). They are reported,
// never asserted: a loaded machine must not fail a build.

const benchRounds = 5

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func timeIt(t testing.TB, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	return time.Since(start)
}

func report(b *testing.B, what string, ours, raw time.Duration, target float64) {
	ratio := float64(ours) / float64(raw)
	verdict := "within"
	if ratio > target {
		verdict = "OVER"
	}
	fmt.Printf("bench: %-32s ours %8.1f ms  raw %8.1f ms  ratio %.2fx  (target <= %.2fx: %s)\n",
		what, ms(ours), ms(raw), ratio, target, verdict)
	b.ReportMetric(ratio, "x-vs-raw")
	b.ReportMetric(ms(ours), "ms-ours")
	b.ReportMetric(ms(raw), "ms-raw")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runOK(t testing.TB, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// BenchmarkStartOverhead: `git sandbox start -d --agent shell -- true`
// until the container runs, against `git worktree add` plus `docker run -d`
// of the same image with the same mounts and hardening.
func BenchmarkStartOverhead(b *testing.B) {
	e := NewEnv(b)
	hostGit := filepath.Join(e.Repo, ".git")
	var ours, raw []time.Duration
	for i := 0; i < benchRounds; i++ {
		branch := "bench-" + strconv.Itoa(i)
		ours = append(ours, timeIt(b, func() {
			e.MustSandbox("start", "-d", branch, "--agent", "shell", "--", "true")
		}))

		// The same by hand.
		dir := filepath.Join(e.Root, "raw", strconv.Itoa(i))
		wt := filepath.Join(dir, "worktree")
		priv := filepath.Join(dir, "git")
		home := filepath.Join(dir, "home")
		gitfile := filepath.Join(dir, "gitfile")
		must(b, os.MkdirAll(priv, 0o755))
		must(b, os.MkdirAll(home, 0o755))
		must(b, os.WriteFile(gitfile, []byte("gitdir: "+priv+"\n"), 0o644))
		name := fmt.Sprintf("git-sandbox-bench-raw-%s-%d", e.RepoID(), i)
		raw = append(raw, timeIt(b, func() {
			runOK(b, e.Repo, nil, "git", "worktree", "add", "-q", "-b", "raw-"+strconv.Itoa(i), wt)
			runOK(b, e.Repo, nil, "docker", "run", "-d", "--name", name,
				"--label", "git-sandbox.repo="+e.RepoID(),
				"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
				"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "256",
				"--memory", "1g", "--init", "-w", "/workspace",
				"-v", wt+":/workspace", "-v", gitfile+":/workspace/.git:ro",
				"-v", priv+":"+priv, "-v", filepath.Join(hostGit, "objects")+":"+filepath.Join(hostGit, "objects")+":ro",
				"-v", filepath.Join(hostGit, "hooks")+":"+filepath.Join(hostGit, "hooks")+":ro",
				"-v", home+":/home/sandbox",
				testImage, "true")
		}))
	}
	report(b, "start -d (until running)", median(ours), median(raw), 1.5)
}
