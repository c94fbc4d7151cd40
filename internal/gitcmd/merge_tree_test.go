package gitcmd

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// treeCommit writes a commit holding files (path → content; paths may have
// directories) with the given parents.
func treeCommit(t *testing.T, g *Runner, files map[string]string, parents ...Hash) Hash {
	t.Helper()
	ctx := context.Background()
	ix := *g
	ix.IndexFile = filepath.Join(t.TempDir(), "index")
	for p, c := range files {
		blob, err := ix.Run(ctx, strings.NewReader(c), "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ix.Run(ctx, nil, "update-index", "--add", "--cacheinfo", "100644,"+strings.TrimSpace(string(blob))+","+p); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := ix.Output(ctx, "write-tree")
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.CommitTree(ctx, CommitTreeRequest{Tree: Hash(tree), Parents: parents, Message: "c\n"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Output of git 2.39 for a content conflict (f), an add/add (s) and a
// directory/file conflict where git moved the file vendor/lib aside.
const conflictOutput = "dd368413e05d639e9656106000f0e9a76ceea345\x00" +
	"100644 df967b96a579e45a18b8251732d16804b2e56a55 1\tf\x00" +
	"100644 78981922613b2afb6025042ff6bd878ac1994e85 2\tf\x00" +
	"100644 61780798228d17af2d34fce4cfbdf35556832472 3\tf\x00" +
	"100644 1275430f1765c63e539cb0452565563bd6aef6a6 2\ts\x00" +
	"100644 1367b378e3506f51bd53a610455389a950afac7f 3\ts\x00" +
	"100644 f73f3093ff865c514c6c51f867e35f693487d0d3 3\tvendor/lib~09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4\x00" +
	"\x00" +
	"1\x00f\x00Auto-merging\x00Auto-merging f\n\x00" +
	"1\x00f\x00CONFLICT (contents)\x00CONFLICT (content): Merge conflict in f\n\x00" +
	"2\x00vendor/lib~09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4\x00vendor/lib\x00CONFLICT (file/directory)\x00" +
	"CONFLICT (file/directory): directory in the way of vendor/lib from 09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4; moving it to vendor/lib~09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4 instead.\n\x00"

func TestParseMergeTree(t *testing.T) {
	out, err := parseMergeTree([]byte(conflictOutput))
	if err != nil {
		t.Fatal(err)
	}
	if out.tree != "dd368413e05d639e9656106000f0e9a76ceea345" {
		t.Errorf("tree = %s", out.tree)
	}
	if len(out.files) != 6 || out.files[5] != "vendor/lib~09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4" {
		t.Errorf("files = %q", out.files)
	}
	if len(out.messages) != 3 {
		t.Fatalf("messages = %+v", out.messages)
	}
	m := out.messages[2]
	if m.Type != "CONFLICT (file/directory)" || !slices.Equal(m.Paths, []string{"vendor/lib~09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4", "vendor/lib"}) || strings.HasSuffix(m.Text, "\n") {
		t.Errorf("file/directory message = %+v", m)
	}
	ours := Hash("1111111111111111111111111111111111111111")
	theirs := Hash("09bc0b5c15e2f3baaa0086ab43cfd701b023bfd4")
	if got := out.conflictPaths(ours, theirs); !slices.Equal(got, []string{"f", "s", "vendor/lib"}) {
		t.Errorf("conflict paths = %q, want [f s vendor/lib]", got)
	}

	clean, err := parseMergeTree([]byte("26925bd13d843505f98e54b32f4fec2d3e7e5241\x00"))
	if err != nil || clean.tree != "26925bd13d843505f98e54b32f4fec2d3e7e5241" || clean.files != nil || clean.messages != nil {
		t.Errorf("clean = %+v, %v", clean, err)
	}
	for _, bad := range []string{
		"",
		"26925bd13d843505f98e54b32f4fec2d3e7e5241", // not NUL-terminated
		"not-a-tree\x00", // no tree
		"26925bd13d843505f98e54b32f4fec2d3e7e5241\x00f\x00\x00",                            // file entry without mode, object, stage
		"26925bd13d843505f98e54b32f4fec2d3e7e5241\x00100644 a 1\tf\x00\x00x\x00",           // message without a count
		"26925bd13d843505f98e54b32f4fec2d3e7e5241\x00100644 a 1\tf\x00\x002\x00f\x00T\x00", // cut short
	} {
		if _, err := parseMergeTree([]byte(bad)); err == nil {
			t.Errorf("parseMergeTree(%q) accepted", bad)
		}
	}
}

func TestUnmangle(t *testing.T) {
	ours := Hash("1111111111111111111111111111111111111111")
	theirs := Hash("2222222222222222222222222222222222222222")
	tests := map[string]string{
		"vendor/lib~" + string(theirs):         "vendor/lib",
		"lib~" + string(ours):                  "lib",
		"lib~" + string(ours) + "_1":           "lib",
		"a/b c~" + string(theirs) + "_12":      "a/b c",
		"lib~" + string(ours) + "_":            "lib~" + string(ours) + "_",
		"lib~" + string(ours) + "_x":           "lib~" + string(ours) + "_x",
		"lib~" + string(ours) + ".go":          "lib~" + string(ours) + ".go",
		"lib~1111":                             "lib~1111",
		"~" + string(ours):                     "~" + string(ours),
		"plain":                                "plain",
		"backup~" + string(ours) + "/inner.go": "backup~" + string(ours) + "/inner.go",
	}
	for in, want := range tests {
		if got := unmangle(in, ours, theirs); got != want {
			t.Errorf("unmangle(%q) = %q, want %q", in, got, want)
		}
	}
}

// Real merges: a clean one, and one with a content conflict and a
// directory/file conflict whose reported paths must be the real ones.
func TestMergeTree(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	base := treeCommit(t, g, map[string]string{"f": "1\n2\n3\n", "vendor/other": "x\n"})
	ours := treeCommit(t, g, map[string]string{"f": "one\n2\n3\n", "vendor/other": "x\n", "vendor/lib/x.go": "dir\n"}, base)
	theirs := treeCommit(t, g, map[string]string{"f": "1\n2\nthree\n", "vendor/other": "x\n"}, base)
	tree, err := g.MergeTree(ctx, MergeTreeRequest{Ours: ours, Theirs: theirs})
	if err != nil {
		t.Fatalf("clean merge: %v", err)
	}
	if f, _ := g.Output(ctx, "cat-file", "blob", tree.String()+":f"); f != "one\n2\nthree" {
		t.Errorf("merged f = %q", f)
	}

	conflicting := treeCommit(t, g, map[string]string{"f": "ONE\n2\n3\n", "vendor/other": "x\n", "vendor/lib": "file\n"}, base)
	_, err = g.MergeTree(ctx, MergeTreeRequest{Ours: ours, Theirs: conflicting})
	var ce *MergeTreeConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("conflicting merge = %v, want MergeTreeConflictError", err)
	}
	if !slices.Equal(ce.Paths, []string{"f", "vendor/lib"}) {
		t.Errorf("conflict paths = %q, want [f vendor/lib]", ce.Paths)
	}
	if ce.Tree.IsZero() || len(ce.Messages) == 0 {
		t.Errorf("conflict = %+v", ce)
	}
	if !strings.Contains(err.Error(), `2 path(s): "f", "vendor/lib"`) {
		t.Errorf("message = %q", err)
	}

	if _, err := g.MergeTree(ctx, MergeTreeRequest{Ours: "main", Theirs: theirs}); err == nil {
		t.Error("a merge of a name that is not a full object name was accepted")
	}
}

// With a merge base the sides are trees, merged as changes from it
// (whatever history their commits have), and the markers carry the labels.
func TestMergeTreeFromBase(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	base := treeCommit(t, g, map[string]string{"f": "1\n2\n3\n"})
	tree := func(c Hash) Hash {
		h, err := g.RevParse(ctx, c.String()+"^{tree}")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	// Unrelated commits: only the given base relates the trees.
	ours := tree(treeCommit(t, g, map[string]string{"f": "one\n2\n3\n"}))
	theirs := tree(treeCommit(t, g, map[string]string{"f": "1\n2\nthree\n"}))
	merged, err := g.MergeTree(ctx, MergeTreeRequest{Base: base, Ours: ours, Theirs: theirs})
	if err != nil {
		t.Fatalf("clean merge: %v", err)
	}
	if f, _ := g.Output(ctx, "cat-file", "blob", merged.String()+":f"); f != "one\n2\nthree" {
		t.Errorf("merged f = %q", f)
	}
	other := tree(treeCommit(t, g, map[string]string{"f": "ONE\n2\n3\n"}))
	_, err = g.MergeTree(ctx, MergeTreeRequest{Base: base, Ours: ours, Theirs: other, OursLabel: "sandbox t1\nx", TheirsLabel: "main abc"})
	ce, ok := errors.AsType[*MergeTreeConflictError](err)
	if !ok || !slices.Equal(ce.Paths, []string{"f"}) {
		t.Fatalf("conflicting merge = %v", err)
	}
	f, _ := g.Output(ctx, "cat-file", "blob", ce.Tree.String()+":f")
	if !strings.Contains(f, "<<<<<<< sandbox t1\n") || !strings.Contains(f, ">>>>>>> main abc") {
		t.Errorf("markers not relabelled:\n%s", f)
	}
}
