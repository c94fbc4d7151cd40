package gitcmd

import (
	"context"
	"io"
	"strings"
	"testing"
)

// EachBlob hands each blob's exact content, in order, whether fn reads all,
// part or none of it; a non-blob stops the stream with an error.
func TestEachBlob(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	var ids []string
	for _, c := range []string{"first\n", strings.Repeat("x", 100000), "", "last"} {
		id, err := g.Run(ctx, strings.NewReader(c), "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(string(id)))
	}
	var got []string
	err := g.EachBlob(ctx, ids, func(i int, size int64, content io.Reader) error {
		if i == 1 {
			b := make([]byte, 10) // read part of it only
			n, _ := io.ReadFull(content, b)
			got = append(got, string(b[:n]))
			return nil
		}
		b, err := io.ReadAll(content)
		if int64(len(b)) != size {
			t.Errorf("blob %d: read %d bytes, size %d", i, len(b), size)
		}
		got = append(got, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"first\n", "xxxxxxxxxx", "", "last"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	tree, err := g.PeelToTree(ctx, testCommit(t, g, "c\n").String())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.EachBlob(ctx, []string{tree.String()}, func(int, int64, io.Reader) error { return nil }); err == nil || !strings.Contains(err.Error(), "unexpected answer") {
		t.Errorf("a tree: %v", err)
	}
}
