package rescue

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// seed seeds the private index from the worktree's own, as start does.
func (f *fixture) seed(commit string) {
	f.t.Helper()
	admin := f.git(f.wt, "rev-parse", "--absolute-git-dir")
	if err := f.local.SeedIndex(filepath.Join(admin, "index"), commit); err != nil {
		f.t.Fatal(err)
	}
}

// tree lists a snapshot's paths.
func (f *fixture) tree(id string) []string {
	f.t.Helper()
	return strings.Split(f.git(f.repo, "ls-tree", "-r", "--name-only", id), "\n")
}

// traced runs fn and returns the git commands it ran (tests that use it
// do not run in parallel).
func traced(fn func()) []string {
	var cmds []string
	var mu sync.Mutex
	gitcmd.SetTrace(func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(args) == 2 {
			if s, ok := args[1].(string); ok {
				cmds = append(cmds, s)
			}
		}
	})
	defer gitcmd.SetTrace(nil)
	fn()
	return cmds
}

func TestFindCandidates(t *testing.T) {
	f := newFixture(t)
	f.seed("")
	f.baseline()
	f.write(f.wt, "src/a.txt", "changed\n")
	if err := os.Remove(filepath.Join(f.wt, "README")); err != nil {
		t.Fatal(err)
	}
	f.write(f.wt, "new/b.txt", "b\n")
	f.write(f.wt, "ignored.log", "x\n")
	f.write(f.wt, ".gitignore", "*.log\n")
	nested := filepath.Join(f.wt, "lib")
	f.git(f.wt, "init", "-q", "lib")
	f.write(nested, "x", "x\n")
	c, err := findCandidates(context.Background(), f.local.isolated())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.changed, []string{"README", "src/a.txt"}) || !c.gone["README"] || c.gone["src/a.txt"] {
		t.Errorf("changed %q gone %v", c.changed, c.gone)
	}
	if !slices.Equal(c.untracked, []string{".gitignore", "lib/", "new/b.txt"}) {
		t.Errorf("untracked %q", c.untracked)
	}
}

func TestSnapshotStagesOnlyWhatChanged(t *testing.T) {
	f := newSerialFixture(t)
	f.seed("")
	f.baseline()
	f.write(f.wt, "src/a.txt", "changed\n")
	f.write(f.wt, "src/new.txt", "new\n")
	var s *Taken
	cmds := traced(func() { s = f.take(ReasonInterval) })
	for _, c := range cmds {
		if strings.HasPrefix(c, "add ") {
			t.Errorf("git add ran for two plain changes: %q", cmds)
		}
	}
	if got := f.tree(s.ID); !slices.Equal(got, []string{"README", "src/a.txt", "src/new.txt"}) {
		t.Errorf("tree %q", got)
	}
	// Nothing changed: nothing staged, the same snapshot.
	cmds = traced(func() {
		if again := f.take(ReasonInterval); again.New {
			t.Error("an unchanged worktree wrote a snapshot")
		}
	})
	for _, c := range cmds {
		if strings.HasPrefix(c, "update-index") || strings.HasPrefix(c, "add ") || strings.HasPrefix(c, "ls-files -z --cached") || c == "write-tree" {
			t.Errorf("an unchanged worktree ran %q", c)
		}
	}
}

func TestSeededBaselineIsTheStartTree(t *testing.T) {
	f := newSerialFixture(t)
	f.seed(f.start)
	froze := 0
	f.local.Freeze = func(context.Context) (func(), error) { froze++; return func() {}, nil }
	var b *Taken
	cmds := traced(func() { b = f.baseline() })
	if want := f.git(f.repo, "rev-parse", f.start+"^{tree}"); b.Tree != want {
		t.Errorf("baseline tree %s, start tree %s", b.Tree, want)
	}
	for _, c := range cmds {
		if strings.HasPrefix(c, "diff-files") || strings.HasPrefix(c, "ls-files") || strings.HasPrefix(c, "add ") {
			t.Errorf("the baseline read the worktree: %q", c)
		}
	}
	if froze != 0 {
		t.Errorf("the baseline froze the agent %d times", froze)
	}
	// The next snapshot reads the worktree again.
	f.write(f.wt, "x.txt", "x\n")
	if s := f.take(ReasonInterval); !s.New || !slices.Contains(f.tree(s.ID), "x.txt") || froze != 1 {
		t.Errorf("after the baseline: %+v (frozen %d)", s.Snapshot, froze)
	}
}

// agentIndex makes the worktree's own index stand for the agent's: what
// git add there stages, the agent tracks.
func (f *fixture) agentIndex() string {
	f.t.Helper()
	admin := f.git(f.wt, "rev-parse", "--absolute-git-dir")
	f.local.AgentGitDir = admin
	return admin
}

func TestSizesAreTakenForChangedPathsOnly(t *testing.T) {
	f := newFixture(t)
	f.seed("")
	f.agentIndex()
	f.local.MaxFileSize = 10
	f.baseline()
	big := strings.Repeat("x", 100) + "\n"
	// Untracked and too large: left out. Tracked by the agent and large:
	// kept. A file the private index holds that the agent does not track,
	// grown too large: dropped.
	f.write(f.wt, "untracked.bin", big)
	f.write(f.wt, "tracked.bin", big)
	f.git(f.wt, "add", "tracked.bin")
	f.write(f.wt, "other.txt", "small\n")
	f.take(ReasonInterval)
	f.write(f.wt, "other.txt", big)
	s := f.take(ReasonInterval)
	var large []string
	for _, l := range s.TooLarge {
		large = append(large, l.Path)
	}
	if !slices.Equal(large, []string{"other.txt", "untracked.bin"}) {
		t.Errorf("too large: %+v", s.TooLarge)
	}
	if got := f.tree(s.ID); !slices.Equal(got, []string{"README", "src/a.txt", "tracked.bin"}) {
		t.Errorf("tree %q", got)
	}
	// A sparse file the agent tracks is left out too.
	sp := filepath.Join(f.wt, "tracked.bin")
	if err := os.Truncate(sp, 1<<30); err != nil {
		t.Fatal(err)
	}
	s = f.take(ReasonInterval)
	if !slices.ContainsFunc(s.TooLarge, func(l LargeFile) bool { return l.Path == "tracked.bin" && l.Size == 1<<30 }) {
		t.Errorf("sparse tracked file kept: %+v", s.TooLarge)
	}
}

func TestIgnoredTrackedFilesComeBack(t *testing.T) {
	f := newFixture(t)
	f.seed("")
	f.agentIndex()
	f.write(f.wt, ".gitignore", "*.log\n")
	f.write(f.wt, "keep.log", "1\n")
	f.git(f.wt, "add", ".gitignore")
	f.git(f.wt, "add", "-f", "keep.log")
	f.baseline()
	s := f.take(ReasonInterval)
	if !slices.Contains(f.tree(s.ID), "keep.log") {
		t.Fatalf("an ignored file the agent tracks is not in the snapshot: %q", f.tree(s.ID))
	}
	// The view is kept while the agent's index does not change.
	v, err := f.local.agentView(context.Background(), "")
	if err != nil || v.fresh {
		t.Errorf("view made again with the agent's index unchanged: %+v %v", v, err)
	}
	if err := os.Remove(filepath.Join(f.wt, "keep.log")); err != nil {
		t.Fatal(err)
	}
	if s := f.take(ReasonInterval); slices.Contains(f.tree(s.ID), "keep.log") {
		t.Error("a deleted file is still in the snapshot")
	}
	f.write(f.wt, "keep.log", "2\n")
	s = f.take(ReasonInterval)
	if out := f.git(f.repo, "cat-file", "-p", s.ID+":keep.log"); out != "2" {
		t.Errorf("the file that came back: %q", out)
	}
}

func TestTrackedFileGoneBehindASymlink(t *testing.T) {
	f := newFixture(t)
	f.seed("")
	f.baseline()
	other := filepath.Join(f.wt, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	f.write(other, "a.txt", "a\n")
	if err := os.RemoveAll(filepath.Join(f.wt, "src")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", filepath.Join(f.wt, "src")); err != nil {
		t.Fatal(err)
	}
	s := f.take(ReasonInterval)
	if got := f.tree(s.ID); !slices.Equal(got, []string{"README", "other/a.txt", "src"}) || len(s.Skipped) > 0 {
		t.Errorf("tree %q skipped %q", got, s.Skipped)
	}
	if mode := strings.Fields(f.git(f.repo, "ls-tree", s.ID, "src"))[0]; mode != "120000" {
		t.Errorf("src is %s, not a symlink", mode)
	}
}

// TestSeedHoldsForTheNextLocal: start seeds the index through one Local
// and takes the baseline through another (the workspace is opened again):
// that snapshot answers the start commit's tree without reading a file;
// the one after it reads the worktree.
func TestSeedHoldsForTheNextLocal(t *testing.T) {
	f := newSerialFixture(t)
	f.seed(f.start)
	again := *f.local
	again.seeded = ""
	f.snap.Source = &again
	var base *Taken
	cmds := traced(func() { base = f.take(ReasonStart) })
	if base.Tree != f.git(f.repo, "rev-parse", f.start+"^{tree}") {
		t.Errorf("baseline tree %s, want the start commit's", base.Tree)
	}
	for _, c := range cmds {
		if strings.HasPrefix(c, "diff-files") || strings.HasPrefix(c, "ls-files") || strings.HasPrefix(c, "add ") {
			t.Errorf("the seeded baseline read the worktree: %q", c)
		}
	}
	f.write(f.wt, "new.txt", "n\n")
	next := f.take(ReasonInterval)
	if !slices.Contains(f.tree(next.ID), "new.txt") {
		t.Errorf("the snapshot after the seeded one did not read the worktree: %v", f.tree(next.ID))
	}
}
