package hooks

import (
	"context"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// InWorkTree is a hooks directory inside a work tree (core.hooksPath =
// .husky, say): the hook files installed there would show in git status,
// be committed and pushed, and be gone after a checkout.
type InWorkTree struct {
	Dir      string
	WorkTree string
	// Tracked are the hook files there that the repository tracks, which
	// install would rewrite.
	Tracked []string
}

// CheckWorkTree says whether dir is inside r's main work tree or the
// current one (nil when it is not, or is inside a git directory).
func CheckWorkTree(ctx context.Context, r *worktree.Repo, dir string) *InWorkTree {
	if worktree.Within(dir, r.CommonDir) || worktree.Within(dir, r.GitDir) {
		return nil
	}
	for _, wt := range []struct{ path, gitDir string }{{r.MainWorkTree, r.CommonDir}, {r.WorkTree, r.GitDir}} {
		if wt.path == "" || !worktree.Within(dir, wt.path) {
			continue
		}
		rel, _ := filepath.Rel(wt.path, dir)
		tracked, _ := r.GitAt(wt.gitDir, wt.path).Lines(ctx, "ls-files", "-z", "--",
			filepath.ToSlash(filepath.Join(rel, "pre-push")), filepath.ToSlash(filepath.Join(rel, Chained)))
		return &InWorkTree{Dir: dir, WorkTree: wt.path, Tracked: tracked}
	}
	return nil
}

// Refusal is install's answer without --force.
func (w *InWorkTree) Refusal() error {
	e := usererr.New("the hooks directory %s is inside the work tree %s: the hook would be committed, pushed, and gone after a checkout", termsafe.String(w.Dir), termsafe.String(w.WorkTree))
	if len(w.Tracked) > 0 {
		e = e.Hint("%s is tracked: install would rewrite it", termsafe.String(w.Tracked[0]))
	}
	return e.Hint("call git sandbox hook pre-push from a hook of your own there, or install anyway with git sandbox hooks install --force").
		WithCode(usererr.ExitRefused)
}
