package rescue

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// packRepo is a repository of the given object format for the pack's
// tests, and a runner in it.
func packRepo(t *testing.T, format string) (string, *gitcmd.Runner) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--object-format="+format, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", format, err, out)
	}
	return dir, &gitcmd.Runner{GitDir: dir + "/.git", Isolated: true}
}

// The trees made for the fast way are the ones git makes of the same
// entries (git mktree, which sorts them itself), in both object formats,
// with names git orders as if trees ended in "/"; the pack that carries
// them is one git takes.
func TestTreeIDIsGits(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		_, g := packRepo(t, format)
		ctx := context.Background()
		blob, err := g.Run(ctx, strings.NewReader("x\n"), "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(string(blob))
		raw, _ := hex.DecodeString(id)
		sub := encodeTree(map[string]quickEntry{"f": {"100755", raw}}, len(id))
		top := encodeTree(map[string]quickEntry{
			"a": {"40000", sub.id}, "a.b": {"100644", raw}, "a-c": {"120000", raw}, "a0": {"100644", raw},
		}, len(id))
		if err := writePack(ctx, g, t.TempDir(), []packObject{sub, top}, len(id)); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		mk := "100755 blob " + id + "\tf\n"
		if got, err := g.Run(ctx, strings.NewReader(mk), "mktree"); err != nil || strings.TrimSpace(string(got)) != hex.EncodeToString(sub.id) {
			t.Fatalf("%s: git mktree gave %q (%v), made %x", format, got, err, sub.id)
		}
		mk = "100644 blob " + id + "\ta0\n120000 blob " + id + "\ta-c\n40000 tree " + hex.EncodeToString(sub.id) + "\ta\n100644 blob " + id + "\ta.b\n"
		if got, err := g.Run(ctx, strings.NewReader(mk), "mktree"); err != nil || strings.TrimSpace(string(got)) != hex.EncodeToString(top.id) {
			t.Fatalf("%s: git mktree gave %q (%v), made %x", format, got, err, top.id)
		}
		ls, err := g.Run(ctx, nil, "ls-tree", "--name-only", hex.EncodeToString(top.id))
		if err != nil || string(ls) != "a-c\na.b\na\na0\n" {
			t.Fatalf("%s: order %q %v", format, ls, err)
		}
	}
}

// A file is stored as git add stores it: as it is when nothing converts
// it (in the pack, any size), and through git hash-object -w when an
// attribute does (here CRLF made LF).
func TestQuickBlobsAreWhatGitStores(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		dir, g := packRepo(t, format)
		ctx := context.Background()
		files := map[string]string{
			".gitattributes": "*.crlf text eol=lf\n",
			"small":          "s\n",
			"big":            strings.Repeat("0123456789abcdef", 20_000),
			"win.crlf":       "one\r\ntwo\r\n",
			"empty":          "",
			"twin":           "s\n",
		}
		var stage []quickFile
		for name, content := range files {
			must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			if name != ".gitattributes" {
				stage = append(stage, quickFile{path: name, mode: "100644", size: int64(len(content))})
			}
		}
		s := &Local{Worktree: dir}
		ed := &quickEdits{set: map[string][2]string{}, remove: map[string]bool{}}
		blobs, err := s.quickHash(ctx, g, stage, ed)
		if err != nil {
			t.Fatal(err)
		}
		if len(blobs) != 4 {
			t.Fatalf("%s: %d blobs go as they are, want 4 (all but the converted one)", format, len(blobs))
		}
		hexLen := len(ed.set["small"][1])
		if err := writePack(ctx, g, dir, blobs, hexLen); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		stored := map[string]string{"win.crlf": "one\ntwo\n"}
		for _, f := range stage {
			content, ok := stored[f.path]
			if !ok {
				content = files[f.path]
			}
			want, err := g.Run(ctx, strings.NewReader(content), "hash-object", "--no-filters", "--stdin")
			if err != nil {
				t.Fatal(err)
			}
			if got := ed.set[f.path][1]; got != strings.TrimSpace(string(want)) {
				t.Errorf("%s: %s: id %s, git gives %s", format, f.path, got, want)
			}
			body, err := g.Run(ctx, nil, "cat-file", "blob", ed.set[f.path][1])
			if err != nil {
				t.Errorf("%s: %s: not in the store: %v", format, f.path, err)
			} else if string(body) != content {
				t.Errorf("%s: %s: stored %d bytes, not the file's", format, f.path, len(body))
			}
		}
	}
}

// A file that changes between its look and the pack fails the pack,
// which writes nothing: the index's way takes the snapshot.
func TestQuickPackRefusesAFileThatChanged(t *testing.T) {
	dir, g := packRepo(t, "sha1")
	ctx := context.Background()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("before\n"), 0o644))
	s := &Local{Worktree: dir}
	ed := &quickEdits{set: map[string][2]string{}, remove: map[string]bool{}}
	blobs, err := s.quickHash(ctx, g, []quickFile{{path: "f", mode: "100644"}}, ed)
	if err != nil || len(blobs) != 1 {
		t.Fatalf("%d blobs, %v", len(blobs), err)
	}
	for i, change := range []string{"after!\n", "longer than before\n"} {
		must(t, os.WriteFile(filepath.Join(dir, "f"), []byte(change), 0o644))
		if err := writePack(ctx, g, dir, blobs, 40); !errors.Is(err, errNotQuick) {
			t.Fatalf("change %d: %v, want the index's way", i, err)
		}
	}
	if _, err := g.Run(ctx, nil, "cat-file", "-e", ed.set["f"][1]); err == nil {
		t.Fatal("the blob was written from a changed file")
	}
	packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.idx"))
	if len(packs) != 0 {
		t.Fatalf("a failed pack left %v", packs)
	}
}

// Pack entry sizes take one byte for four bits, then seven bits a byte.
func TestEntryHeader(t *testing.T) {
	for _, c := range []struct {
		kind int
		size int64
		want []byte
	}{
		{packBlob, 0, []byte{0x30}},
		{packBlob, 15, []byte{0x3f}},
		{packTree, 16, []byte{0xa0, 0x01}},
		{packBlob, 2047, []byte{0xbf, 0x7f}},
		{packBlob, 2048, []byte{0xb0, 0x80, 0x01}},
	} {
		if got := entryHeader(c.kind, c.size); !bytes.Equal(got, c.want) {
			t.Errorf("entryHeader(%d, %d) = %x, want %x", c.kind, c.size, got, c.want)
		}
	}
}
