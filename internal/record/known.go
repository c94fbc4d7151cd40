package record

import (
	"errors"
	"os"
	"path/filepath"
	"sort"

	"github.com/git-sandbox/git-sandbox/worktree"
)

// KnownRepos are the repositories that have sandboxes on this machine, as
// the state root holds them: each directory with a sandbox's record in it,
// where its note (worktree.Known) says the repository is, or, without a
// note, where its records' git directory suggests. Sorted by name, then
// where they are.
func KnownRepos(stateRoot string) ([]worktree.Known, []error) {
	entries, err := os.ReadDir(stateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{err}
	}
	var out []worktree.Known
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		dir := filepath.Join(stateRoot, e.Name())
		recs, rerrs := List(dir, filepath.Base(worktree.Layout{}.Record("x")))
		errs = append(errs, rerrs...)
		if len(recs) == 0 {
			continue
		}
		k, ok, err := worktree.ReadNote(dir)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			k = worktree.Guess(e.Name(), recs[0].CommonDir)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].MainWorkTree < out[j].MainWorkTree
	})
	return out, errs
}
