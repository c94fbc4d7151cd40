package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// Known is where a repository with sandboxes was, as its state directory
// remembers it: the index git sandbox ps --all-repos reads, one small file
// per repository beside its sandboxes (RepoNote), written by every start.
// Which sandboxes a repository has is never in it: their records say that,
// so rm has nothing to keep right here.
type Known struct {
	// ID is the repository's Repo.ID (its directory under the state root).
	ID string `json:"-"`
	// CommonDir, MainWorkTree, Name and Bare are the Repo's fields as
	// they were at the last start.
	CommonDir    string `json:"common_dir"`
	MainWorkTree string `json:"main_worktree"`
	Name         string `json:"name"`
	Bare         bool   `json:"bare,omitempty"`
}

// RepoNote is the file that remembers where the repository is (Known).
func (l Layout) RepoNote() string { return filepath.Join(l.RepoDir(), ".repo.json") }

// Remember writes down where the repository is, unless the note already
// says so.
func (l Layout) Remember(r *Repo) error {
	k := Known{CommonDir: r.CommonDir, MainWorkTree: r.MainWorkTree, Name: r.Name, Bare: r.Bare}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if old, err := os.ReadFile(l.RepoNote()); err == nil && string(old) == string(b) {
		return nil
	}
	if err := os.MkdirAll(l.RepoDir(), 0o700); err != nil {
		return fmt.Errorf("remember the repository: %w", err)
	}
	if err := atomicfile.Write(l.RepoNote(), b, 0o600); err != nil {
		return fmt.Errorf("remember the repository: %w", err)
	}
	return nil
}

// ReadNote reads the note of the repository whose state is in repoDir; ok
// is false when there is none (a repository whose sandboxes predate it).
func ReadNote(repoDir string) (k Known, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(repoDir, ".repo.json"))
	if errors.Is(err, os.ErrNotExist) {
		return Known{ID: filepath.Base(repoDir)}, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	k.ID = filepath.Base(repoDir)
	if err != nil {
		return k, false, fmt.Errorf("read %s: %w", filepath.Join(repoDir, ".repo.json"), err)
	}
	return k, true, nil
}

// Guess is what a repository's note would say, from the git directory
// its sandboxes' records name, for a repository without one: in the
// usual layout the main worktree holds the git directory.
func Guess(id, commonDir string) Known {
	k := Known{ID: id, CommonDir: commonDir, Name: nameOfID(id)}
	if filepath.Base(commonDir) == ".git" {
		k.MainWorkTree = filepath.Dir(commonDir)
	}
	return k
}

// nameOfID is the name part of a Repo.ID (the directory name, made safe).
func nameOfID(id string) string {
	if i := len(id) - 13; i > 0 && id[i] == '-' {
		return id[:i]
	}
	return id
}

// Open opens the repository where the note says it is. It fails when it
// is not there: moved or deleted, or another repository in its place (a
// repository's id is made from where its git directory is).
func (k Known) Open(ctx context.Context, sandboxRoots ...string) (*Repo, error) {
	if k.MainWorkTree == "" {
		return nil, errors.New("where it is was never written down")
	}
	if _, err := os.Stat(k.CommonDir); err != nil {
		return nil, errors.New("moved or deleted")
	}
	r, err := Open(ctx, k.MainWorkTree, sandboxRoots...)
	if err != nil {
		if _, serr := os.Stat(k.MainWorkTree); serr != nil {
			return nil, errors.New("moved or deleted")
		}
		return nil, err
	}
	if r.ID != k.ID {
		return nil, errors.New("another repository is there now")
	}
	return r, nil
}
