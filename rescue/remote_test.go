package rescue

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A snapshot taken elsewhere (copy mode): the tree and what git add said
// come from its Source; the commit, the chain and the facts about it are
// written here as for a local snapshot.
func TestRemoteSnapshots(t *testing.T) {
	f := newFixture(t)
	startTree := f.git(f.repo, "rev-parse", "main^{tree}")
	var tree, addErrors string
	var large []LargeFile
	var prevs []string
	src := &funcSource{read: func(prev string) (*Tree, error) {
		prevs = append(prevs, prev)
		return TreeOf(tree, Elsewhere{AddErrors: addErrors, TooLarge: large}), nil
	}}
	f.snap.Source = src
	tree = startTree
	base := f.take(ReasonStart)
	if base.Tree != startTree || !base.New {
		t.Fatalf("baseline %+v", base)
	}
	f.snap.Baseline = base.ID
	if got := f.git(f.repo, "rev-parse", Refs{"t1"}.Baseline()); got != base.ID {
		t.Errorf("baseline ref %s, want %s", got, base.ID)
	}
	// The same tree and facts: nothing new.
	if again := f.take(ReasonInterval); again.New || again.ID != base.ID {
		t.Errorf("an unchanged remote tree wrote %+v", again)
	}
	// A new tree (made here, as an import would have put it), with a path
	// git could not store and a file too large.
	f.write(f.wt, "new.txt", "new\n")
	f.git(f.wt, "add", "new.txt")
	tree = f.git(f.wt, "write-tree")
	addErrors = "error: unable to add '.GIT/x' to index\n"
	large = []LargeFile{{Path: "z.bin", Size: 9}, {Path: "a.bin", Size: 7}}
	next := f.take(ReasonInterval)
	if !next.New || next.Tree != tree || next.Changes != 1 {
		t.Fatalf("next %+v", next)
	}
	if len(next.Skipped) != 1 || next.Skipped[0] != ".GIT/x" {
		t.Errorf("skipped %q", next.Skipped)
	}
	if len(next.TooLarge) != 2 || next.TooLarge[0].Path != "a.bin" {
		t.Errorf("too large %+v (sorted by path)", next.TooLarge)
	}
	read, err := Read(context.Background(), f.host, next.ID)
	if err != nil || len(read.Skipped) != 1 || len(read.TooLarge) != 2 {
		t.Errorf("read back %+v %v", read, err)
	}
	if prevs[len(prevs)-1] != startTree {
		t.Errorf("Remote was told the previous tree %q, want %q", prevs[len(prevs)-1], startTree)
	}
	// A failing remote fails the snapshot and moves nothing.
	src.read = func(string) (*Tree, error) { return nil, errors.New("engine gone") }
	if _, err := f.snap.Take(context.Background(), ReasonInterval); err == nil || !strings.Contains(err.Error(), "engine gone") {
		t.Errorf("take with a failing remote: %v", err)
	}
	if got := f.git(f.repo, "rev-parse", Refs{"t1"}.Rescue()); got != next.ID {
		t.Errorf("the chain moved to %s on a failed snapshot", got)
	}
	// Restore goes through the source.
	if err := f.snap.Checkout(context.Background(), tree, startTree); err != nil || src.from != tree || src.to != startTree {
		t.Errorf("checkout: %v (%s -> %s)", err, src.from, src.to)
	}
}

// funcSource is a Source elsewhere whose reads the test decides.
type funcSource struct {
	read     func(prev string) (*Tree, error)
	from, to string
}

func (s *funcSource) Read(_ context.Context, prev, _ string) (*Tree, error) { return s.read(prev) }

func (s *funcSource) Checkout(_ context.Context, from, to string) error {
	s.from, s.to = from, to
	return nil
}
