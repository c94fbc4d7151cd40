package rescue

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/testenv"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// TestMain keeps the user's git configuration out.
func TestMain(m *testing.M) { testenv.Main(m, "rescue") }

// fixture is a repository with one commit and a linked worktree of branch
// t1, snapshotted through a private index as a sandbox's would be.
type fixture struct {
	t     *testing.T
	repo  string
	wt    string
	start string
	snap  *Snapshotter
	local *Local
	host  *gitcmd.Runner
	clock time.Time
	// used is what the snapshots had cost before the last take.
	used int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	return newSerialFixture(t)
}

// newSerialFixture is newFixture for a test that does not run in parallel
// with others (it traces git commands, which is global).
func newSerialFixture(t *testing.T) *fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, repo: filepath.Join(root, "repo"), wt: filepath.Join(root, "wt"), clock: time.Unix(1_800_000_000, 0)}
	if err := os.MkdirAll(f.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	f.git(f.repo, "init", "-q", "-b", "main")
	f.write(f.repo, "README", "hello\n")
	f.write(f.repo, "src/a.txt", "a\n")
	f.git(f.repo, "add", "-A")
	f.git(f.repo, "commit", "-q", "-m", "initial")
	f.start = f.git(f.repo, "rev-parse", "HEAD")
	f.git(f.repo, "worktree", "add", "-q", "-b", "t1", f.wt, "main")
	state := filepath.Join(root, "state")
	common := filepath.Join(f.repo, ".git")
	f.local = &Local{
		CommonDir: common, Start: f.start, Worktree: f.wt,
		Index: filepath.Join(state, "rescue.index"), Scratch: filepath.Join(state, "scratch"),
	}
	f.snap = &Snapshotter{
		CommonDir: common, Branch: "t1", Source: f.local,
		Scratch: filepath.Join(state, "scratch"), Lock: filepath.Join(state, "lock"),
		Start: f.start,
		Now:   func() time.Time { return f.clock },
	}
	f.host = &gitcmd.Runner{GitDir: common}
	return f
}

func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (f *fixture) write(dir, rel, content string) {
	f.t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// take takes a snapshot a second after the previous one.
func (f *fixture) take(reason Reason) *Taken {
	f.t.Helper()
	f.clock = f.clock.Add(time.Second)
	f.used = ReadUsage(f.snap.Usage)
	taken, err := f.snap.Take(context.Background(), reason)
	if err != nil {
		f.t.Fatalf("take %s: %v", reason, err)
	}
	return taken
}

// baseline takes the start snapshot and sets it as the baseline.
func (f *fixture) baseline() *Taken {
	f.t.Helper()
	b := f.take(ReasonStart)
	f.snap.Baseline = b.ID
	return b
}

func (f *fixture) parents(id string) []string {
	return strings.Fields(f.git(f.repo, "rev-list", "--parents", "-n1", id))[1:]
}

func TestTakeBaselineAndIncrements(t *testing.T) {
	f := newFixture(t)
	refs := Refs{Branch: "t1"}
	b := f.baseline()
	if !b.New || b.Changes != 0 || b.Reason != ReasonStart || b.Baseline != "" {
		t.Errorf("baseline = %+v", b.Snapshot)
	}
	if got := f.git(f.repo, "rev-parse", refs.Baseline()); got != b.ID {
		t.Errorf("baseline ref %s, want %s", got, b.ID)
	}
	if p := f.parents(b.ID); !slices.Equal(p, []string{f.start}) {
		t.Errorf("baseline parents %v, want the start commit", p)
	}
	if b.Tree != f.git(f.repo, "rev-parse", f.start+"^{tree}") {
		t.Error("baseline tree is not the start tree")
	}

	// An increment: a new, a changed and a deleted file.
	f.write(f.wt, "new.txt", "new\n")
	f.write(f.wt, "README", "changed\n")
	if err := os.Remove(filepath.Join(f.wt, "src/a.txt")); err != nil {
		t.Fatal(err)
	}
	s1 := f.take(ReasonInterval)
	if !s1.New || s1.Changes != 3 || s1.Baseline != b.ID {
		t.Errorf("increment = %+v", s1.Snapshot)
	}
	if p := f.parents(s1.ID); !slices.Equal(p, []string{b.ID}) {
		t.Errorf("increment parents %v, want the baseline", p)
	}
	if got := f.git(f.repo, "rev-parse", refs.Rescue()); got != s1.ID {
		t.Errorf("rescue ref %s, want %s", got, s1.ID)
	}
	// The worktree's own index and HEAD are not touched.
	if st := f.git(f.wt, "status", "--porcelain"); !strings.Contains(st, "?? new.txt") || !strings.Contains(st, "M README") {
		t.Errorf("worktree status after snapshots:\n%s", st)
	}

	// Unchanged: nothing written, the previous snapshot comes back.
	s2 := f.take(ReasonInterval)
	if s2.New || s2.ID != s1.ID {
		t.Errorf("unchanged tree wrote %+v", s2.Snapshot)
	}
	// Ignored files are not snapshotted.
	f.write(f.wt, ".gitignore", "*.log\n")
	f.write(f.wt, "debug.log", "noise\n")
	s3 := f.take(ReasonExit)
	if !s3.New || s3.Changes != 4 {
		t.Errorf("after .gitignore: %+v", s3.Snapshot)
	}
	if out := f.git(f.repo, "ls-tree", "--name-only", s3.ID); strings.Contains(out, "debug.log") {
		t.Errorf("an ignored file was snapshotted:\n%s", out)
	}

	// Read gives back what Take wrote.
	r, err := Read(context.Background(), f.host, s3.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Reason != ReasonExit || r.Changes != 4 || r.Baseline != b.ID || r.Start != f.start || r.Branch != "t1" || !r.Time.Equal(f.clock) {
		t.Errorf("read = %+v", r)
	}
	if _, err := Read(context.Background(), f.host, f.start); err == nil {
		t.Error("an ordinary commit read as a snapshot")
	}
}

func TestTakeRecordsSkippedPaths(t *testing.T) {
	f := newFixture(t)
	f.baseline()
	f.write(f.wt, ".GIT/hooks/x", "evil\n")
	f.write(f.wt, "ok.txt", "fine\n")
	s := f.take(ReasonInterval)
	if len(s.Skipped) == 0 || !strings.HasPrefix(s.Skipped[0], ".GIT") {
		t.Fatalf("skipped = %q", s.Skipped)
	}
	if out := f.git(f.repo, "ls-tree", "-r", "--name-only", s.ID); !strings.Contains(out, "ok.txt") || strings.Contains(out, ".GIT") {
		t.Errorf("tree:\n%s", out)
	}
	r, err := Read(context.Background(), f.host, s.ID)
	if err != nil || !slices.Equal(r.Skipped, s.Skipped) {
		t.Errorf("read skipped = %v, %v", r, err)
	}
	// Same tree, same skipped paths: nothing new. Once the path is gone,
	// the same tree is written again so the skipped list stays true.
	if again := f.take(ReasonInterval); again.New {
		t.Error("unchanged tree and skipped paths wrote a snapshot")
	}
	if err := os.RemoveAll(filepath.Join(f.wt, ".GIT")); err != nil {
		t.Fatal(err)
	}
	if after := f.take(ReasonInterval); !after.New || len(after.Skipped) != 0 || after.Tree != s.Tree {
		t.Errorf("after removing the path: %+v", after.Snapshot)
	}
}

func TestTakeSkipsFifosAndEmptyNestedRepositories(t *testing.T) {
	f := newFixture(t)
	f.baseline()
	readme := filepath.Join(f.wt, "README")
	if err := os.Remove(readme); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(readme, 0o644); err != nil {
		t.Fatal(err)
	}
	f.git(f.wt, "init", "-q", "empty")
	f.write(f.wt, "ok.txt", "fine\n")
	s := f.take(ReasonInterval)
	if !slices.Equal(s.Skipped, []string{"README", "empty"}) {
		t.Fatalf("skipped = %q", s.Skipped)
	}
	if out := f.git(f.repo, "ls-tree", "-r", "--name-only", s.ID); !strings.Contains(out, "ok.txt") {
		t.Errorf("tree:\n%s", out)
	}
}

func TestTakeKeepsTheAgentHead(t *testing.T) {
	f := newFixture(t)
	f.baseline()
	// A commit the host store has (as sync brings the agent's back).
	f.write(f.wt, "agent.txt", "x\n")
	f.git(f.wt, "add", "agent.txt")
	f.git(f.wt, "commit", "-q", "-m", "agent")
	head := f.git(f.wt, "rev-parse", "HEAD")
	f.snap.AgentHead = func() string { return head }
	s := f.take(ReasonInterval)
	if p := f.parents(s.ID); len(p) != 2 || p[1] != head {
		t.Errorf("parents %v, want the agent head second", p)
	}
	if s.Head != head {
		t.Errorf("head trailer %q", s.Head)
	}
	// A head the store does not have is named but not a parent.
	f.snap.AgentHead = func() string { return strings.Repeat("ab", 20) }
	f.write(f.wt, "more.txt", "y\n")
	s2 := f.take(ReasonInterval)
	if p := f.parents(s2.ID); len(p) != 1 {
		t.Errorf("parents %v, want only the previous snapshot", p)
	}
}

func TestTakeWithoutWorktreeFails(t *testing.T) {
	f := newFixture(t)
	f.local.Worktree = filepath.Join(t.TempDir(), "gone")
	if _, err := f.snap.Take(context.Background(), ReasonStart); err == nil {
		t.Error("snapshot of a missing worktree succeeded")
	}
}

func TestFreezeWrapsTheAdd(t *testing.T) {
	f := newFixture(t)
	f.baseline()
	var frozen, thawed int
	f.local.Freeze = func(ctx context.Context) (func(), error) {
		frozen++
		return func() { thawed++ }, nil
	}
	f.write(f.wt, "x.txt", "x\n")
	f.take(ReasonInterval)
	if frozen != 1 || thawed != 1 {
		t.Errorf("frozen %d thawed %d", frozen, thawed)
	}
	f.local.Freeze = func(ctx context.Context) (func(), error) { return nil, fmt.Errorf("cannot freeze") }
	f.write(f.wt, "y.txt", "y\n")
	if _, err := f.snap.Take(context.Background(), ReasonInterval); err == nil || !strings.Contains(err.Error(), "cannot freeze") {
		t.Errorf("snapshot with a failing freeze: %v", err)
	}
}

func TestSeedIndexAndNestedRepositories(t *testing.T) {
	f := newFixture(t)
	admin := f.git(f.wt, "rev-parse", "--absolute-git-dir")
	if err := f.local.SeedIndex(filepath.Join(admin, "index"), ""); err != nil {
		t.Fatal(err)
	}
	f.baseline()
	// A nested repository is recorded as a gitlink, and stripped from the
	// private index before the next add.
	nested := filepath.Join(f.wt, "vendor", "lib")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	f.git(nested, "init", "-q")
	f.write(nested, "f", "1\n")
	f.git(nested, "add", "f")
	f.git(nested, "commit", "-q", "-m", "nested")
	s := f.take(ReasonInterval)
	if out := f.git(f.repo, "ls-tree", "-r", s.ID); !strings.Contains(out, "160000 commit") {
		t.Errorf("nested repository not a gitlink:\n%s", out)
	}
	if _, err := os.Stat(f.local.gitlinksMarker()); err != nil {
		t.Errorf("gitlinks marker missing: %v", err)
	}
	f.write(f.wt, "z.txt", "z\n")
	f.take(ReasonInterval)
	if err := f.local.SeedIndex(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("seeding from a missing index succeeded")
	}
}

func TestRestamp(t *testing.T) {
	f := newFixture(t)
	if _, err := f.snap.Restamp(context.Background(), ReasonLand); err == nil {
		t.Error("restamp without snapshots succeeded")
	}
	f.baseline()
	f.write(f.wt, "x.txt", "x\n")
	s := f.take(ReasonLand)
	// The baseline moves to the landed snapshot: zero changes from there.
	f.snap.Baseline = s.ID
	f.clock = f.clock.Add(time.Second)
	r, err := f.snap.Restamp(context.Background(), ReasonLand)
	if err != nil {
		t.Fatal(err)
	}
	if !r.New || r.Tree != s.Tree || r.Changes != 0 || r.Baseline != s.ID {
		t.Errorf("restamp = %+v", r.Snapshot)
	}
}

func TestListChainsAndResolve(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.baseline()
	f.write(f.wt, "x.txt", "x\n")
	s1 := f.take(ReasonInterval)
	// A chain of another branch, ended and moved aside (as start does).
	refs := Refs{Branch: "old"}
	f.git(f.repo, "update-ref", refs.Ended("20260101T000000Z")+"/rescue", b.ID)

	all, err := List(ctx, f.host, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != s1.ID || all[1].ID != b.ID {
		t.Errorf("list = %+v", all)
	}
	chains, err := Chains(ctx, f.host, "t1")
	if err != nil || len(chains) != 2 {
		t.Fatalf("chains = %+v, %v", chains, err)
	}
	if only, _ := List(ctx, f.host, "nobody"); len(only) != 0 {
		t.Errorf("list of another branch = %+v", only)
	}
	for _, name := range []string{s1.ID, s1.ID[:10], Refs{Branch: "t1"}.Rescue()} {
		got, err := Resolve(ctx, f.host, name)
		if err != nil || got.ID != s1.ID {
			t.Errorf("resolve %s = %v, %v", name, got, err)
		}
	}
	for _, name := range []string{"main", "-x", "nope"} {
		if _, err := Resolve(ctx, f.host, name); err == nil || !strings.Contains(err.Error(), "not a snapshot") {
			t.Errorf("resolve %s: %v", name, err)
		}
	}
}

func TestRestoreBranch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.baseline()
	f.write(f.wt, "x.txt", "x\n")
	s := f.take(ReasonExit)
	id, err := RestoreBranch(ctx, f.host, &s.Snapshot, "saved", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.git(f.repo, "rev-parse", "saved^{tree}"); got != s.Tree {
		t.Errorf("restored tree %s, want %s", got, s.Tree)
	}
	if p := f.parents(id.String()); !slices.Equal(p, []string{f.start}) {
		t.Errorf("restored parents %v, want the start", p)
	}
	// Existing: refused without force, replaced with it.
	if _, err := RestoreBranch(ctx, f.host, &s.Snapshot, "saved", false); usererr.Code(err) != usererr.ExitRefused {
		t.Errorf("restore over an existing branch: %v", err)
	}
	if _, err := RestoreBranch(ctx, f.host, &s.Snapshot, "saved", true); err != nil {
		t.Errorf("restore --force: %v", err)
	}
	// Never over a checked-out branch.
	if _, err := RestoreBranch(ctx, f.host, &s.Snapshot, "main", true); usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "checked out") {
		t.Errorf("restore over the checked-out main: %v", err)
	}
}

func TestRestoreWorktree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.baseline()
	f.write(f.wt, "x.txt", "version 1\n")
	s1 := f.take(ReasonInterval)
	f.write(f.wt, "x.txt", "version 2\n")
	f.write(f.wt, "y.txt", "later\n")

	// Without force: the current state is saved, nothing changes.
	cur, changed, err := f.snap.RestoreWorktree(ctx, &s1.Snapshot, false)
	if err != nil {
		t.Fatal(err)
	}
	if !cur.New || !slices.Equal(changed, []string{"x.txt", "y.txt"}) {
		t.Errorf("current %+v, changed %v", cur.Snapshot, changed)
	}
	if b, _ := os.ReadFile(filepath.Join(f.wt, "x.txt")); string(b) != "version 2\n" {
		t.Errorf("worktree changed without force: %q", b)
	}
	// With force: the files are the snapshot's.
	if _, _, err := f.snap.RestoreWorktree(ctx, &s1.Snapshot, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.wt, "x.txt")); string(b) != "version 1\n" {
		t.Errorf("x.txt = %q after restore", b)
	}
	if _, err := os.Stat(filepath.Join(f.wt, "y.txt")); !os.IsNotExist(err) {
		t.Errorf("y.txt still there: %v", err)
	}
	// The state before the restore is kept, so the restore can be undone.
	if got := f.git(f.repo, "show", cur.ID+":y.txt"); got != "later" {
		t.Errorf("pre-restore snapshot lost y.txt: %q", got)
	}
	// Already equal: nothing to do.
	if _, changed, err := f.snap.RestoreWorktree(ctx, &s1.Snapshot, false); err != nil || len(changed) != 0 {
		t.Errorf("restore of the current state: %v, %v", changed, err)
	}
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.baseline()
	f.write(f.wt, "x.txt", "x\n")
	f.take(ReasonInterval)
	ended := Refs{Branch: "t1"}.Ended("20260101T000000Z")
	f.git(f.repo, "update-ref", ended+"/rescue", b.ID)
	f.git(f.repo, "update-ref", ended+"/baseline", b.ID)
	now := f.clock.Add(48 * time.Hour)
	live := func(branch string) bool { return branch == "t1" }

	// Too young: nothing.
	if p, err := Prune(ctx, f.host, 72*time.Hour, now, live, false); err != nil || len(p) != 0 {
		t.Errorf("prune of young chains = %+v, %v", p, err)
	}
	// Dry run: listed, kept.
	p, err := Prune(ctx, f.host, time.Hour, now, live, true)
	if err != nil || len(p) != 1 || p[0].Ref != ended+"/rescue" || p[0].Count != 1 {
		t.Fatalf("dry run = %+v, %v", p, err)
	}
	if f.git(f.repo, "for-each-ref", ended+"/") == "" {
		t.Error("dry run deleted")
	}
	// Real: the ended chain goes, the live one stays.
	if _, err := Prune(ctx, f.host, time.Hour, now, live, false); err != nil {
		t.Fatal(err)
	}
	if out := f.git(f.repo, "for-each-ref", "--format=%(refname)", RefPrefix); out != "refs/sandbox/t1/baseline\nrefs/sandbox/t1/rescue" {
		t.Errorf("refs after prune:\n%s", out)
	}
	// Once the sandbox is gone, its chain goes too.
	if p, err := Prune(ctx, f.host, time.Hour, now, func(string) bool { return false }, false); err != nil || len(p) != 1 {
		t.Errorf("prune of the ended sandbox = %+v, %v", p, err)
	}
	if out := f.git(f.repo, "for-each-ref", RefPrefix); out != "" {
		t.Errorf("refs left: %s", out)
	}
}

// A snapshot taken while the nested repositories' git directories are
// quarantined sees the tree it saw with them in place, and names them.
func TestTakeWithQuarantinedNestedRepositories(t *testing.T) {
	f := newFixture(t)
	f.baseline()
	f.local.Quarantine = filepath.Join(filepath.Dir(f.local.Index), "quarantine")
	f.git(f.wt, "init", "-q", "lib")
	f.write(f.wt, "lib/one.txt", "one\n")
	f.git(filepath.Join(f.wt, "lib"), "add", "one.txt")
	f.git(filepath.Join(f.wt, "lib"), "commit", "-q", "-m", "lib")
	f.git(f.wt, "init", "-q", "nocommit")
	f.write(f.wt, "nocommit/x.txt", "x\n")
	f.write(f.wt, ".gitignore", "vendor/\n")
	f.git(f.wt, "init", "-q", "vendor/pkg")
	f.write(f.wt, "work.txt", "work\n")
	running := f.take(ReasonInterval)
	if !slices.Equal(running.Nested, []string{"lib", "nocommit"}) {
		t.Errorf("nested = %v, want lib and nocommit", running.Nested)
	}
	links, err := f.local.IndexedGitlinks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	q, err := worktree.Quarantine(f.wt, f.local.Quarantine, func(repo string) string { return links[repo] })
	if err != nil || len(q) != 3 {
		t.Fatalf("quarantine: %v %v", q, err)
	}
	f.write(f.wt, "work.txt", "more work\n")
	stopped := f.take(ReasonStop)
	if !stopped.New {
		t.Fatal("a changed file made no new snapshot")
	}
	if got := f.git(f.repo, "ls-tree", "-r", stopped.ID, "lib"); !strings.HasPrefix(got, "160000 commit ") {
		t.Errorf("lib while quarantined = %q, want its gitlink", got)
	}
	for _, p := range []string{"lib/one.txt", "nocommit/x.txt", "nocommit/.git"} {
		if x := f.git(f.repo, "ls-tree", "-r", "--name-only", stopped.ID, p); x != "" {
			t.Errorf("the quarantined snapshot holds %s", x)
		}
	}
	if !slices.Equal(stopped.Nested, running.Nested) || !slices.Contains(stopped.Skipped, "nocommit") {
		t.Errorf("quarantined snapshot: nested %v skipped %v", stopped.Nested, stopped.Skipped)
	}
	// Restored, the next snapshot is the same tree.
	if _, err := worktree.RestoreQuarantined(f.wt, f.local.Quarantine); err != nil {
		t.Fatal(err)
	}
	again := f.take(ReasonInterval)
	if again.Tree != stopped.Tree {
		t.Errorf("tree after restore %s, while quarantined %s", again.Tree, stopped.Tree)
	}
}

// ReadTips reads the newest snapshot of every chain, with its facts, and
// any other ref asked for.
func TestReadTips(t *testing.T) {
	f := newFixture(t)
	base := f.take(ReasonStart)
	f.snap.Baseline = base.ID
	f.write(f.wt, "a.txt", "changed\n")
	next := f.take(ReasonInterval)
	tips := ReadTips(context.Background(), f.host, "refs/heads/main")
	got := tips[Refs{"t1"}.Rescue()]
	if got.ID != next.ID || got.Tree != next.Tree || got.Changes != 1 || got.Time.IsZero() {
		t.Errorf("rescue tip %+v, want %s with 1 change", got, next.ID)
	}
	if b := tips[Refs{"t1"}.Baseline()]; b.ID != base.ID {
		t.Errorf("baseline tip %+v", b)
	}
	if m := tips["refs/heads/main"]; m.ID != f.start || m.Tree == "" {
		t.Errorf("main %+v, want %s", m, f.start)
	}
}

// ReadTips reads a snapshot's too-large and nested trailers (quoted
// paths, each a trailer of its own), and its change count, from one
// process; a ref outside refs/sandbox gives only its change count.
func TestReadTipsTrailers(t *testing.T) {
	f := newFixture(t)
	msg := "snapshot\n\nSandbox-Changes: 12\nSandbox-Too-Large: \"big one.bin\"\nSandbox-Too-Large: \"b\\tc\"\n" +
		"Sandbox-Nested: \"vendor/lib\"\nSandbox-Nested: \"a b\"\n"
	tree := f.git(f.repo, "rev-parse", "HEAD^{tree}")
	snap := f.git(f.repo, "commit-tree", "-m", msg, tree)
	f.git(f.repo, "update-ref", Refs{"t2"}.Rescue(), snap)
	f.git(f.repo, "update-ref", "refs/heads/other", snap)
	tips := ReadTips(context.Background(), f.host, "refs/heads/other")
	got := tips[Refs{"t2"}.Rescue()]
	if got.ID != snap || got.Tree != tree || got.Changes != 12 || got.TooLarge != 2 || !slices.Equal(got.Nested, []string{"vendor/lib", "a b"}) {
		t.Errorf("tip %+v, want %s with 12 changes, 2 too large, nested vendor/lib and \"a b\"", got, snap)
	}
	if o := tips["refs/heads/other"]; o.ID != snap || o.Changes != 12 || o.TooLarge != 0 || o.Nested != nil {
		t.Errorf("a branch's tip %+v, want only its change count", o)
	}
}

// A snapshotter made before the baseline moved (the supervisor's, across
// an update or a land --keep) takes the baseline as it is now: a tree
// already snapshotted against the new baseline is not written again
// against the old one.
func TestTakeAsksTheStartAndBaselineNow(t *testing.T) {
	f := newFixture(t)
	old := f.baseline()
	f.write(f.wt, "work.txt", "work\n")
	moved := f.take(ReasonUpdate) // stands in for the new baseline's chain
	stale := *f.snap
	stale.Baseline = old.ID
	stale.Start = "0000000000000000000000000000000000000000" // an update moved it too
	stale.Current = func() (string, string) { return f.start, moved.ID }
	f.snap.Baseline = moved.ID
	again := f.take(ReasonUpdate) // the same tree against the moved baseline
	f.clock = f.clock.Add(time.Second)
	got, err := stale.Take(context.Background(), ReasonExit)
	if err != nil {
		t.Fatal(err)
	}
	if got.New || got.ID != again.ID {
		t.Errorf("a stale snapshotter wrote %+v against baseline %s, want the newest snapshot back", got.Snapshot, got.Baseline)
	}
	if stale.Baseline != moved.ID || stale.Start != f.start {
		t.Errorf("the snapshotter's start and baseline = %s %s, want the ones it was told are current", stale.Start, stale.Baseline)
	}
}
