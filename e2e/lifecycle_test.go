package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentWork is a shell agent that reports git status at start, writes
// files, commits one and leaves another uncommitted, and prints the commit.
const agentWork = `
echo "status-at-start:[$(git status --porcelain)]"
mkdir -p src
echo 'package main' > src/main.go
git add src/main.go
git commit -q -m "agent: add main.go"
echo "agent-commit:$(git rev-parse HEAD)"
echo 'work in progress' > notes.txt
`

func TestShellAgentWorksInItsOwnRepository(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	checkAgentWork(t, e)
}

// TestShellAgentAsNonRootUser runs the same agent with the CLI run by an
// unprivileged user the test creates: files must belong to that user.
func TestShellAgentAsNonRootUser(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		// This whole suite already runs as a non-root user.
		e := NewEnv(t)
		checkAgentWork(t, e)
		return
	}
	cred := testUser(t)
	root := t.TempDir()
	// t.TempDir parents are private to root; open the path for the user.
	for p := root; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		must(t, os.Chmod(p, 0o755))
	}
	e := newEnvAt(t, root, cred)
	checkAgentWork(t, e)
}

func checkAgentWork(t *testing.T, e *Env) {
	t.Helper()
	before := e.HostState()
	r := e.Sandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", agentWork)
	if r.Code != 0 {
		t.Fatalf("start: %s", r)
	}
	if !strings.Contains(r.Stdout, "status-at-start:[]") {
		t.Errorf("git status in the container was not clean at start:\n%s", r.Stdout)
	}
	commit := between(r.Stdout, "agent-commit:", "\n")
	if len(commit) != 40 {
		t.Fatalf("agent did not report its commit:\n%s", r)
	}
	wt := e.Worktree("t1")
	uid := os.Getuid()
	if e.Cred != nil {
		uid = int(e.Cred.uid)
	}
	for _, f := range []string{"src/main.go", "notes.txt", "src"} {
		fi, err := os.Stat(filepath.Join(wt, f))
		if err != nil {
			t.Fatalf("agent file %s missing from the worktree: %v", f, err)
		}
		if owner := fi.Sys().(*syscall.Stat_t).Uid; int(owner) != uid {
			t.Errorf("%s is owned by uid %d, want the invoking user %d", f, owner, uid)
		}
	}
	// The commit lives in the agent's repository only.
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", commit); r.Code == 0 {
		t.Errorf("the agent's commit %s is in the host object store", commit)
	}
	if refs := e.Git("for-each-ref", "--format=%(objectname)"); strings.Contains(refs, commit) {
		t.Errorf("a host ref points at the agent's commit")
	}
	priv := e.PrivateGitDir("t1")
	if r := e.Run(e.Repo, nil, "git", "--git-dir", priv, "cat-file", "-t", commit); strings.TrimSpace(r.Stdout) != "commit" {
		t.Errorf("the agent's commit is not in its private repository: %s", r)
	}
	if got := e.Git("rev-parse", "refs/heads/t1"); got != e.Git("rev-parse", "main") {
		t.Errorf("host branch t1 moved to %s", got)
	}
	e.AssertSameHostState(before, "t1")
}

func testUser(t testing.TB) *userCred {
	t.Helper()
	const name = "gsbx-e2e"
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", "--groups", "docker", name).CombinedOutput()
		if err != nil {
			if _, lerr := user.Lookup(name); lerr != nil {
				t.Fatalf("useradd: %v\n%s", err, out)
			}
		}
	}
	u, err := user.Lookup(name)
	must(t, err)
	g, err := user.LookupGroup("docker")
	if err != nil {
		t.Fatalf("no docker group for the test user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dg, _ := strconv.Atoi(g.Gid)
	return &userCred{uid: uint32(uid), gid: uint32(gid), dockerGid: uint32(dg)}
}

// attackGitMetadata tries every write to git metadata the agent can name.
const attackGitMetadata = `
try() { if sh -c "$1" 2>/dev/null; then echo "WROTE: $2"; else echo "refused: $2"; fi; }
objects="$HOST_GIT/objects"
hooks="$HOST_GIT/hooks"
try "echo evil > $hooks/pre-commit" "host hooks"
try "chmod +x $hooks/pre-push.sample" "host hook mode"
try "echo evil > $objects/evil" "host object store"
try "echo evil > $VISIBLE/evil" "visible object store"
try "mkdir -p $VISIBLE/ab && echo x > $VISIBLE/ab/cdef" "visible object fanout"
try "mkdir -p $VISIBLE/pack/x" "visible pack directory"
try "echo evil > $GIVEN/evil" "given object store"
try "echo 'gitdir: /tmp/evil' > /workspace/.git" "/workspace/.git"
try "rm -f /workspace/.git" "rm /workspace/.git"
try "mv /workspace/.git /workspace/.git.moved" "mv /workspace/.git"
try "ln -sf /tmp/evil /workspace/.git" "ln -sf /workspace/.git"
try "test -e $HOST_GIT/config && echo x >> $HOST_GIT/config" "host .git/config"
echo done
`

func TestAgentCannotWriteHostGitMetadata(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	hostGit := filepath.Join(e.Repo, ".git")
	before := e.HostState()
	r := e.Sandbox("start", "attack", "--agent", "shell", "-e", "HOST_GIT="+hostGit,
		"-e", "VISIBLE="+e.VisibleObjects(), "-e", "GIVEN="+e.GivenObjects("attack"), "--", "sh", "-c", attackGitMetadata)
	if r.Code != 0 {
		t.Fatalf("start: %s", r)
	}
	if strings.Contains(r.Stdout, "WROTE:") || !strings.Contains(r.Stdout, "done") {
		t.Errorf("the agent wrote host git metadata:\n%s", r.Stdout)
	}
	for _, what := range []string{"host hooks", "host object store", "visible object store", "visible object fanout", "visible pack directory", "given object store", "/workspace/.git", "rm /workspace/.git", "mv /workspace/.git"} {
		if !strings.Contains(r.Stdout, "refused: "+what) {
			t.Errorf("no refusal reported for %s:\n%s", what, r.Stdout)
		}
	}
	e.AssertSameHostState(before, "attack")
	// The worktree's own gitfile, which the host's git uses, is unchanged.
	wt := e.Worktree("attack")
	b, err := os.ReadFile(filepath.Join(wt, ".git"))
	must(t, err)
	if !strings.HasPrefix(string(b), "gitdir: "+hostGit+"/worktrees/") {
		t.Errorf("the worktree gitfile changed: %q", b)
	}
	if st := e.GitIn(wt, "status", "--porcelain"); st != "" {
		t.Errorf("git status in the sandbox worktree on the host: %q", st)
	}
}

func TestLifecycleCommands(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	script := `echo "hello from the agent"; while [ ! -e /workspace/go ]; do sleep 0.1; done; echo finishing; exit 7`
	r := e.MustSandbox("start", "t2", "-d", "--agent", "shell", "--", "sh", "-c", script)
	if !strings.Contains(r.Stderr, "started sandbox t2") {
		t.Errorf("start -d did not say it started:\n%s", r)
	}
	p := e.PsOf("t2")
	if p.State != "running" || p.Agent != "shell" || p.Base != "main" || p.Container == "" || len(p.Baseline) != 40 || p.ExitCode != nil {
		t.Errorf("ps while running = %+v", p)
	}
	Eventually(t, 30*time.Second, "the agent's output in logs", func() bool {
		return strings.Contains(e.Sandbox("logs", "t2").Stdout, "hello from the agent")
	})
	x := e.Sandbox("exec", "t2", "--", "sh", "-c", "id -u; pwd; exit 3")
	if x.Code != 3 || !strings.Contains(x.Stdout, "/workspace") || !strings.Contains(x.Stdout, strconv.Itoa(os.Getuid())) {
		t.Errorf("exec: %s", x)
	}
	if w := e.Sandbox("wait", "t2", "--timeout", "1s"); w.Code != 124 || !strings.Contains(w.Stderr, "still running") {
		t.Errorf("wait --timeout on a running agent: %s", w)
	}
	e.MustSandbox("stop", "t2", "--timeout", "2s")
	if p := e.PsOf("t2"); p.State != "stopped" {
		t.Errorf("ps after stop: %+v", p)
	}
	// Rerun: the same container starts again; this time the agent finishes.
	must(t, os.WriteFile(filepath.Join(e.Worktree("t2"), "go"), nil, 0o644))
	e.MustSandbox("start", "t2", "-d", "--rerun")
	if w := e.Sandbox("wait", "t2"); w.Code != 7 {
		t.Errorf("wait did not pass the agent's exit code 7 through: %s", w)
	}
	p = e.PsOf("t2")
	if p.State != "exited" || p.ExitCode == nil || *p.ExitCode != 7 {
		t.Errorf("ps after exit = %+v", p)
	}
	logs := e.Sandbox("logs", "t2").Stdout
	if strings.Count(logs, "hello from the agent") != 2 || !strings.Contains(logs, "finishing") {
		t.Errorf("logs after resume:\n%s", logs)
	}
	// exec works after the agent exited (in a fresh container), and the
	// agent stays exited.
	if r := e.Sandbox("exec", "t2", "--", "sh", "-c", "exit 5"); r.Code != 5 {
		t.Errorf("exec in an exited sandbox: %s", r)
	}
	if p := e.PsOf("t2"); p.State != "exited" {
		t.Errorf("ps after exec in an exited sandbox: %+v", p)
	}
	// The agent created go: rm refuses without --force, then removes it all.
	if r := e.Sandbox("rm", "t2"); r.Code != 4 || !strings.Contains(r.Stderr, "not landed") {
		t.Errorf("rm of unlanded work: %s", r)
	}
	e.MustSandbox("rm", "--force", "t2")
	if list := e.Ps(); len(list) != 0 {
		t.Errorf("ps after rm: %+v", list)
	}
	if out := e.Git("branch", "--list", "t2"); out != "" {
		t.Errorf("branch t2 left after rm: %q", out)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "name="+p.Container).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("container %s left after rm", p.Container)
	}
	if _, err := os.Stat(p.Worktree); !os.IsNotExist(err) {
		t.Errorf("worktree left after rm: %v", err)
	}
	if wl := e.Git("worktree", "list", "--porcelain"); strings.Contains(wl, "t2") {
		t.Errorf("git still lists the worktree:\n%s", wl)
	}
}

func TestWaitPassesExitCodeOfAttachedStart(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Sandbox("start", "fail", "--agent", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 42")
	if r.Code != 42 || !strings.Contains(r.Stdout, "out") || !strings.Contains(r.Stderr, "err") {
		t.Errorf("attached start: %s", r)
	}
	if w := e.Sandbox("wait", "fail"); w.Code != 42 {
		t.Errorf("wait after exit: %s", w)
	}
}

func TestDockerUnreachableLeavesNothing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	before := e.HostState()
	r := e.Run(e.Repo, []string{"DOCKER_HOST=unix://" + filepath.Join(e.Root, "no-daemon.sock")}, "git", "sandbox", "start", "t1", "--agent", "shell", "--", "true")
	if r.Code == 0 {
		t.Fatalf("start succeeded without Docker: %s", r)
	}
	if !strings.Contains(r.Stderr, "cannot reach the Docker daemon") || !strings.Contains(r.Stderr, "hint:") {
		t.Errorf("unclear error without Docker:\n%s", r.Stderr)
	}
	e.AssertSameHostState(before)
	if b := e.Git("branch", "--list", "t1"); b != "" {
		t.Errorf("branch left behind: %q", b)
	}
	if _, err := os.Stat(e.State); err == nil {
		entries, _ := os.ReadDir(filepath.Join(e.State, e.RepoID()))
		if len(entries) > 0 {
			t.Errorf("state left behind: %v", entries)
		}
	}
	if wl := e.Git("worktree", "list"); strings.Count(wl, "\n") > 0 {
		t.Errorf("worktree left behind:\n%s", wl)
	}
	// ps still works, from the records, and says Docker's state is unknown.
	if r := e.Run(e.Repo, []string{"DOCKER_HOST=unix:///nonexistent.sock"}, "git", "sandbox", "ps"); r.Code != 0 {
		t.Errorf("ps without Docker: %s", r)
	}
}

func TestPsWithoutDockerShowsUnknown(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "true")
	r := e.Run(e.Repo, []string{"DOCKER_HOST=unix:///nonexistent.sock"}, "git", "sandbox", "ps", "--json")
	if r.Code != 0 || !strings.Contains(r.Stdout, `"state": "unknown"`) || !strings.Contains(r.Stdout, `"branch": "t1"`) {
		t.Errorf("ps --json without Docker: %s", r)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	notRepo := t.TempDir()
	bare := filepath.Join(e.Root, "bare.git")
	e.Git("clone", "-q", "--bare", e.Repo, bare)
	e.Git("branch", "taken")
	e.MustSandbox("start", "exists", "--agent", "shell", "--", "true")
	tests := []struct {
		name string
		dir  string
		args []string
		want string
	}{
		{"not a repository", notRepo, []string{"start", "x", "--agent", "shell", "--", "true"}, "not a git repository"},
		{"bare repository", bare, []string{"start", "x", "--agent", "shell", "--", "true"}, "bare repository"},
		{"invalid branch", e.Repo, []string{"start", "bad..name", "--agent", "shell", "--", "true"}, "invalid branch name"},
		{"branch exists", e.Repo, []string{"start", "taken", "--agent", "shell", "--", "true"}, "already exists and is not a sandbox"},
		{"missing named image", e.Repo, []string{"start", "x", "--image", "no-such-image:1", "--agent", "shell", "--", "true"}, "image no-such-image:1 is not present"},
		{"unknown agent", e.Repo, []string{"start", "x", "--agent", "gpt", "--", "true"}, "unknown agent"},
		{"interactive without a terminal", e.Repo, []string{"start", "x", "--agent", "claude"}, "needs a terminal"},
		{"bad base", e.Repo, []string{"start", "x", "--base", "nope", "--agent", "shell", "--", "true"}, "is not a commit"},
	}
	for _, tt := range tests {
		r := e.Run(tt.dir, nil, "git", append([]string{"sandbox"}, tt.args...)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, tt.want) || !strings.Contains(r.Stderr, "hint:") {
			t.Errorf("%s: want an error with %q and a hint, got %s", tt.name, tt.want, r)
		}
		if tt.dir == e.Repo {
			if b := e.Git("branch", "--list", "x"); b != "" {
				t.Errorf("%s: branch x left behind", tt.name)
			}
		}
	}
	// A worktree path that is taken.
	wt := filepath.Join(e.State, e.RepoID(), "y", "worktree")
	must(t, os.MkdirAll(wt, 0o755))
	if r := e.Sandbox("start", "y", "--agent", "shell", "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "already taken") {
		t.Errorf("worktree path taken: %s", r)
	}
	if b := e.Git("branch", "--list", "y"); b != "" {
		t.Errorf("branch y created although its worktree path was taken")
	}
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	if j := strings.Index(s, end); j >= 0 {
		return s[:j]
	}
	return s
}
