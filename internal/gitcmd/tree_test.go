package gitcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCommitTreeSignatures(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	parent := testCommit(t, g, "p\n")
	tree, err := g.PeelToTree(ctx, parent.String())
	if err != nil {
		t.Fatal(err)
	}
	when := time.Unix(1700000000, 0).In(time.FixedZone("x", 2*3600))
	c, err := g.CommitTree(ctx, CommitTreeRequest{
		Tree: tree, Parents: []Hash{parent}, Message: "subject\n\nbody\n",
		Author:    &Signature{Name: "A U", Email: "a@x", When: when},
		Committer: &Signature{Name: "C", Email: "c@x", When: when.UTC()},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := g.Output(ctx, "cat-file", "commit", c.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"tree " + tree.String() + "\n",
		"parent " + parent.String() + "\n",
		"author A U <a@x> 1700000000 +0200\n",
		"committer C <c@x> 1700000000 +0000\n",
		"\nsubject\n\nbody",
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("commit lacks %q:\n%s", want, raw)
		}
	}
	if len(g.Env) != 4 {
		t.Errorf("CommitTree changed the runner's environment: %q", g.Env)
	}
	if _, err := g.CommitTree(ctx, CommitTreeRequest{Message: "x"}); err == nil {
		t.Error("a commit without a tree was written")
	}
}

func TestReadTree(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	a := treeCommit(t, g, map[string]string{"keep": "k\n", "f": "a\n"})
	b := treeCommit(t, g, map[string]string{"keep": "k\n", "f": "b\n", "new": "n\n"}, a)
	wt := t.TempDir()
	w := *g
	w.WorkTree = wt
	w.IndexFile = filepath.Join(t.TempDir(), "index")
	if err := w.ReadTree(ctx, ReadTreeRequest{Tree: a.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Run(ctx, nil, "checkout-index", "-a", "-u"); err != nil {
		t.Fatal(err)
	}
	// A two-tree merge moves the files from a to b; a local change where
	// nothing changes stays.
	if err := os.WriteFile(filepath.Join(wt, "keep"), []byte("local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.ReadTree(ctx, ReadTreeRequest{From: a.String(), Tree: b.String(), Update: true}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"keep": "local\n", "f": "b\n", "new": "n\n"} {
		if got, _ := os.ReadFile(filepath.Join(wt, name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// A local change in the way fails the whole read, changing nothing.
	if err := os.WriteFile(filepath.Join(wt, "f"), []byte("local f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.ReadTree(ctx, ReadTreeRequest{From: b.String(), Tree: a.String(), Update: true}); err == nil {
		t.Error("read-tree overwrote a local change")
	}
	if got, _ := os.ReadFile(filepath.Join(wt, "new")); string(got) != "n\n" {
		t.Errorf("a failed read-tree changed the work tree: new = %q", got)
	}
	for _, bad := range []ReadTreeRequest{{}, {Tree: a.String(), Update: true}, {Tree: "--index-output=/tmp/x"}, {From: "-u", Tree: a.String()}} {
		if err := w.ReadTree(ctx, bad); err == nil {
			t.Errorf("ReadTree(%+v) accepted", bad)
		}
	}
}
