package land

// The journal of a move of the base. Apply updates the base's checkout
// before it moves the branch (so a lost compare-and-swap can put the
// checkout back); a process killed between the two would leave the
// checkout ahead of its branch. So the move is written down first, under
// the branch's land lock, and taken off once the branch moved or the
// checkout is back. A journal found by whoever takes the lock next (the
// next land onto the branch, or git sandbox doctor) is a land that died
// there: Recover finishes it the one safe way, back to before.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// journal is one move of the base under way.
type journal struct {
	Ref    string      `json:"ref"`
	Tip    gitcmd.Hash `json:"tip"`
	Commit gitcmd.Hash `json:"commit"`
	// Checkout and its git directory, when the branch is checked out.
	Checkout       string `json:"checkout,omitempty"`
	CheckoutGitDir string `json:"checkout_git_dir,omitempty"`
}

// write saves the journal at path atomically (write, fsync, rename).
func (j *journal) write(path string) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("land: journal: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".journal-*")
	if err != nil {
		return fmt.Errorf("land: journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("land: journal: %w", err)
	}
	return nil
}

// JournalSuffix ends the name of a branch's journal beside its land lock.
const JournalSuffix = ".journal"

// Recover finishes the move of the base that the journal at path
// describes, left by a land that died (the caller holds the branch's land
// lock, so no land is under way). It returns what it did ("" when there
// was no journal). The branch moved: the checkout had followed it before,
// so all is done. The branch did not move: a checkout that was already
// brought to the new commit is put back to the branch's tip.
func Recover(ctx context.Context, g *gitcmd.Runner, path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("land: journal: %w", err)
	}
	var j journal
	if err := json.Unmarshal(b, &j); err != nil || j.Ref == "" {
		// A journal is renamed into place whole: this one is not ours.
		return "", fmt.Errorf("land: journal %s is not readable: %v", path, err)
	}
	branch := termsafe.String(strings.TrimPrefix(j.Ref, "refs/heads/"))
	now, err := g.RevParse(ctx, j.Ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("land: read %s: %w", j.Ref, err)
	}
	what := fmt.Sprintf("a land onto %s was interrupted after it moved the branch to %s; nothing to repair", branch, j.Commit.Short())
	if now != j.Commit {
		what, err = j.putBack(ctx, branch, now)
		if err != nil {
			return "", err
		}
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("land: journal: %w", err)
	}
	return what, nil
}

// putBack brings the checkout back from the journal's commit to the
// branch's tip when the dead land had already updated it.
func (j *journal) putBack(ctx context.Context, branch string, now gitcmd.Hash) (string, error) {
	nothing := fmt.Sprintf("a land onto %s was interrupted before it moved the branch; nothing was changed", branch)
	if j.Checkout == "" || now != j.Tip {
		return nothing, nil
	}
	co := &gitcmd.Runner{GitDir: j.CheckoutGitDir, WorkTree: j.Checkout}
	head, _ := co.Output(ctx, "symbolic-ref", "-q", "HEAD")
	index, err := co.Output(ctx, "write-tree")
	if err != nil || head != j.Ref {
		return nothing, nil
	}
	tree, err := co.RevParse(ctx, j.Commit.String()+"^{tree}")
	if err != nil || index != tree.String() {
		return nothing, nil
	}
	_, _ = co.Run(ctx, nil, "update-index", "-q", "--refresh", "--ignore-submodules")
	if err := co.ReadTree(ctx, gitcmd.ReadTreeRequest{From: j.Commit.String(), Tree: j.Tip.String(), Update: true}); err != nil {
		return "", fmt.Errorf("land: put the checkout %s back to %s: %w", j.Checkout, j.Tip.Short(), err)
	}
	return fmt.Sprintf("a land onto %s was interrupted after it updated the checkout %s but before it moved the branch; put the checkout back to %s", branch, j.Checkout, j.Tip.Short()), nil
}

// RecoverAll recovers every journal in dir (the repository's land locks'
// directory) whose lock is free, and returns what it did.
func RecoverAll(ctx context.Context, g *gitcmd.Runner, dir string) ([]string, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+JournalSuffix))
	var done []string
	for _, p := range paths {
		unlock, err := record.TryLock(strings.TrimSuffix(p, JournalSuffix) + ".lock")
		if errors.Is(err, record.ErrBusy) {
			continue // a land is under way; it recovers the journal itself
		}
		if err != nil {
			return done, err
		}
		what, err := Recover(ctx, g, p)
		unlock()
		if err != nil {
			return done, err
		}
		if what != "" {
			done = append(done, what)
		}
	}
	return done, nil
}
