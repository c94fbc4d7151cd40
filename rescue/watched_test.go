package rescue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/fswatch"
)

// watcherOf adapts a watcher of the worktree as a sandbox's workspace does.
type watcherOf struct{ w *fswatch.Watcher }

func (a watcherOf) Since(_ context.Context, token string) (Changed, error) {
	r := a.w.Since(token)
	return Changed{Token: r.Token, All: r.All, Paths: r.Paths}, nil
}

// fullScan reads the worktree as a snapshot with no watcher and no
// private index of its own does: every file looked at.
func (f *fixture) fullScan(name string) *Tree {
	f.t.Helper()
	state := filepath.Join(filepath.Dir(f.local.Index), name)
	full := &Local{
		CommonDir: f.local.CommonDir, Start: f.start, Worktree: f.wt, MaxFileSize: f.local.MaxFileSize,
		Index: filepath.Join(state, "rescue.index"), Scratch: filepath.Join(state, "scratch"),
	}
	tr, err := full.Read(context.Background(), "", "")
	if err != nil {
		f.t.Fatal(err)
	}
	return tr
}

// watchedTake takes a snapshot and reports whether it walked the whole
// worktree (git ls-files --others).
func (f *fixture) watchedTake() (*Taken, bool) {
	f.t.Helper()
	var taken *Taken
	cmds := traced(func() { taken = f.take(ReasonInterval) })
	walked := slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "ls-files -z --others") })
	return taken, walked
}

func (f *fixture) sameAsFullScan(taken *Taken, name string) {
	f.t.Helper()
	full := f.fullScan(name)
	if taken.Tree != full.ID || !slices.Equal(taken.TooLarge, full.TooLarge) || !slices.Equal(taken.Skipped, full.Skipped) {
		f.t.Fatalf("%s: the watched snapshot differs from a full scan:\n%s\ntoo large %v / %v, skipped %q / %q", name, f.git(f.repo, "diff-tree", "-r", "--name-status", full.ID, taken.Tree), taken.TooLarge, full.TooLarge, taken.Skipped, full.Skipped)
	}
	f.countedAsDiffsWould(taken, name)
}

// countedAsDiffsWould checks a new snapshot's change count and the cost
// charged for it against what diffs of the whole trees give.
func (f *fixture) countedAsDiffsWould(taken *Taken, name string) {
	f.t.Helper()
	if !taken.New {
		return
	}
	ctx := context.Background()
	n, err := countChanges(ctx, f.host, taken.Baseline, taken.Tree)
	if err != nil {
		f.t.Fatal(err)
	}
	if taken.Changes != n {
		f.t.Fatalf("%s: the snapshot counts %d changes, a diff against the baseline %d", name, taken.Changes, n)
	}
	if f.snap.Usage == "" {
		return
	}
	prevTree := f.git(f.repo, "rev-parse", taken.ID+"^1^{tree}")
	if want, got := f.snap.cost(ctx, prevTree, &Tree{ID: taken.Tree}), ReadUsage(f.snap.Usage)-f.used; got != want {
		f.t.Fatalf("%s: the snapshot was charged %d bytes, a diff against the one before gives %d", name, got, want)
	}
}

// watchedStart commits what write puts in the repository as the
// sandbox's start, checks it out in the worktree and takes the baseline,
// with a watcher of the worktree (closed with the test) and the
// snapshots' cost counted.
func (f *fixture) watchedStart(write func()) *fswatch.Watcher {
	f.t.Helper()
	write()
	f.git(f.repo, "add", "-A")
	f.git(f.repo, "commit", "-q", "-m", "files")
	f.start = f.git(f.repo, "rev-parse", "HEAD")
	f.snap.Start, f.local.Start = f.start, f.start
	f.git(f.wt, "reset", "-q", "--hard", f.start)
	w, err := fswatch.New(f.wt, fswatch.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Close() })
	f.local.Watch = watcherOf{w}
	f.snap.Usage = filepath.Join(f.t.TempDir(), "usage")
	f.seed(f.start)
	f.baseline()
	return w
}

func TestWatchedSnapshotEqualsAFullScan(t *testing.T) {
	f := newSerialFixture(t)
	f.local.MaxFileSize = 4096
	w := f.watchedStart(func() {
		for d := range 20 {
			for i := range 100 {
				f.write(f.repo, fmt.Sprintf("src/d%02d/f%03d.txt", d, i), fmt.Sprintf("file %d %d\n", d, i))
			}
		}
		f.write(f.repo, ".gitignore", "*.log\nbuild/\n")
	})
	if _, walked := f.watchedTake(); !walked {
		t.Fatal("the first snapshot with a watcher must look at everything (no token yet)")
	}

	// A burst of 10,000 changes: rewrites, new files in new directories,
	// renames of files and of a directory, deletes of files and of a
	// directory, ignored files, a mode change, a symlink, a file too large.
	n := 0
	for d := range 20 {
		for i := range 50 {
			f.write(f.wt, fmt.Sprintf("src/d%02d/f%03d.txt", d, i), fmt.Sprintf("changed %d %d\n", d, i))
			n++
		}
	}
	for i := range 7000 {
		f.write(f.wt, fmt.Sprintf("new/n%02d/deep/g%04d.txt", i%30, i), fmt.Sprintf("new %d\n", i))
		n++
	}
	for i := range 1000 {
		f.write(f.wt, fmt.Sprintf("build/out%04d", i), "ignored\n")
		n++
	}
	for i := range 500 {
		f.write(f.wt, fmt.Sprintf("src/d%02d/x%03d.log", i%20, i), "ignored\n")
		n++
	}
	for d := range 10 {
		for i := 50; i < 100; i += 2 {
			from := filepath.Join(f.wt, fmt.Sprintf("src/d%02d/f%03d.txt", d, i))
			if err := os.Rename(from, from+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(f.wt, fmt.Sprintf("src/d%02d/f%03d.txt", d, i+1))); err != nil {
				t.Fatal(err)
			}
			n += 2
		}
	}
	if err := os.Rename(filepath.Join(f.wt, "src/d15"), filepath.Join(f.wt, "src/d15-renamed")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.wt, "src/d16")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(f.wt, "src/d17/f099.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../d17/f099.txt", filepath.Join(f.wt, "src/d18/link")); err != nil {
		t.Fatal(err)
	}
	f.write(f.wt, "new/large.bin", strings.Repeat("x", 10_000))
	n += 3 + 200
	if n < 10_000 {
		t.Fatalf("the burst is %d changes", n)
	}
	taken, walked := f.watchedTake()
	if walked {
		t.Fatal("a burst the watcher saw whole must not walk the worktree")
	}
	if len(taken.TooLarge) != 1 {
		t.Fatalf("too large: %+v", taken.TooLarge)
	}
	f.sameAsFullScan(taken, "after-burst")

	// Nothing changed: no git looks at the worktree at all.
	cmds := traced(func() { f.take(ReasonInterval) })
	for _, c := range cmds {
		if strings.Contains(c, "diff-files") || strings.Contains(c, "ls-files") || strings.Contains(c, "update-index") {
			t.Fatalf("nothing changed, yet %s ran", c)
		}
	}

	// The watcher loses events (its queue overflows): the next snapshot
	// looks at everything, and is still the same as a full scan.
	release := w.Hold()
	for i := range 20_000 {
		f.write(f.wt, fmt.Sprintf("new/n%02d/deep/g%04d.txt", i%30, i%7000), fmt.Sprintf("again %d\n", i))
	}
	f.write(f.wt, "made/while/blind.txt", "b\n")
	if err := os.Remove(filepath.Join(f.wt, "src/d00/f000.txt")); err != nil {
		t.Fatal(err)
	}
	release()
	taken, walked = f.watchedTake()
	if !walked {
		t.Fatal("after lost events the snapshot must look at everything")
	}
	f.sameAsFullScan(taken, "after-overflow")

	// And the watcher is trusted again afterwards, also in the directory
	// made while it was blind.
	f.write(f.wt, "made/while/later.txt", "l\n")
	f.write(f.wt, "src/d01/f001.txt", "once more\n")
	if err := os.Remove(filepath.Join(f.wt, "src/d02/f002.txt")); err != nil {
		t.Fatal(err)
	}
	taken, cmds = f.takeTraced()
	if !quickly(cmds) {
		t.Fatalf("after the overflow the watcher must be trusted again, without reading the index: %q", cmds)
	}
	f.sameAsFullScan(taken, "after-recovery")

	f.quickCases()
	f.hardLinks()
}

// takeTraced takes a snapshot and returns the git commands it ran.
func (f *fixture) takeTraced() (*Taken, []string) {
	f.t.Helper()
	var taken *Taken
	cmds := traced(func() { taken = f.take(ReasonInterval) })
	return taken, cmds
}

// quickly reports whether a snapshot took the fast way: objects written
// by index-pack, no git reading the private index.
func quickly(cmds []string) bool {
	return slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, "index-pack") }) &&
		!slices.ContainsFunc(cmds, func(c string) bool {
			return strings.HasPrefix(c, "update-index") || strings.HasPrefix(c, "write-tree") ||
				strings.HasPrefix(c, "diff-files") || strings.HasPrefix(c, "ls-files")
		})
}

// quickCases: changes of every kind the fast way handles, a few at a
// time, each snapshot equal to a full scan's; then what it leaves to the
// index (a symlink), after which the index catches up.
func (f *fixture) quickCases() {
	t := f.t
	t.Helper()
	steps := []func(){
		func() { // rewrites, a new file in new directories, a mode change
			f.write(f.wt, "src/d03/f003.txt", "quick\n")
			f.write(f.wt, "fresh/a/b/c.txt", "c\n")
			must(t, os.Chmod(filepath.Join(f.wt, "src/d03/f004.txt"), 0o755))
		},
		func() { // deletes: a file, a directory; an ignored file and one too large
			must(t, os.Remove(filepath.Join(f.wt, "src/d04/f005.txt")))
			must(t, os.RemoveAll(filepath.Join(f.wt, "src/d05")))
			f.write(f.wt, "fresh/x.log", "ignored\n")
			f.write(f.wt, "fresh/big.bin", strings.Repeat("y", 5000))
		},
		func() { // a directory renamed, one gone and made again with other files
			must(t, os.MkdirAll(filepath.Join(f.wt, "moved"), 0o755))
			must(t, os.Rename(filepath.Join(f.wt, "src/d06"), filepath.Join(f.wt, "moved/d06")))
			must(t, os.RemoveAll(filepath.Join(f.wt, "src/d07")))
			f.write(f.wt, "src/d07/other.txt", "o\n")
		},
		func() { // a file becomes a directory, a directory a file
			must(t, os.Remove(filepath.Join(f.wt, "src/d08/f001.txt")))
			f.write(f.wt, "src/d08/f001.txt/inner", "i\n")
			must(t, os.RemoveAll(filepath.Join(f.wt, "fresh/a")))
			f.write(f.wt, "fresh/a", "now a file\n")
		},
		func() { // the file too large goes; the last file of a directory goes
			must(t, os.Remove(filepath.Join(f.wt, "fresh/big.bin")))
			must(t, os.Remove(filepath.Join(f.wt, "src/d07/other.txt")))
		},
	}
	// A step where no directory went or was replaced whole is counted
	// and costed from its edits, without a diff of the whole tree.
	byEdits := map[int]bool{0: true, 4: true}
	for i, step := range steps {
		step()
		taken, cmds := f.takeTraced()
		if !quickly(cmds) {
			t.Fatalf("quick step %d: want the fast way, ran %q", i, cmds)
		}
		if diffed := slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, "diff-tree") }); diffed == byEdits[i] {
			t.Errorf("quick step %d: counted by its edits %v, yet ran %q", i, byEdits[i], cmds)
		}
		f.sameAsFullScan(taken, fmt.Sprintf("quick-%d", i))
	}
	must(t, os.Symlink("../src/d09/f000.txt", filepath.Join(f.wt, "fresh/link")))
	f.write(f.wt, "src/d09/f002.txt", "with a link\n")
	taken, cmds := f.takeTraced()
	if quickly(cmds) {
		t.Fatal("a symlink is the index's to store")
	}
	f.sameAsFullScan(taken, "quick-symlink")
}

// hardLinks: while a file of the worktree has a second name, a write
// through one is not seen under the other: the snapshots look at
// everything, and equal a full scan.
func (f *fixture) hardLinks() {
	t := f.t
	t.Helper()
	must(t, os.Link(filepath.Join(f.wt, "src/d10/f010.txt"), filepath.Join(f.wt, "src/d11/hard")))
	taken, walked := f.watchedTake()
	if !walked {
		t.Fatal("a hard link in the worktree: the snapshot must look at everything")
	}
	f.sameAsFullScan(taken, "hard-link")
	f.write(f.wt, "src/d11/hard", "written through the other name\n")
	taken, walked = f.watchedTake()
	if !walked {
		t.Fatal("a write through a hard link: the snapshot must look at everything")
	}
	f.sameAsFullScan(taken, "hard-link-write")
	if !strings.Contains(f.git(f.repo, "show", taken.Tree+":src/d10/f010.txt"), "other name") {
		t.Fatal("the write through the other name is not in the snapshot")
	}
	must(t, os.Remove(filepath.Join(f.wt, "src/d11/hard")))
	taken, walked = f.watchedTake()
	if !walked {
		t.Fatal("the first snapshot after the link went must still look at everything")
	}
	f.sameAsFullScan(taken, "hard-link-gone")
	f.write(f.wt, "src/d12/f012.txt", "trusted again\n")
	taken, cmds := f.takeTraced()
	if !quickly(cmds) {
		t.Fatalf("with no hard link left the watcher is trusted again: %q", cmds)
	}
	f.sameAsFullScan(taken, "hard-link-after")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchedSnapshotFallsBackForNestedRepositoriesAndIgnoreFiles(t *testing.T) {
	f := newSerialFixture(t)
	w, err := fswatch.New(f.wt, fswatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	f.local.Watch = watcherOf{w}
	f.seed(f.start)
	f.baseline()
	f.watchedTake()
	f.write(f.wt, "lib/x", "x\n")
	f.git(f.wt, "init", "-q", "lib")
	taken, walked := f.watchedTake()
	if !walked {
		t.Fatal("a new nested repository must be looked at with a walk")
	}
	f.sameAsFullScan(taken, "nested")
	f.write(f.wt, "src/b.log", "b\n")
	f.write(f.wt, ".gitignore", "*.log\n")
	taken, walked = f.watchedTake()
	if !walked {
		t.Fatal("a changed ignore file must be looked at with a walk")
	}
	f.sameAsFullScan(taken, "ignore")
}

// Random rounds of writes, new files, deletes, mode changes and
// directories made and removed, each snapshot taken the fast way where it
// can: every tree equals a full scan's, every change count and cost what
// diffs of the whole trees give, including after a land --keep moved the
// baseline.
func TestWatchedSnapshotCountsAsDiffsDo(t *testing.T) {
	f := newSerialFixture(t)
	f.watchedStart(func() {
		for i := range 60 {
			f.write(f.repo, fmt.Sprintf("d%d/f%02d.txt", i%4, i), fmt.Sprintf("file %d\n", i))
		}
	})
	f.watchedTake()
	rng := rand.New(rand.NewPCG(1, 2))
	quick := 0
	for round := range 40 {
		for range 1 + rng.IntN(6) {
			p := filepath.Join(f.wt, fmt.Sprintf("d%d/f%02d.txt", rng.IntN(5), rng.IntN(70)))
			switch rng.IntN(6) {
			case 0, 1:
				f.write(f.wt, strings.TrimPrefix(p, f.wt+"/"), fmt.Sprintf("round %d\n", round))
			case 2:
				_ = os.Remove(p)
			case 3:
				_ = os.Chmod(p, 0o755)
			case 4:
				f.write(f.wt, fmt.Sprintf("d%d/f%02d.txt", rng.IntN(4), rng.IntN(60)), fmt.Sprintf("file %d\n", rng.IntN(60)))
			default:
				if rng.IntN(4) == 0 {
					must(t, os.RemoveAll(filepath.Join(f.wt, fmt.Sprintf("d%d", 3+rng.IntN(2)))))
				}
			}
		}
		if round == 20 {
			// land --keep: the baseline moves to the newest snapshot.
			f.snap.Baseline = f.take(ReasonManual).ID
		}
		taken, cmds := f.takeTraced()
		if quickly(cmds) {
			quick++
		}
		f.sameAsFullScan(taken, fmt.Sprintf("round-%d", round))
	}
	if quick < 20 {
		t.Errorf("only %d of 40 rounds took the fast way", quick)
	}
}
