package rescue

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// importedSource reads the worktree as a local snapshot does, then brings
// its tree in as copy mode does: a pack of what it adds to the tree
// before, imported and checked, with the import's listing of what
// changed.
type importedSource struct {
	local  *Local
	host   *gitcmd.Runner
	common string
}

func (s *importedSource) Read(ctx context.Context, prevTree, head string) (*Tree, error) {
	t, err := s.local.Read(ctx, prevTree, head)
	if err != nil || prevTree == "" || t.ID == prevTree {
		return t, err
	}
	pack, err := s.host.Run(ctx, strings.NewReader(t.ID+"\n--not\n"+prevTree+"\n"), "pack-objects", "--revs", "--stdout", "-q")
	if err != nil {
		return nil, err
	}
	changes, err := agentrepo.ImportTree(ctx, agentrepo.ImportOptions{CommonDir: s.common, Pack: bytes.NewReader(pack), Tree: t.ID, Known: prevTree, Budget: agentrepo.DefaultBudget})
	if err != nil {
		return nil, err
	}
	return TreeOf(t.ID, Elsewhere{TooLarge: t.TooLarge, Base: prevTree, Changes: changes}), nil
}

func (s *importedSource) Checkout(ctx context.Context, from, to string) error {
	return s.local.Checkout(ctx, from, to)
}

// A snapshot whose tree was imported (copy mode) counts its changes and
// its cost from what the import listed, with no diff of its own, and gets
// what diffs of the whole trees give: random rounds of writes, new files,
// deletes, mode changes, directories made, removed and turned into files,
// and a baseline moved by land --keep.
func TestImportedSnapshotCountsAsDiffsDo(t *testing.T) {
	f := newSerialFixture(t)
	f.watchedStart(func() {
		for i := range 60 {
			f.write(f.repo, fmt.Sprintf("d%d/f%02d.txt", i%4, i), fmt.Sprintf("file %d\n", i))
		}
	})
	f.local.Watch = nil
	f.snap.Source = &importedSource{local: f.local, host: f.host, common: f.snap.CommonDir}
	// write writes p in directory d, which may be a file now.
	write := func(d, p, content string) {
		if fi, err := os.Lstat(filepath.Join(f.wt, d)); err == nil && !fi.IsDir() {
			must(t, os.Remove(filepath.Join(f.wt, d)))
		}
		f.write(f.wt, d+"/"+p, content)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	own := 0
	for round := range 30 {
		for range 1 + rng.IntN(6) {
			d := fmt.Sprintf("d%d", rng.IntN(5))
			p := fmt.Sprintf("f%02d.txt", rng.IntN(70))
			switch rng.IntN(7) {
			case 0, 1:
				write(d, p, fmt.Sprintf("round %d\n", round))
			case 2:
				_ = os.Remove(filepath.Join(f.wt, d, p))
			case 3:
				_ = os.Chmod(filepath.Join(f.wt, d, p), 0o755)
			case 4:
				write(fmt.Sprintf("d%d", rng.IntN(4)), fmt.Sprintf("f%02d.txt", rng.IntN(60)), fmt.Sprintf("file %d\n", rng.IntN(60)))
			case 5:
				must(t, os.RemoveAll(filepath.Join(f.wt, d)))
				if rng.IntN(2) == 0 {
					f.write(f.wt, d, "a file where a directory was\n")
				}
			default:
				_ = os.RemoveAll(filepath.Join(f.wt, d))
				write(d, "again.txt", "again\n")
			}
		}
		if round == 15 {
			// land --keep: the baseline moves to the newest snapshot.
			f.snap.Baseline = f.take(ReasonManual).ID
		}
		taken, cmds := f.takeTraced()
		if slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "--diff-filter") }) {
			t.Errorf("round %d: an imported snapshot diffed for its cost:\n%s", round, strings.Join(cmds, "\n"))
		}
		if taken.New && slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "--name-only") }) {
			own++
			t.Logf("round %d counted by a diff", round)
		}
		f.countedAsDiffsWould(taken, fmt.Sprintf("round-%d", round))
	}
	if own > 3 {
		t.Errorf("%d of 30 imported snapshots counted their changes with a diff of the whole tree", own)
	}
}
