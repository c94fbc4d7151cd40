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

// writeHook writes an executable hook into the repository's hooks
// directory.
func (e *Env) writeHook(name, script string) {
	e.t.Helper()
	dir := filepath.Join(e.Repo, ".git", "hooks")
	must(e.t, os.MkdirAll(dir, 0o755))
	must(e.t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
}

// The user's pre-commit and commit-msg hooks run for the landed commit in
// a container, on a copy of the landed tree that is a repository of its
// own; a failing hook refuses, --no-verify skips and says so in the commit.
func TestLandRunsCommitHooksInAContainer(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	onHost := filepath.Join(e.Root, "hook-ran-on-host")
	e.writeHook("pre-commit", `#!/bin/sh
touch '`+onHost+`' 2>/dev/null
inside=no; [ -f /.dockerenv ] && [ "$GIT_SANDBOX" = 1 ] && inside=yes
echo "pre-commit: inside=$inside branch=$(git symbolic-ref --short HEAD) staged=$(git diff --cached --name-only | tr '\n' ' ')"
if [ -e forbidden.txt ]; then echo "pre-commit: forbidden.txt is not allowed"; exit 1; fi
`)
	e.writeHook("commit-msg", `#!/bin/sh
touch '`+onHost+`' 2>/dev/null
inside=no; [ -f /.dockerenv ] && [ "$GIT_SANDBOX" = 1 ] && inside=yes
echo "commit-msg: inside=$inside"
head -1 "$1" | grep -q '^feat' || { echo "commit-msg: the subject must start with feat" >&2; exit 1; }
git interpret-trailers --in-place --trailer "Reviewed-by: the hook" "$1"
`)
	tip := e.Git("rev-parse", "main")

	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo good > good.txt`)
	r := e.Sandbox("land", "t1", "-m", "fix: not a feature")
	if r.Code != 4 || !strings.Contains(r.Stderr, "the subject must start with feat") || !strings.Contains(r.Stderr, "commit-msg hook refused the land") {
		t.Fatalf("land past a failing commit-msg hook: %s", r)
	}
	if !strings.Contains(r.Stderr, "commit-msg: inside=yes") || !strings.Contains(r.Stderr, "pre-commit: inside=yes branch=main staged=good.txt ") {
		t.Errorf("the hooks did not run in a container on the landed tree: %s", r)
	}
	if _, err := os.Stat(onHost); err == nil {
		t.Errorf("a hook ran on the host")
	}
	if got := e.Git("rev-parse", "main"); got != tip {
		t.Errorf("main moved although the hook refused")
	}

	r = e.MustSandbox("land", "t1", "-m", "feat: good\n\nSigned-off-by: Test User <test@example.com>")
	if !strings.Contains(r.Stderr, "running your pre-commit and commit-msg hook(s)") {
		t.Errorf("land did not say it ran the hooks: %s", r)
	}
	got := e.parsedTrailers("main")
	for _, want := range []string{"Signed-off-by: Test User <test@example.com>\n", "Reviewed-by: the hook\n", "Sandbox: t1\n", "Sandbox-Snapshot: "} {
		if !strings.Contains(got, want) {
			t.Errorf("trailers of the landed commit lack %q:\n%s", want, got)
		}
	}
	if subj := e.Git("log", "-1", "--format=%s", "main"); subj != "feat: good" {
		t.Errorf("subject = %q", subj)
	}
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("checkout not clean after land:\n%s", st)
	}

	// A failing pre-commit refuses; --no-verify lands and says so.
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `echo no > forbidden.txt`)
	tip = e.Git("rev-parse", "main")
	if r := e.MustSandbox("land", "t2", "--dry-run"); !strings.Contains(r.Stderr, "your pre-commit and commit-msg hook(s) would run") || strings.Contains(r.Stderr, "running your") {
		t.Errorf("land --dry-run does not name the hooks, or runs them: %s", r)
	}
	if r := e.Sandbox("land", "t2", "-m", "feat: forbidden"); r.Code != 4 || !strings.Contains(r.Stderr, "forbidden.txt is not allowed") || !strings.Contains(r.Stderr, "pre-commit hook refused the land") || !strings.Contains(r.Stderr, "--no-verify") {
		t.Fatalf("land past a failing pre-commit hook: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != tip {
		t.Errorf("main moved although pre-commit refused")
	}
	r = e.MustSandbox("land", "t2", "-m", "feat: forbidden", "--no-verify")
	if strings.Contains(r.Stderr, "running your") {
		t.Errorf("--no-verify ran the hooks: %s", r)
	}
	if got := e.parsedTrailers("main"); !strings.Contains(got, "Sandbox-No-Verify: pre-commit, commit-msg skipped\n") || strings.Contains(got, "Reviewed-by") {
		t.Errorf("trailers after --no-verify:\n%s", got)
	}
	if _, err := os.Stat(onHost); err == nil {
		t.Errorf("a hook ran on the host")
	}

	// Without hooks nothing runs.
	must(t, os.Remove(filepath.Join(e.Repo, ".git", "hooks", "pre-commit")))
	must(t, os.Chmod(filepath.Join(e.Repo, ".git", "hooks", "commit-msg"), 0o644)) // not executable: git ignores it
	e.MustSandbox("start", "t3", "--agent", "shell", "--", "sh", "-c", `echo three > three.txt`)
	r = e.MustSandbox("land", "t3", "-m", "fix: three", "--no-verify")
	if strings.Contains(r.Stderr, "running your") || strings.Contains(e.parsedTrailers("main"), "No-Verify") {
		t.Errorf("land without hooks: %s\n%s", r, e.parsedTrailers("main"))
	}
}

// husky's layout (core.hooksPath = .husky/_, whose hooks run the tracked
// scripts one level up): the user's own scripts run, not the agent's
// edits of them.
func TestLandRunsHuskyHooksFromTheUsersCheckout(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".husky/pre-commit", "echo \"husky pre-commit ran\"\ntest ! -e bad.txt\n")
	e.Git("add", ".husky/pre-commit")
	e.Git("commit", "-qm", "husky")
	must(t, os.MkdirAll(filepath.Join(e.Repo, ".husky", "_"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.Repo, ".husky", "_", ".gitignore"), []byte("*\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.Repo, ".husky", "_", "h"), []byte(`#!/usr/bin/env sh
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n
[ ! -f "$s" ] && exit 0
export PATH="node_modules/.bin:$PATH"
sh -e "$s" "$@"
c=$?
[ $c != 0 ] && echo "husky - $n script failed (code $c)"
exit $c
`), 0o644))
	must(t, os.WriteFile(filepath.Join(e.Repo, ".husky", "_", "pre-commit"), []byte("#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n"), 0o755))
	e.Git("config", "core.hooksPath", ".husky/_")

	// The agent disarms the tracked script in its copy and adds what it
	// forbids.
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo 'exit 0' > .husky/pre-commit; echo bad > bad.txt`)
	tip := e.Git("rev-parse", "main")
	r := e.Sandbox("land", "t1", "-m", "feat: bad")
	if r.Code != 4 || !strings.Contains(r.Stderr, "husky pre-commit ran") || !strings.Contains(r.Stderr, "pre-commit hook refused the land") {
		t.Fatalf("land past the user's husky pre-commit: %s", r)
	}
	if e.Git("rev-parse", "main") != tip {
		t.Errorf("main moved")
	}
}

// Ctrl-C while the hooks run leaves no container, no copy of the tree, and
// the base where it was; the sandbox can land later.
func TestInterruptedLandHooksLeaveNothing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.writeHook("pre-commit", "#!/bin/sh\nsleep 120\n")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo x > x.txt`)
	tip := e.Git("rev-parse", "main")
	cmd := exec.Command("git", "sandbox", "land", "t1", "-m", "x")
	cmd.Dir = e.Repo
	cmd.Env = e.vars
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	must(t, cmd.Start())
	hooking := func() string {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=hooks").Output()
		return strings.TrimSpace(string(out))
	}
	Eventually(t, 60*time.Second, "the hooks container", func() bool { return hooking() != "" })
	must(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	if err := cmd.Wait(); err == nil {
		t.Errorf("the interrupted land succeeded")
	}
	EventuallyOr(t, 30*time.Second, "the hooks container to go", func() bool { return hooking() == "" }, func() string {
		out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=hooks").CombinedOutput()
		return string(out)
	})
	if _, err := os.Stat(filepath.Join(e.State, e.RepoID(), "t1", "record.json")); err != nil {
		t.Fatalf("the sandbox's state directory is not where the test looks: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.State, e.RepoID(), "t1", "commit-hooks")); !os.IsNotExist(err) {
		t.Errorf("the hooks' copy of the tree is left: %v", err)
	}
	if e.Git("rev-parse", "main") != tip {
		t.Errorf("main moved")
	}
	must(t, os.Remove(filepath.Join(e.Repo, ".git", "hooks", "pre-commit")))
	e.MustSandbox("land", "t1", "-m", "x")
}
