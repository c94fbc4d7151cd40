package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withRemote adds a local bare repository as origin.
func withRemote(t *testing.T, e *Env) string {
	t.Helper()
	remote := filepath.Join(e.Root, "remote.git")
	e.Git("init", "-q", "--bare", remote)
	e.Git("remote", "add", "origin", remote)
	return remote
}

func (e *Env) push(args ...string) Result {
	e.t.Helper()
	return e.Run(e.Repo, nil, "git", append([]string{"push", "origin"}, args...)...)
}

func TestHooksInstallKeepsAndRestoresYourHook(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	withRemote(t, e)
	hook := filepath.Join(e.Repo, ".git", "hooks", "pre-push")
	mark := filepath.Join(e.Root, "user-hook-ran")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\ncat > /dev/null\ntouch "+mark+"\n[ ! -e "+filepath.Join(e.Root, "refuse")+" ]\n"), 0o750))
	before := fileState(hook)

	e.MustSandbox("hooks", "install")
	if st := e.MustSandbox("hooks", "status").Stdout; !strings.Contains(st, "installed; your own hook runs first") {
		t.Errorf("status after install:\n%s", st)
	}
	e.MustSandbox("hooks", "install") // idempotent
	if r := e.push("main"); r.Code != 0 {
		t.Fatalf("push main: %s", r)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("your own pre-push hook did not run")
	}
	// Its refusal stops the push.
	must(t, os.WriteFile(filepath.Join(e.Root, "refuse"), nil, 0o644))
	e.WriteFile("b.txt", "b\n")
	e.Git("add", "b.txt")
	e.Git("commit", "-qm", "b")
	if r := e.push("main"); r.Code == 0 {
		t.Errorf("push went through although your hook refused it")
	}
	e.MustSandbox("hooks", "uninstall")
	if after := fileState(hook); after != before {
		t.Errorf("your hook was not restored exactly:\nbefore %q\nafter  %q", before, after)
	}
	if _, err := os.Lstat(hook + ".git-sandbox-chained"); !os.IsNotExist(err) {
		t.Errorf("the chained copy is left behind")
	}
}

func TestHooksInstallIntoHooksPath(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	withRemote(t, e)
	dir := filepath.Join(e.Root, "my-hooks")
	must(t, os.MkdirAll(dir, 0o755))
	e.Git("config", "core.hooksPath", dir)
	hook := filepath.Join(dir, "pre-push")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\ncat >/dev/null\necho mine >&2\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "commit-msg"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	before := map[string]string{}
	for _, n := range []string{"pre-push", "commit-msg"} {
		before[n] = fileState(filepath.Join(dir, n))
	}
	e.MustSandbox("hooks", "install")
	if st := fileState(hook); !strings.Contains(st, "git-sandbox pre-push hook") {
		t.Fatalf("hook not installed in core.hooksPath: %s", st)
	}
	if _, err := os.Stat(filepath.Join(e.Repo, ".git", "hooks", "pre-push")); err == nil {
		t.Errorf("installed into .git/hooks although core.hooksPath is set")
	}
	r := e.push("main")
	if r.Code != 0 || !strings.Contains(r.Stderr, "mine") {
		t.Errorf("push with the chained hook: %s", r)
	}
	e.MustSandbox("hooks", "uninstall")
	for n, b := range before {
		if after := fileState(filepath.Join(dir, n)); after != b {
			t.Errorf("%s not restored exactly: %q -> %q", n, b, after)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("files left in the hooks directory: %v", entries)
	}
}

func TestPrePushRefusesSandboxRefsAndRunningSandboxes(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	remote := withRemote(t, e)
	e.MustSandbox("hooks", "install")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", "echo work > w.txt")
	r := e.push("refs/sandbox/t1/rescue:refs/sandbox/t1/rescue")
	if r.Code == 0 || !strings.Contains(r.Stderr, "never leave") {
		t.Errorf("pushing refs/sandbox/* was not refused: %s", r)
	}
	if r := e.push("refs/sandbox/t1/rescue:refs/heads/stolen"); r.Code == 0 {
		t.Errorf("pushing a sandbox ref under another name was not refused: %s", r)
	}
	if out := e.Run(e.Repo, nil, "git", "--git-dir", remote, "for-each-ref").Stdout; out != "" {
		t.Errorf("the remote received refs: %s", out)
	}
	if r := e.push("main"); r.Code != 0 {
		t.Errorf("push main refused: %s", r)
	}

	// A running sandbox's branch waits; after the agent exits it may go.
	e.MustSandbox("start", "t2", "-d", "--agent", "shell", "--", "sh", "-c", "while [ ! -e /workspace/stop ]; do sleep 0.1; done")
	r = e.push("t2")
	if r.Code == 0 || !strings.Contains(r.Stderr, "still running") || !strings.Contains(r.Stderr, "refs/heads/t2") {
		t.Errorf("push of a running sandbox's branch: %s", r)
	}
	must(t, os.WriteFile(filepath.Join(e.Worktree("t2"), "stop"), nil, 0o644))
	if w := e.Sandbox("wait", "t2", "--timeout", "60s"); w.Code != 0 {
		t.Fatalf("wait: %s", w)
	}
	if r := e.push("t2"); r.Code != 0 {
		t.Errorf("push after the agent exited: %s", r)
	}
	// Deleting a remote branch and pushing tags go through untouched.
	e.Git("tag", "v1")
	if r := e.push("v1"); r.Code != 0 {
		t.Errorf("tag push: %s", r)
	}
	if r := e.push(":t2"); r.Code != 0 {
		t.Errorf("delete push: %s", r)
	}
}

func TestPrePushFailedVerdictRefused(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	withRemote(t, e)
	e.MustSandbox("hooks", "install")
	e.MustSandbox("start", "t1", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", "git commit -q --allow-empty -m agent")
	e.MustSandbox("sync", "t1")
	// The supervisor or verify records a failed verdict for this tree.
	if r := e.Sandbox("verify", "t1"); r.Code == 0 {
		t.Fatalf("verify passed without ok.txt: %s", r)
	}
	if r := e.push("t1"); r.Code == 0 || !strings.Contains(r.Stderr, "verify failed") {
		t.Errorf("push of a branch whose verify failed: %s", r)
	}
}

func TestVerifyBeforePushFollowsThePushedCommit(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	withRemote(t, e)
	e.WriteConfig("base_image = %q\nverify = \"test -f ok.txt && ! test -f bad.txt\"\nverify_before_push = true\n[limits]\npids = 256\n", baseImage)
	e.MustSandbox("hooks", "install")
	// Fails on the commit, would pass on the working tree.
	e.WriteFile("ok.txt", "untracked, only in the working tree\n")
	r := e.push("main")
	if r.Code == 0 || !strings.Contains(r.Stderr, "verify failed on the pushed commit") {
		t.Errorf("push of a failing commit: %s", r)
	}
	// Passes on the commit, would fail on the working tree.
	e.Git("add", "ok.txt")
	e.Git("commit", "-qm", "ok")
	e.WriteFile("bad.txt", "untracked\n")
	if r := e.push("main"); r.Code != 0 {
		t.Errorf("push of a passing commit: %s", r)
	}
	// Tags and deletions are not verified.
	e.Git("tag", "t-old", "HEAD~1")
	if r := e.push("t-old"); r.Code != 0 {
		t.Errorf("tag push: %s", r)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=verify").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("verify containers left: %s", out)
	}
}

func TestInterruptedVerifyBeforePushLeavesNothing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	withRemote(t, e)
	e.WriteConfig("base_image = %q\nverify = \"sleep 120\"\nverify_before_push = true\n", baseImage)
	e.MustSandbox("hooks", "install")
	cmd := exec.Command("git", "push", "origin", "main")
	cmd.Dir = e.Repo
	cmd.Env = e.vars
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	must(t, cmd.Start())
	verifying := func() string {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=verify").Output()
		return strings.TrimSpace(string(out))
	}
	Eventually(t, 60*time.Second, "the verify container", func() bool { return verifying() != "" })
	// Ctrl-C reaches the whole foreground process group.
	must(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	err := cmd.Wait()
	if err == nil {
		t.Errorf("the interrupted push succeeded")
	}
	Eventually(t, 30*time.Second, "the verify container to go", func() bool { return verifying() == "" })
	matches, _ := filepath.Glob(filepath.Join(e.State, e.RepoID(), ".push-verify-*"))
	if len(matches) > 0 {
		t.Errorf("temporary verify directories left: %v", matches)
	}
	if wl := e.Git("worktree", "list"); strings.Count(wl, "\n") > 0 {
		t.Errorf("worktrees left:\n%s", wl)
	}
}

func TestPrePushWithoutBinary(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	withRemote(t, e)
	e.MustSandbox("hooks", "install")
	noBin := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if _, err := os.Stat("/usr/local/bin/git-sandbox"); err == nil {
		// An installed copy would be found; hide it behind an empty PATH dir.
		noBin = []string{"PATH=/usr/bin:/bin"}
	}
	r := e.Run(e.Repo, noBin, "git", "push", "origin", "main")
	if r.Code == 0 || !strings.Contains(r.Stderr, "not on PATH") || !strings.Contains(r.Stderr, "allow_push_without_binary") {
		t.Errorf("push without the binary: %s", r)
	}
	e.WriteConfig("base_image = %q\n[hooks]\nallow_push_without_binary = true\n", baseImage)
	if r := e.Run(e.Repo, noBin, "git", "push", "origin", "main"); r.Code != 0 || !strings.Contains(r.Stderr, "without the sandbox checks") {
		t.Errorf("push without the binary, allowed by config: %s", r)
	}
}

// verify_before_push verifies every pushed commit, oldest first, and stops
// at the first that fails, naming it.
func TestVerifyBeforePushVerifiesEveryPushedCommit(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	remote := withRemote(t, e)
	e.WriteConfig("base_image = %q\nverify = \"! test -f bad.txt\"\nverify_before_push = true\n[limits]\npids = 256\n", baseImage)
	e.MustSandbox("hooks", "install")
	if r := e.push("main"); r.Code != 0 || !strings.Contains(r.Stderr, "verifying its tip only") {
		t.Fatalf("first push: %s", r)
	}
	commit := func(msg string, args ...string) string {
		for _, f := range args {
			e.WriteFile(f, f+"\n")
			e.Git("add", f)
		}
		e.Git("commit", "-qm", msg)
		return e.Git("rev-parse", "HEAD")
	}
	first := commit("add a", "a.txt")
	bad := commit("add bad", "bad.txt")
	commit("add c", "c.txt")
	r := e.push("main")
	if r.Code == 0 {
		t.Fatalf("a push whose middle commit fails verify went through: %s", r)
	}
	if !strings.Contains(r.Stderr, "verify failed on the pushed commit "+bad[:12]+" (add bad;") || !strings.Contains(r.Stderr, "1 later commit(s) were not verified") {
		t.Errorf("the refusal does not name the failing commit: %s", r)
	}
	if !strings.Contains(r.Stderr, first[:12]+" add a) [1/3]") || !strings.Contains(r.Stderr, bad[:12]+" add bad) [2/3]") || strings.Contains(r.Stderr, "[3/3]") {
		t.Errorf("not verified in order, stopping at the failure: %s", r)
	}
	if got := e.Run(e.Repo, nil, "git", "--git-dir", remote, "rev-parse", "main").Stdout; strings.TrimSpace(got) == e.Git("rev-parse", "main") {
		t.Errorf("the remote got the refused commits")
	}
	// Dropping the failing commit makes the push pass; the commit the
	// remote already has is not verified again.
	e.Git("rebase", "-q", "--onto", first, bad, "main")
	r = e.push("main")
	if r.Code != 0 || !strings.Contains(r.Stderr, "[2/2]") || strings.Contains(r.Stderr, "[3/") {
		t.Errorf("push after dropping the failing commit: %s", r)
	}
	e.Git("commit", "--allow-empty", "-qm", "empty")
	if r := e.push("main"); r.Code != 0 || !strings.Contains(r.Stderr, "verifying refs/heads/main") || strings.Contains(r.Stderr, "[") {
		t.Errorf("push of one more commit: %s", r)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=verify").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("verify containers left: %s", out)
	}
}
