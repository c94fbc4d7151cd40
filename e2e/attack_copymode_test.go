package e2e

// Adversarial tests of copy mode (sandboxes on an engine that sees none of
// this machine's files): what comes back over the wire is checked before
// any ref moves, and the helper that reads the agent's files runs nothing
// the agent wrote.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A snapshot that crosses the wire is checked before any ref moves: a tree
// holding a path git would take for .git is refused, and the newest
// snapshot stays what it was.
func TestCopyModeRefusesAHostileTree(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	// Whoever controls the helper (the agent could, were the helper's git
	// ever to run something the agent wrote) hands back a tree with a .GIT
	// entry: here a git ahead of the real one on the helper's PATH, in an
	// image of the test's own (the helper's root is read-only), that turns
	// hostile once armed (a file in the helper's own volume, its $HOME).
	image := hostileGitImage(t, host)
	e.MustSandbox("start", "h1", "--engine", "two", "--agent", "shell", "--image", image, "--network", "none", "-d", "--", "sleep", "600")
	before := e.Git("rev-parse", "refs/sandbox/h1/rescue")
	ids := containersOn(t, host, e.RepoID())
	var helper string
	for _, id := range ids {
		if dockerAt(t, host, "inspect", "--format", `{{index .Config.Labels "git-sandbox.role"}}`, id) == "helper" {
			helper = id
		}
	}
	if helper == "" {
		t.Fatalf("no helper among %q", ids)
	}
	dockerAt(t, host, "exec", helper, "sh", "-c", `touch "$HOME/.hostile"`)
	if got := dockerAt(t, host, "exec", helper, "sh", "-c", "command -v git"); got != "/usr/local/bin/git" {
		t.Fatalf("the planted git is not the one the helper runs: %q", got)
	}
	r := e.Sandbox("rescue", "snapshot", "h1")
	if r.Code == 0 || !strings.Contains(r.Stderr, "refused") {
		t.Errorf("a tree with .GIT was not refused:\n%s", r)
	}
	if got := e.Git("rev-parse", "refs/sandbox/h1/rescue"); got != before {
		t.Errorf("the rescue ref moved on a refused snapshot: %s -> %s", before, got)
	}
	// The supervisor's interval snapshots are refused too, and one may be
	// importing this instant: under the sandbox's lock none is, and a
	// quarantine found then was left behind.
	unlock := e.HoldSandboxLock("h1")
	if out, err := os.ReadDir(filepath.Join(e.Repo, ".git", "objects")); err == nil {
		for _, d := range out {
			if strings.HasPrefix(d.Name(), "incoming-sandbox-") {
				t.Errorf("quarantine %s left in the object store", d.Name())
			}
		}
	}
	unlock()
	// The helper mended, snapshots come back, and rm works.
	dockerAt(t, host, "exec", helper, "sh", "-c", `rm "$HOME/.hostile"`)
	e.MustSandbox("rm", "--force", "h1")
}

// hostileGitImage makes, on the engine at host, an image of the base
// image whose git (/usr/local/bin, ahead of the real one) answers a
// write-tree with a tree holding .GIT while $HOME/.hostile exists. It is
// removed when the test ends.
func hostileGitImage(t *testing.T, host string) string {
	t.Helper()
	name := "gs-e2e-hostile-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	tag := name + ":test"
	dockerAt(t, host, "run", "--name", name, "--user", "0", baseImage, "sh", "-c", `set -e
cat >/usr/local/bin/git <<'EOF'
#!/bin/sh
if [ -e "$HOME/.hostile" ]; then
	case "$*" in
	*write-tree*) b=$(printf 'x\n' | /usr/bin/git hash-object -w --stdin); printf '100644 blob %s\t.GIT\n' "$b" | /usr/bin/git mktree; exit ;;
	esac
fi
exec /usr/bin/git "$@"
EOF
chmod 755 /usr/local/bin/git`)
	dockerAt(t, host, "commit", name, tag)
	dockerAt(t, host, "rm", name)
	t.Cleanup(func() { _, _ = dockerAtErr(host, "rmi", tag) })
	return tag
}

// A nested repository whose configuration would run a command when git
// looks inside it (core.fsmonitor): the helper's snapshots never run it,
// the first (the gitlink is new) nor the later ones (it is in the index).
func TestCopyModeHelperRunsNothingTheAgentWrote(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	agent := `set -e
mkdir -p sub && cd sub && git init -q && echo x >f && git add f && git -c user.name=a -c user.email=a@b commit -qm x
git config core.fsmonitor 'touch /sandbox-state/PWNED-fsmonitor; false'
git config core.hooksPath /workspace/hooks
mkdir -p /workspace/hooks && printf '#!/bin/sh\ntouch /sandbox-state/PWNED-hook\n' >/workspace/hooks/post-index-change && chmod +x /workspace/hooks/post-index-change
cd .. && ls /sandbox-state 2>/dev/null && echo SEES-STATE || true
echo one >top.txt; sleep 600`
	e.MustSandbox("start", "n1", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "-d", "--", "sh", "-c", agent)

	var helper string
	for _, id := range containersOn(t, host, e.RepoID()) {
		if dockerAt(t, host, "inspect", "--format", `{{index .Config.Labels "git-sandbox.role"}}`, id) == "helper" {
			helper = id
		}
	}
	if helper == "" {
		t.Fatal("no helper")
	}
	Eventually(t, 2*time.Minute, "a snapshot with the nested repository", func() bool {
		r := e.Run(e.Repo, nil, "git", "ls-tree", "refs/sandbox/n1/rescue", "sub")
		return strings.Contains(r.Stdout, "160000")
	})
	// More snapshots, with the gitlink in the helper's index now.
	e.MustSandbox("exec", "n1", "--", "sh", "-c", "echo two >top.txt")
	e.MustSandbox("rescue", "snapshot", "n1")
	e.MustSandbox("exec", "n1", "--", "sh", "-c", "echo three >top.txt; echo y >sub/g")
	e.MustSandbox("rescue", "snapshot", "n1")
	if got := e.Git("show", "refs/sandbox/n1/rescue:top.txt"); got != "three" {
		t.Errorf("snapshot top.txt = %q", got)
	}
	if out := dockerAt(t, host, "exec", helper, "sh", "-c", "ls -A /sandbox-state"); strings.Contains(out, "PWNED") {
		t.Errorf("the helper ran what the agent configured: %s", out)
	}
	if logs := e.Sandbox("logs", "n1").Stdout; strings.Contains(logs, "SEES-STATE") {
		t.Errorf("the agent sees the helper's state volume")
	}
	e.MustSandbox("rm", "--force", "n1")
}

// The agent's commits come back from the engine only as checked objects: a
// commit whose tree holds .GIT (made with mktree, which git add would
// refuse) is refused by sync, and none of its objects reach the user's
// store.
func TestCopyModeRefusesAHostileAgentCommit(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	agent := `set -e
b=$(echo evil | git hash-object -w --stdin)
tr=$(printf '100644 blob %s\t.GIT\n' "$b" | git mktree)
c=$(git commit-tree -p HEAD -m evil "$tr")
git update-ref HEAD "$c"
echo "evil:$c"`
	r := e.MustSandbox("start", "c1", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	_, evil, ok := strings.Cut(r.Stdout, "evil:")
	evil = strings.TrimSpace(evil)
	if !ok || len(evil) != 40 {
		t.Fatalf("agent output:\n%s", r)
	}
	s := e.Sandbox("sync", "c1")
	if s.Code == 0 || !strings.Contains(s.Stderr, "refused") {
		t.Errorf("sync took a commit with a .GIT entry:\n%s", s)
	}
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", evil); r.Code == 0 {
		t.Errorf("the hostile commit %s is in the user's store", evil)
	}
	if got := e.Run(e.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/sandbox/c1/agent"); got.Code == 0 {
		t.Errorf("refs/sandbox/c1/agent was set to %s", got.Stdout)
	}
	e.MustSandbox("rm", "--force", "c1")
}

// A path git cannot store (.GIT/HOOKS) is named by the snapshot and land
// refuses, as in local mode: the files are not dropped without a word.
func TestCopyModeNamesWhatGitCannotStore(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "gs", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--",
		"sh", "-c", "mkdir -p .GIT/HOOKS && echo evil >.GIT/HOOKS/post-checkout && echo ok >ok.txt")
	show := e.MustSandbox("rescue", "show", e.Git("rev-parse", "refs/sandbox/gs/rescue")[:12])
	if !strings.Contains(show.Stdout+show.Stderr, ".GIT") {
		t.Errorf("the snapshot does not name .GIT:\n%s", show)
	}
	if l := e.Sandbox("land", "gs"); l.Code != 4 || !strings.Contains(l.Stderr, ".GIT") || !strings.Contains(l.Stderr, "on engine two") {
		t.Errorf("land of a sandbox holding .GIT/HOOKS: want exit 4 naming it and the engine, got %s", l)
	}
	e.MustSandbox("exec", "gs", "--", "rm", "-rf", ".GIT")
	e.MustSandbox("land", "gs", "-m", "without .GIT")
	if got := e.Git("show", "main:ok.txt"); got != "ok" {
		t.Errorf("main:ok.txt = %q", got)
	}
}
