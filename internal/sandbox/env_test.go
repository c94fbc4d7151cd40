package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/testenv"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// The fake implements the whole seam.
var _ Engine = (*enginefake.Engine)(nil)

// TestMain keeps the user's git configuration and state out, and makes
// the stand-in for the egress proxy's static binary.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, "sandbox", func(root string) error {
		return writeTestProxyBinary(filepath.Join(root, "proxy-bin"))
	}))
}

// testProxyBinary stands for git-sandbox in the proxy's image: the test
// binary is not git-sandbox, and under -race not static either.
var testProxyBinary proxyimage.Binary

func writeTestProxyBinary(path string) error {
	data := []byte("not really git-sandbox\n")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	testProxyBinary = proxyimage.Binary{File: path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	return nil
}

// testEnv is a repository with one commit on main, a state directory, and
// an Env whose engine is the fake.
type testEnv struct {
	t     *testing.T
	root  string
	repo  string // main worktree
	env   *Env
	fake  *enginefake.Engine
	err   bytes.Buffer
	mu    sync.Mutex
	spawn []string // branches a supervisor was started for
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	te := &testEnv{t: t, root: root, repo: filepath.Join(root, "src", "repo")}
	if err := os.MkdirAll(te.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	te.git("init", "-q", "-b", "main")
	te.write("README", "hello\n")
	te.write("lib.txt", "one\ntwo\nthree\n")
	te.git("add", "-A")
	te.git("commit", "-q", "-m", "initial")
	te.fake = enginefake.New(config.DefaultImage())
	te.fake.MovesImages = true // the proxy's image is loaded, as on Docker
	te.reopen()
	return te
}

// reopen builds a fresh Env on the same repository and fake engine (as a
// new git sandbox command would).
func (te *testEnv) reopen() {
	te.t.Helper()
	repo, err := worktree.Open(context.Background(), te.repo)
	if err != nil {
		te.t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.Agent = "shell"
	// Tests of allowlist mode ask for it; the rest need no proxy.
	cfg.Network = container.NetworkNone
	te.env = NewEnv(repo, cfg, filepath.Join(te.root, "state"), ui.New(&te.err, ui.Options{NoColor: true}))
	te.env.Engines = ConnectorFunc(func(context.Context, string) (Engine, error) { return te.fake, nil })
	te.env.Background = testBackground{te}
	te.env.ProxyBinary = ProxyBinaryFunc(func() (proxyimage.Binary, error) { return testProxyBinary, nil })
}

// testBackground records the supervisors a start asks for (the test's
// executable is not git-sandbox) and purges the trash in place.
type testBackground struct{ te *testEnv }

func (b testBackground) Supervise(branch string) error {
	b.te.mu.Lock()
	defer b.te.mu.Unlock()
	b.te.spawn = append(b.te.spawn, branch)
	return nil
}

func (testBackground) Purge(trash string) error { return workspace.Purge(trash) }

// failAt fails a flow after the named step.
type failAt struct {
	step string
	err  error
}

func (f failAt) At(step string) error {
	if step == f.step {
		return f.err
	}
	return nil
}

// clockFunc is a Clock of a function.
type clockFunc func(d time.Duration) <-chan time.Time

func (f clockFunc) After(d time.Duration) <-chan time.Time { return f(d) }

// git runs git in the main worktree and returns its trimmed output.
func (te *testEnv) git(args ...string) string {
	te.t.Helper()
	out, err := te.gitErr(args...)
	if err != nil {
		te.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (te *testEnv) gitErr(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = te.repo
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// gitIn runs git in dir.
func (te *testEnv) gitIn(dir string, args ...string) string {
	te.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		te.t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (te *testEnv) write(rel, content string) { te.writeIn(te.repo, rel, content) }

func (te *testEnv) writeIn(dir, rel, content string) {
	te.t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		te.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		te.t.Fatal(err)
	}
}

// refExists reports whether ref resolves in the repository.
func (te *testEnv) refExists(ref string) bool {
	_, err := te.gitErr("rev-parse", "--verify", "--quiet", ref)
	return err == nil
}

// sandboxRefs lists refs/sandbox/*.
func (te *testEnv) sandboxRefs() []string {
	out := te.git("for-each-ref", "--format=%(refname)", "refs/sandbox/")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func detached(branch string, args ...string) StartOptions {
	if len(args) == 0 {
		args = []string{"sleep", "infinity"}
	}
	return StartOptions{Branch: branch, Detach: true, Args: args, IO: IO{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}}
}

// start creates a detached sandbox that must succeed.
func (te *testEnv) start(branch string) *Sandbox {
	te.t.Helper()
	res, err := te.env.Start(context.Background(), detached(branch))
	if err != nil {
		te.t.Fatalf("start %s: %v", branch, err)
	}
	return res.Sandbox
}

// find reloads a sandbox from a fresh Env.
func (te *testEnv) find(branch string) *Sandbox {
	te.t.Helper()
	te.reopen()
	sb, err := te.env.Find(branch)
	if err != nil {
		te.t.Fatal(err)
	}
	return sb
}

// assertNothingLeft checks that no trace of a sandbox of branch remains but
// its snapshot refs (when keepRefs).
func (te *testEnv) assertNothingLeft(branch string, keepRefs bool) {
	te.t.Helper()
	l := te.env.Layout
	if te.refExists("refs/heads/" + branch) {
		te.t.Errorf("branch %s left behind", branch)
	}
	for _, p := range []string{l.Dir(branch), l.Worktree(branch)} {
		if _, err := os.Lstat(p); err == nil {
			te.t.Errorf("%s left behind", p)
		}
	}
	if wl := te.git("worktree", "list", "--porcelain"); strings.Contains(wl, "worktree "+l.Worktree(branch)+"\n") {
		te.t.Errorf("its linked worktree is left:\n%s", wl)
	}
	prefix := rescue.Refs{Branch: branch}.Rescue()
	prefix = prefix[:strings.LastIndex(prefix, "/")+1]
	for _, r := range te.sandboxRefs() {
		if !keepRefs && strings.HasPrefix(r, prefix) {
			te.t.Errorf("sandbox ref left: %s", r)
		}
	}
	if te.refExists(rescue.Refs{Branch: branch}.Agent()) {
		te.t.Errorf("agent ref left")
	}
	for _, c := range te.fake.Containers() {
		if c.Spec.Labels[container.LabelBranch] == branch {
			te.t.Errorf("container %s left (%s)", c.Name, c.Status)
		}
	}
	nets, _ := te.fake.ListNetworks(context.Background(), container.LabelBranch+"="+branch)
	for _, n := range nets {
		te.t.Errorf("network %s left", n.Name)
	}
}

// waitFor polls cond for up to 30 seconds (race detector, loaded machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
