package worktree

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestRememberAndOpenKnown: start's note says where the repository is;
// it opens from there while it stays, and says why not once it was moved,
// deleted or replaced by another repository.
func TestRememberAndOpenKnown(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t, "proj")
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{Root: t.TempDir(), RepoID: r.ID}
	if _, ok, err := ReadNote(l.RepoDir()); ok || err != nil {
		t.Fatalf("ReadNote before any start = %v, %v; want none", ok, err)
	}
	for range 2 { // the second is a no-op
		if err := l.Remember(r); err != nil {
			t.Fatal(err)
		}
	}
	k, ok, err := ReadNote(l.RepoDir())
	if !ok || err != nil || k.ID != r.ID || k.MainWorkTree != dir || k.CommonDir != r.CommonDir || k.Name != "proj" {
		t.Fatalf("ReadNote = %+v, %v, %v", k, ok, err)
	}
	if got, err := k.Open(ctx); err != nil || got.ID != r.ID {
		t.Fatalf("Open of a repository still in place = %v, %v", got, err)
	}

	moved := filepath.Join(filepath.Dir(dir), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open(ctx); err == nil || err.Error() != "moved or deleted" {
		t.Errorf("Open of a moved repository = %v", err)
	}
	// Another repository made where it was is not it.
	other := newRepo(t, "proj")
	k2 := k
	k2.MainWorkTree, k2.CommonDir = other, filepath.Join(other, ".git")
	if _, err := k2.Open(ctx); err == nil || err.Error() != "another repository is there now" {
		t.Errorf("Open of another repository in its place = %v", err)
	}
	if _, err := (Known{ID: k.ID, CommonDir: moved}).Open(ctx); err == nil {
		t.Error("Open without a main worktree succeeded")
	}
}

// TestGuessKnown: a repository whose sandboxes predate the note is found
// from its records' git directory, in the usual layout.
func TestGuessKnown(t *testing.T) {
	k := Guess("proj-0123456789ab", "/src/proj/.git")
	if k.Name != "proj" || k.MainWorkTree != "/src/proj" || k.ID != "proj-0123456789ab" {
		t.Errorf("Guess = %+v", k)
	}
	if k := Guess("x", "/srv/proj.git"); k.MainWorkTree != "" || k.Name != "x" {
		t.Errorf("Guess of a bare layout = %+v", k)
	}
}

// TestReadNoteDamaged: a note that is not JSON is an error, not a crash.
func TestReadNoteDamaged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj-0123456789ab")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".repo.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, ok, err := ReadNote(dir); ok || err == nil || k.ID != "proj-0123456789ab" {
		t.Errorf("ReadNote of a damaged note = %+v, %v, %v", k, ok, err)
	}
}
