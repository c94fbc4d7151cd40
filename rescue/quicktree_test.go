package rescue

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
		if err := writePack(ctx, g, []packObject{sub, top}, len(id)); err != nil {
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

// A file is stored as git add stores it: in the pack when nothing
// converts it, and through git hash-object -w when an attribute does
// (here CRLF made LF) or it is too large to hold.
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
			"huge":           strings.Repeat("z", packFileMax+1),
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
			t.Fatalf("%s: %d blobs go in the pack, want 4 (not the converted one, nor one over %d bytes)", format, len(blobs), packFileMax)
		}
		hexLen := len(ed.set["small"][1])
		if err := writePack(ctx, g, blobs, hexLen); err != nil {
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

// A file goes into the pack only when what is read of it is what git
// hashed, within the size asked, and not through a symlink.
func TestPackableOnlyWhatGitHashed(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("now\n"), 0o644))
	must(t, os.Symlink("f", filepath.Join(dir, "link")))
	then := hex.EncodeToString(objectID("blob", []byte("then\n"), 40))
	now := hex.EncodeToString(objectID("blob", []byte("now\n"), 40))
	if b, err := packable(dir, "f", then, 100); b != nil || err != nil {
		t.Fatalf("a file that changed since git hashed it: %v, %v", b, err)
	}
	if b, err := packable(dir, "f", now, 3); b != nil || err != nil {
		t.Fatalf("a file over the size asked: %v, %v", b, err)
	}
	if b, err := packable(dir, "f", now, 100); b == nil || err != nil || string(b.body) != "now\n" {
		t.Fatalf("the file as git hashed it: %v, %v", b, err)
	}
	if _, err := packable(dir, "link", now, 100); err == nil {
		t.Fatal("read through a symlink")
	}
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	if b, err := packable(dir, "fifo", now, 100); b != nil || err == nil {
		t.Fatalf("a FIFO: %v, %v", b, err)
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
