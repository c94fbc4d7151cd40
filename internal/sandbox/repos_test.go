package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/record"
)

// TestKnownRepos: the state root knows the repositories with a sandbox's
// record (where start's note says they are, or, without a note, where
// their records' git directory says); a repository moved away is still
// listed from its records, with its container's state.
func TestKnownRepos(t *testing.T) {
	te := newTestEnv(t)
	ctx := context.Background()
	root := te.env.Layout.Root
	if known, errs := record.KnownRepos(root); len(known) != 0 || len(errs) != 0 {
		t.Fatalf("KnownRepos before any start = %v, %v", known, errs)
	}
	te.start("a1")
	// Directories of the state root with no sandbox's record are no
	// repository's (logins, and a repository whose last sandbox went).
	if err := os.MkdirAll(filepath.Join(root, "logins", "claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "gone-0123456789ab", ".visible"), 0o700); err != nil {
		t.Fatal(err)
	}
	known, errs := record.KnownRepos(root)
	if len(known) != 1 || len(errs) != 0 {
		t.Fatalf("KnownRepos = %+v, %v; want the one repository", known, errs)
	}
	k := known[0]
	if k.ID != te.env.Repo.ID || k.MainWorkTree != te.repo || k.Name != "repo" {
		t.Errorf("KnownRepos = %+v, want %s at %s", k, te.env.Repo.ID, te.repo)
	}
	// Without the note (sandboxes made before it), the records tell.
	if err := os.Remove(te.env.Layout.RepoNote()); err != nil {
		t.Fatal(err)
	}
	if known, _ := record.KnownRepos(root); len(known) != 1 || known[0] != k {
		t.Errorf("KnownRepos without the note = %+v, want %+v", known, k)
	}

	if err := os.Rename(te.repo, te.repo+"-moved"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open(ctx); err == nil {
		t.Fatal("a moved repository opened")
	}
	env := NewGoneEnv(k, te.env.Config, root, te.env.UI)
	env.Engines = te.env.Engines
	list := env.RecordedStatuses(ctx)
	if len(list) != 1 || list[0].Branch != "a1" || list[0].State != StateRunning {
		t.Errorf("RecordedStatuses of a moved repository = %+v, want a1 running", list)
	}
}

// TestKnownReposKeptByStartAndRm: rm of a repository's last sandbox
// takes it off the list, the next start puts it back.
func TestKnownReposKeptByStartAndRm(t *testing.T) {
	te := newTestEnv(t)
	ctx := context.Background()
	te.start("r1")
	if _, err := te.find("r1").Remove(ctx, RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if known, _ := record.KnownRepos(te.env.Layout.Root); len(known) != 0 {
		t.Errorf("KnownRepos after rm of the last sandbox = %+v", known)
	}
	te.start("r2")
	if known, _ := record.KnownRepos(te.env.Layout.Root); len(known) != 1 || known[0].ID != te.env.Repo.ID {
		t.Errorf("KnownRepos after a new start = %+v", known)
	}
}
