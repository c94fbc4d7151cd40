package agentrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRefStaysInsideTheRepository(t *testing.T) {
	dir := t.TempDir()
	gitDir := filepath.Join(dir, "git")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(gitDir, "refs"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := strings.Repeat("ab", 20)
	// The agent planted refs/heads as a symlink out of its repository.
	if err := os.Symlink(outside, filepath.Join(gitDir, "refs", "heads")); err != nil {
		t.Fatal(err)
	}
	if err := WriteRef(gitDir, "refs/heads/main", id); err == nil {
		t.Error("a ref was written through a symlink out of the repository")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the repository: %v", entries)
	}
	// A symlink at the ref itself is replaced, not followed.
	if err := os.Remove(filepath.Join(gitDir, "refs", "heads")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(gitDir, "refs", "heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "victim")
	if err := os.Symlink(target, filepath.Join(gitDir, "refs", "heads", "main")); err != nil {
		t.Fatal(err)
	}
	if err := WriteRef(gitDir, "refs/heads/main", id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the write followed the symlink")
	}
	if b, _ := os.ReadFile(filepath.Join(gitDir, "refs", "heads", "main")); string(b) != id+"\n" {
		t.Errorf("ref = %q", b)
	}
	for _, bad := range []string{"refs/heads/../../x", "HEAD\n", "refs/heads/a b"} {
		if err := WriteRef(gitDir, bad, id); err == nil {
			t.Errorf("WriteRef(%q) accepted", bad)
		}
	}
	if err := WriteRef(gitDir, "refs/heads/x", "not-an-id"); err == nil {
		t.Error("WriteRef accepted a non-id")
	}
	if err := WriteFile(gitDir, "../escape", []byte("x")); err == nil {
		t.Error("WriteFile wrote outside the repository")
	}
}
