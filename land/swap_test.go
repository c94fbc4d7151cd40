package land

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// fakeSandbox is a stopped sandbox whose final snapshot is final, landing
// onto main of r; onLock runs each time the land takes the base's lock
// (another land, or the user, moving main first).
type fakeSandbox struct {
	r        *repo
	rec      *record.Record
	final    string
	hooks    []string
	hookRuns []string // the trees the commit hooks ran on
	onLock   func(n int)
	onHooks  func()
	locks    int
	landed   gitcmd.Hash
}

func (f *fakeSandbox) Recorded() *record.Record                         { return f.rec }
func (f *fakeSandbox) Display() string                                  { return f.rec.Branch }
func (f *fakeSandbox) Where() string                                    { return "" }
func (f *fakeSandbox) Git() *gitcmd.Runner                              { return f.r.g }
func (f *fakeSandbox) Running(context.Context) (bool, error)            { return false, nil }
func (f *fakeSandbox) UpdateFromBase(context.Context) ([]string, error) { return nil, nil }
func (f *fakeSandbox) LockVerify() (func(), error)                      { return func() {}, nil }
func (f *fakeSandbox) InsideSandboxes(string) bool                      { return false }
func (f *fakeSandbox) NestedRefusal([]string) error                     { return nil }

func (f *fakeSandbox) FinalSnapshot(ctx context.Context, _ rescue.Reason) (*rescue.Taken, string, error) {
	tree, err := f.r.g.RevParse(ctx, f.final+"^{tree}")
	return &rescue.Taken{Snapshot: rescue.Snapshot{ID: f.final, Tree: tree.String()}}, "", err
}

func (f *fakeSandbox) VerifyTree(context.Context, string, io.Writer) (*record.Verdict, error) {
	return &record.Verdict{OK: true}, nil
}

func (f *fakeSandbox) CommitHooks(context.Context) (string, []string, error) {
	return "hooks", f.hooks, nil
}

func (f *fakeSandbox) RunCommitHooks(_ context.Context, p *Plan, _ string, _ []string, _ io.Writer) (string, error) {
	f.hookRuns = append(f.hookRuns, p.Tree.String())
	if f.onHooks != nil {
		f.onHooks()
	}
	return p.Message, nil
}

func (f *fakeSandbox) LockBase(ref string) (string, func(), error) {
	f.locks++
	if f.onLock != nil {
		f.onLock(f.locks)
	}
	return filepath.Join(f.r.dir, "land.journal"), func() {}, nil
}

func (f *fakeSandbox) Landed(_ context.Context, l Landed) error {
	f.landed = l.Commit
	return nil
}

// newLanding is a repository whose main is base, and a sandbox started
// there whose work adds mine.txt.
func newLanding(t *testing.T) (*repo, *fakeSandbox, string) {
	r := newRepo(t)
	base := r.commit("", map[string]string{"a.txt": "a\n"})
	r.setRef("refs/heads/main", base)
	final := r.commit(base, map[string]string{"a.txt": "a\n", "mine.txt": "mine\n"})
	sb := &fakeSandbox{r: r, final: final, rec: &record.Record{Branch: "t1", Base: "main", Baseline: base, Start: base}}
	return r, sb, base
}

// moveMain lands another change on main, as a land from another process
// does.
func moveMain(r *repo, name string) {
	tip := r.ref("refs/heads/main")
	files := map[string]string{"a.txt": "a\n", name: name + "\n"}
	for _, l := range strings.Split(lsTree(r, tip), "\n") {
		if l != "" && l != "a.txt" {
			files[l] = l + "\n"
		}
	}
	r.setRef("refs/heads/main", r.commit(tip, files))
}

// A land whose base moved after its plan plans again on the new tip and
// lands there once, keeping the other change.
func TestLandPlansAgainWhenTheBaseMoved(t *testing.T) {
	r, sb, _ := newLanding(t)
	sb.onLock = func(n int) {
		if n == 1 {
			moveMain(r, "other.txt")
		}
	}
	res, err := Land(context.Background(), sb, Request{})
	if err != nil {
		t.Fatal(err)
	}
	tip := r.ref("refs/heads/main")
	if res.Commit.String() != tip || sb.landed.String() != tip {
		t.Fatalf("main is %s, land made %s", tip, res.Commit)
	}
	if got := lsTree(r, tip); got != "a.txt\nmine.txt\nother.txt" {
		t.Errorf("main holds %q", got)
	}
	if sb.locks != 1 {
		t.Errorf("took the lock %d times; one attempt was enough", sb.locks)
	}
}

// The user's commit hooks ran on a merged tree that no longer lands: they
// run again on the new one.
func TestLandRunsTheCommitHooksAgainOnTheNewTree(t *testing.T) {
	r, sb, _ := newLanding(t)
	sb.hooks = []string{"pre-commit"}
	sb.onLock = func(n int) {
		if n == 1 {
			moveMain(r, "other.txt")
		}
	}
	res, err := Land(context.Background(), sb, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.hookRuns) != 2 || sb.hookRuns[1] != res.Plan.Tree.String() || sb.hookRuns[0] == sb.hookRuns[1] {
		t.Errorf("hooks ran on %v; the landed tree is %s", sb.hookRuns, res.Plan.Tree)
	}
}

// Something that moves the base without the lock every time (here the
// user's hook, each time it runs) makes land give up after a bounded
// number of attempts, having changed nothing.
func TestLandGivesUpWhenTheBaseKeepsMoving(t *testing.T) {
	swapPause = 0
	r, sb, _ := newLanding(t)
	sb.hooks = []string{"pre-commit"}
	sb.onHooks = func() { moveMain(r, fmt.Sprintf("user%d.txt", len(sb.hookRuns))) }
	res, err := Land(context.Background(), sb, Request{})
	if !errors.Is(err, ErrMoved) || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("err = %v, want ErrMoved after %d attempts", err, swapAttempts)
	}
	if sb.locks != swapAttempts {
		t.Errorf("%d attempts, want %d", sb.locks, swapAttempts)
	}
	if res.Commit != "" || sb.landed != "" {
		t.Errorf("landed %s", res.Commit)
	}
	if strings.Contains(lsTree(r, r.ref("refs/heads/main")), "mine.txt") {
		t.Error("main holds the sandbox's change")
	}
}

// lsTree lists the paths of a commit's tree, one a line.
func lsTree(r *repo, rev string) string {
	out, err := r.g.Output(context.Background(), "ls-tree", "-r", "--name-only", rev)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// A land killed after it updated the base's checkout but before it moved
// the branch left its journal: Recover puts the checkout back to the
// branch's tip and takes the journal off; a journal whose branch moved
// needs nothing.
func TestRecoverPutsTheCheckoutBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	git("init", "-q", "-b", "main")
	git("-c", "user.name=a", "-c", "user.email=a@x", "commit", "-q", "--allow-empty", "-m", "one")
	tip := gitcmd.Hash(git("rev-parse", "HEAD"))
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "new.txt")
	tree := git("write-tree")
	commit := gitcmd.Hash(git("-c", "user.name=a", "-c", "user.email=a@x", "commit-tree", tree, "-p", tip.String(), "-m", "landed"))
	// The dead land's read-tree: index and files at commit, main at tip.
	path := filepath.Join(t.TempDir(), "main.journal")
	j := &journal{Ref: "refs/heads/main", Tip: tip, Commit: commit, Checkout: dir, CheckoutGitDir: filepath.Join(dir, ".git")}
	if err := j.write(path); err != nil {
		t.Fatal(err)
	}
	g := &gitcmd.Runner{GitDir: filepath.Join(dir, ".git")}
	what, err := Recover(ctx, g, path)
	if err != nil || !strings.Contains(what, "put the checkout back") {
		t.Fatalf("Recover = %q, %v", what, err)
	}
	if st := git("status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Errorf("the checkout is not back at main:\n%s", st)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the journal stayed: %v", err)
	}
	// The branch moved: nothing to repair.
	git("update-ref", "refs/heads/main", commit.String())
	git("read-tree", "-u", "--reset", "HEAD")
	if err := j.write(path); err != nil {
		t.Fatal(err)
	}
	if what, err := Recover(ctx, g, path); err != nil || !strings.Contains(what, "nothing to repair") {
		t.Fatalf("Recover = %q, %v", what, err)
	}
	if what, err := Recover(ctx, g, path); err != nil || what != "" {
		t.Fatalf("Recover without a journal = %q, %v", what, err)
	}
}

// A land killed after it moved the base but before it removed the sandbox
// is finished by the next land: the base holds the commit that names the
// final snapshot.
func TestLandFinishesALandThatMovedTheBase(t *testing.T) {
	ctx := context.Background()
	r, sb, base := newLanding(t)
	sb.rec.BaseTip = base
	tree, err := r.g.RevParse(ctx, sb.final+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	landed, err := r.g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: tree, Parents: []gitcmd.Hash{gitcmd.Hash(base)},
		Message: "work\n\nSandbox: t1\nSandbox-Snapshot: " + sb.final + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	r.setRef("refs/heads/main", landed.String())
	res, err := Land(ctx, sb, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Already || res.Commit != landed || sb.landed != landed || !res.Cleaned {
		t.Errorf("Already %v, commit %s, Landed told %s; want %s", res.Already, res.Commit, sb.landed, landed)
	}
	if got := r.ref("refs/heads/main"); got != landed.String() {
		t.Errorf("main moved again to %s", got)
	}
	// Work that merely matches the base is nothing to land, not a land to
	// finish.
	r2, sb2, base2 := newLanding(t)
	sb2.rec.BaseTip = base2
	r2.setRef("refs/heads/main", r2.commit(base2, map[string]string{"a.txt": "a\n", "mine.txt": "mine\n"}))
	res, err = Land(ctx, sb2, Request{})
	if err != nil || res.Already || !res.Plan.Empty || sb2.landed != "" {
		t.Errorf("Already %v, Empty %v, Landed told %q, err %v", res.Already, res.Plan.Empty, sb2.landed, err)
	}
}
