package e2e

// Adversarial round two: settings a sandbox was started with, history
// smuggled through sync, and host memory and disk spent on what an agent
// hands back (sync of huge objects, verify's export of huge files).

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// atkProbe prints the limits and network of the container it runs in, on
// cgroup v2 or v1.
const atkProbe = `pids=$(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max)
mem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
net=$(ls /sys/class/net | tr '\n' ,)
echo "PROBE pids=$pids mem=$mem net=$net"`

// probeOf returns the fields of the first PROBE line of out.
func probeOf(t *testing.T, out string) map[string]string {
	t.Helper()
	var line string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "PROBE "); ok && !strings.Contains(s, "$") {
			line = s
			break
		}
	}
	if line == "" {
		t.Fatalf("no PROBE line in:\n%s", out)
	}
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// 2. Verify ran with the current config, not the sandbox's own settings: a
// sandbox started with --network none --pids 64 was verified with the
// network and pids 4096.
func TestAttackVerifyKeepsTheSandboxSettings(t *testing.T) {
	t.Parallel()
	e, _, _ := atkEnv(t)
	e.WriteConfig("base_image = %q\nnetwork = \"open\"\nverify_allow = [\"verify.example.test\"]\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 4096\n", baseImage)
	// Armed: the probe sees the config's network and limits in a sandbox
	// started without flags (and verify_allow would give verify a network).
	open := probeOf(t, e.atkStart("open", atkProbe+"\necho AGENT-DONE").Stdout)
	if open["pids"] != "4096" || !strings.Contains(open["net"], "eth") {
		t.Fatalf("the probe does not see the config's settings: %v", open)
	}
	r := e.Sandbox("start", "strict", "--agent", "shell", "--network", "none", "--pids", "64", "--memory", "512m",
		"--verify", atkProbe, "--", "sh", "-c", atkProbe+"\necho AGENT-DONE")
	if r.Code != 0 {
		t.Fatalf("start: %s", r)
	}
	agent := probeOf(t, r.Stdout)
	if agent["pids"] != "64" || agent["net"] != "lo," || agent["mem"] != "536870912" {
		t.Fatalf("the agent's own container does not have its flags: %v", agent)
	}
	// The supervisor verifies the exit snapshot; a file written before it
	// took that snapshot would be in it, verified there (its output in the
	// supervisor's log), and the verify below would find a verdict.
	Eventually(t, 2*time.Minute, "the supervisor's verify", func() bool { return len(e.atkVerdicts("strict")) > 0 })
	verifyProbe := func(what string) map[string]string {
		t.Helper()
		// A new file, so verify runs on a tree it has no verdict for.
		must(t, os.WriteFile(filepath.Join(e.Worktree("strict"), what+".txt"), []byte(what+"\n"), 0o644))
		v := e.Sandbox("verify", "strict")
		if v.Code != 0 {
			t.Fatalf("verify (%s): %s", what, v)
		}
		return probeOf(t, v.Stderr)
	}
	// The config is looser than the flags the sandbox started with.
	if got := verifyProbe("looser"); got["pids"] != "64" || got["net"] != "lo," || got["mem"] != "536870912" {
		t.Errorf("verify ran with the config's looser settings, not the sandbox's (pids 64, no network, 512m): %v", got)
	}
	// The config, tightened after start, is stricter than the record.
	e.WriteConfig("base_image = %q\nnetwork = \"open\"\nverify_allow = [\"verify.example.test\"]\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"256m\"\npids = 32\n", baseImage)
	if got := verifyProbe("tighter"); got["pids"] != "32" || got["net"] != "lo," || got["mem"] != "268435456" {
		t.Errorf("verify did not take the tightened config (pids 32, no network, 256m): %v", got)
	}
}

// atkVictimAgent leaves a secret in its worktree (so in its snapshots)
// and makes two commits of its own.
const atkVictimAgent = `
set -e
echo "SECRET=victim-token-4242" > .env
echo one > one.txt && git add one.txt && git commit -q -m "first victim commit"
echo two > two.txt && git add two.txt && git commit -q -m "second victim commit"
echo AGENT-DONE
`

// atkSmuggleAgent makes its own commit a merge of $SNAP, a commit of
// another sandbox's snapshots holding .env, whose tree is a harmless
// one-line change. Its repository cannot read the snapshot (it borrows
// only what branches and tags reach), so the commit is written by hand:
// an agent that learnt the id (from a log, say) names it as a parent all
// the same.
const atkSmuggleAgent = `
set -e
echo "a harmless line" >> README.md
git add README.md
T=$(git write-tree)
P=$(git rev-parse HEAD)
C=$(printf 'tree %s\nparent %s\nparent %s\nauthor A <a@example.com> 1700000000 +0000\ncommitter A <a@example.com> 1700000000 +0000\n\nfix a typo\n' "$T" "$P" "$SNAP" | git hash-object -t commit -w --stdin)
git update-ref HEAD "$C"
echo "SMUGGLED: $C"
if [ "$(git rev-parse HEAD^2)" = "$SNAP" ]; then echo "ARMED: SMUGGLE"; fi
echo AGENT-DONE
`

// 4. History smuggling: the agent's commit has another sandbox's snapshot
// (with its .env) as a parent; the diff showed one harmless line, and
// land --merge and a push put the secret on the remote.
func TestAttackHistorySmugglingThroughSync(t *testing.T) {
	t.Parallel()
	e, _, remote := atkEnv(t)
	e.atkStart("victim", atkVictimAgent)
	// The commits land --merge would keep are listed by diff.
	d := e.Sandbox("diff", "victim")
	if d.Code != 0 {
		t.Fatalf("diff victim: %s", d)
	}
	for _, want := range []string{"land --merge would also add the agent's 2 commit(s)", "first victim commit", "second victim commit"} {
		if !strings.Contains(d.Stdout, want) {
			t.Errorf("diff does not list the agent's commits (%q):\n%s", want, d.Stdout)
		}
	}
	Eventually(t, 60*time.Second, "the victim's snapshot of .env", func() bool {
		return e.Run(e.Repo, nil, "git", "cat-file", "-e", "refs/sandbox/victim/rescue:.env").Code == 0
	})
	snap := e.Git("rev-parse", "refs/sandbox/victim/rescue")
	if !strings.Contains(e.Git("show", snap+":.env"), "victim-token-4242") {
		t.Fatalf("the victim's snapshot %s holds no .env: the test proves nothing", snap)
	}
	r := e.atkStart("smuggle", atkSmuggleAgent, "SNAP="+snap)
	if !strings.Contains(r.Stdout, "ARMED: SMUGGLE\n") {
		t.Fatalf("the smuggling commit was not made:\n%s", r)
	}
	smuggled := between(r.Stdout, "SMUGGLED: ", "\n")
	mainBefore := e.Git("rev-parse", "main")
	for _, args := range [][]string{
		{"diff", "smuggle"},
		{"sync", "smuggle"},
		{"land", "smuggle", "--merge"},
	} {
		x := e.Sandbox(args...)
		if x.Code == 0 {
			t.Errorf("git sandbox %s accepted the smuggled history: %s", strings.Join(args, " "), x)
		} else if !strings.Contains(x.Stderr, "another sandbox's snapshots") {
			t.Errorf("git sandbox %s: no clear refusal: %s", strings.Join(args, " "), x)
		}
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	if x := e.Run(e.Repo, nil, "git", "rev-parse", "-q", "--verify", "refs/heads/smuggle"); strings.TrimSpace(x.Stdout) == smuggled {
		t.Errorf("the sandbox branch was moved to the smuggling commit")
	}
	if x := e.Run(e.Repo, nil, "git", "cat-file", "-e", smuggled); x.Code == 0 {
		t.Errorf("the smuggling commit reached the host object store")
	}
	e.Run(e.Repo, nil, "git", "push", "-q", "origin", "main", "smuggle")
	if x := e.Run(e.Repo, nil, "git", "--git-dir", remote, "cat-file", "-e", snap); x.Code == 0 {
		t.Errorf("the other sandbox's snapshot, with its .env, reached the remote")
	}
}

// runMeasured runs the git-sandbox binary itself (not through git) in the
// main checkout and returns its result and its peak resident memory in
// bytes, its children's (git) included: wait4 reports the larger.
func (e *Env) runMeasured(args ...string) (Result, int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "git-sandbox"), args...)
	cmd.Dir = e.Repo
	cmd.Env = append([]string{}, e.vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("git-sandbox %q: %v", args, err)
		}
		code = ee.ExitCode()
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		e.t.Fatalf("no resource usage for git-sandbox %q", args)
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}, ru.Maxrss * 1024
}

// atkHugeBlobAgent commits a gigabyte of zeros, about a megabyte in the
// object store. The file is made sparse outside the worktree, so only the
// commit holds it (the worktree's snapshots are another matter).
const atkHugeBlobAgent = `
set -e
truncate -s 1073741824 "$HOME/zeros.bin"
B=$(git hash-object -w "$HOME/zeros.bin")
rm -f "$HOME/zeros.bin"
git update-index --add --cacheinfo "100644,$B,zeros.bin"
git commit -q -m "a gigabyte of zeros"
git rm -q --cached zeros.bin
if [ "$(git cat-file -s HEAD:zeros.bin)" = 1073741824 ]; then echo "ARMED: HUGE"; fi
echo "HEAD: $(git rev-parse HEAD)"
echo AGENT-DONE
`

// 7. go-git memory at sync: a 1 GiB zero blob made a host diff peak at
// over 4 GiB; rm syncs first, so it was hit too.
func TestAttackHugeBlobSyncStaysSmall(t *testing.T) {
	t.Parallel()
	e, _, _ := atkEnv(t)
	r := e.atkStart("huge", atkHugeBlobAgent)
	atkArmed(t, r.Stdout, "HUGE")
	head := between(r.Stdout, "HEAD: ", "\n")
	const maxRSS = 256 << 20
	for _, cmd := range [][]string{{"sync", "huge"}, {"diff", "huge", "--stat"}} {
		res, rss := e.runMeasured(cmd...)
		t.Logf("git sandbox %s: peak RSS %d MiB", strings.Join(cmd, " "), rss>>20)
		if rss >= maxRSS {
			t.Errorf("git sandbox %s peaked at %d MiB of host memory (limit %d MiB)", strings.Join(cmd, " "), rss>>20, maxRSS>>20)
		}
		if res.Code == 0 || !strings.Contains(res.Stderr, "zeros.bin is 1GiB, over the 100MiB allowed (budget.sync_object)") ||
			!strings.Contains(res.Stderr, "hint:") {
			t.Errorf("git sandbox %s: no clear refusal of the huge file:\n%s", strings.Join(cmd, " "), res)
		}
	}
	if x := e.Run(e.Repo, nil, "git", "cat-file", "-e", head); x.Code == 0 {
		t.Errorf("the agent's commit reached the host store")
	}
	// With the budget raised by the user, the file comes back streamed:
	// memory still does not grow with it.
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n[budget]\nsync_object = \"2g\"\n", baseImage)
	res, rss := e.runMeasured("sync", "huge")
	t.Logf("git sandbox sync huge within a raised budget: peak RSS %d MiB", rss>>20)
	if res.Code != 0 {
		t.Errorf("sync within a raised budget: %s", res)
	} else if got := e.Git("cat-file", "-s", head+":zeros.bin"); got != "1073741824" {
		t.Errorf("the synced file has %s bytes", got)
	}
	if rss >= maxRSS {
		t.Errorf("sync of an allowed 1 GiB file peaked at %d MiB of host memory (limit %d MiB)", rss>>20, maxRSS>>20)
	}
	// rm still removes the sandbox (its files are in the last snapshot).
	if x := e.Sandbox("rm", "--force", "huge"); x.Code != 0 {
		t.Errorf("rm --force: %s", x)
	}
}

// atkSparseAgent leaves a 2.1 GiB sparse file in the worktree: a few
// kilobytes on disk, and about two megabytes in the object store.
const atkSparseAgent = `
set -e
truncate -s 2254857830 big.bin
if [ "$(stat -c %s big.bin)" = 2254857830 ] && [ "$(du -k big.bin | cut -f1)" -lt 1024 ]; then echo "ARMED: SPARSE"; fi
echo AGENT-DONE
`

// 8. Verify export of a sparse file: a 2 GiB sparse file was written out
// at full size on the host, by verify and by the pre-push verify.
func TestAttackVerifyExportBudget(t *testing.T) {
	t.Parallel()
	e, _, _ := atkEnv(t)
	// Snapshots take every file here (max_file_size would leave the big
	// one out of the tree verify sees): the budget is what is tested.
	e.WriteConfig("base_image = %q\nverify = \"true\"\nverify_before_push = true\n[rescue]\ninterval = \"1h\"\nmax_file_size = \"0\"\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage)
	r := e.atkStart("sparse", atkSparseAgent)
	atkArmed(t, r.Stdout, "SPARSE")
	refused := func(what string, x Result) {
		t.Helper()
		if x.Code == 0 {
			t.Errorf("%s wrote the 2.1 GiB file out: %s", what, x)
		} else if !strings.Contains(x.Stderr, "over the 2GiB verify may write out (budget.export); the largest is big.bin (2.1GiB)") ||
			!strings.Contains(x.Stderr, "hint:") {
			t.Errorf("%s: no clear refusal: %s", what, x)
		}
	}
	refused("git sandbox verify", e.Sandbox("verify", "sparse"))
	// The pre-push verify of a commit holding the file.
	e.Git("checkout", "-q", "-b", "big")
	e.Run(e.Repo, nil, "cp", "--sparse=always", filepath.Join(e.Worktree("sparse"), "big.bin"), filepath.Join(e.Repo, "big.bin"))
	e.Git("add", "big.bin")
	e.Git("commit", "-q", "-m", "a big sparse file")
	refused("the pre-push verify", e.Run(e.Repo, nil, "git", "push", "origin", "big"))
	if x := e.Run(e.Repo, nil, "git", "ls-remote", "origin", "big"); strings.TrimSpace(x.Stdout) != "" {
		t.Errorf("the push went through: %s", x.Stdout)
	}
}

// An agent past its memory limit is ended by the engine, and start says
// so, with the limit and how to give it more (and so does wait on one
// started with -d); the work it wrote before is in its exit snapshot.
func TestOutOfMemorySaysSo(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Sandbox("start", "hog", "--agent", "shell", "--network", "none", "--memory", "32m", "--",
		"sh", "-c", `echo before > before.txt; x=$(head -c 400000000 /dev/zero | tr '\0' a); echo "$x" | wc -c`)
	if r.Code != 137 || !strings.Contains(r.Stderr, "exited with code 137: out of memory (limit 32m)") ||
		!strings.Contains(r.Stderr, "git sandbox start hog --memory SIZE") {
		t.Fatalf("an agent past its memory limit: %s", r)
	}
	if e.snapshotWith("hog", "before.txt", "before\n") == "" {
		t.Error("what the agent wrote before is not in a snapshot")
	}
	// Started in the background, wait says it.
	e.MustSandbox("start", "hog2", "-d", "--agent", "shell", "--network", "none", "--memory", "32m", "--",
		"sh", "-c", `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo "$x" | wc -c`)
	if r := e.Sandbox("wait", "hog2"); r.Code != 137 || !strings.Contains(r.Stderr, "agent in hog2 exited with code 137: out of memory (limit 32m)") {
		t.Errorf("wait on an agent past its memory limit: %s", r)
	}
}
