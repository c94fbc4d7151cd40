package verify

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func tarOf(t *testing.T, entries ...tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h := h
		body := []byte("content of " + h.Name)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	return &buf
}

func TestExtractWritesFilesLinksAndModes(t *testing.T) {
	dir := t.TempDir()
	buf := tarOf(t,
		tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "src/a.txt", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "run.sh", Typeflag: tar.TypeReg, Mode: 0o755},
		tar.Header{Name: "pw", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	)
	if err := extract(buf, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "src", "a.txt")); string(b) != "content of src/a.txt" {
		t.Errorf("a.txt = %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "run.sh")); fi.Mode().Perm()&0o100 == 0 {
		t.Error("run.sh lost its executable bit")
	}
	if l, err := os.Readlink(filepath.Join(dir, "pw")); err != nil || l != "/etc/passwd" {
		t.Errorf("symlink = %q, %v", l, err)
	}
}

func TestExtractStaysBeneathTheDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "x")
	os.Mkdir(dir, 0o755)
	outside := t.TempDir()
	buf := tarOf(t,
		tar.Header{Name: "../escape.txt", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside},
		tar.Header{Name: "out/through-link.txt", Typeflag: tar.TypeReg, Mode: 0o644},
	)
	err := extract(buf, dir)
	if _, serr := os.Stat(filepath.Join(parent, "escape.txt")); serr == nil {
		t.Error("a ../ entry was written outside")
	}
	if _, serr := os.Stat(filepath.Join(outside, "through-link.txt")); serr == nil {
		t.Error("a file was written through a symlink out of the directory")
	}
	if err == nil {
		t.Error("writing through a symlink out of the directory was not an error")
	}
}
