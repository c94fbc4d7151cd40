package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// carry copies the uncommitted work of the current checkout (staged,
// unstaged, untracked and not ignored) into the new worktree, keeping what
// was staged staged. The checkout itself is not touched: its state is read
// through a copy of its index. It returns the staged tree, whose objects
// the agent's index names (they are given to the agent: see
// prepareObjects).
func carry(ctx context.Context, repo *worktree.Repo, newWorktree, newAdmin string) (string, error) {
	tmp, err := os.CreateTemp("", "git-sandbox-carry-*.index")
	if err != nil {
		return "", fmt.Errorf("--carry: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if b, err := os.ReadFile(filepath.Join(repo.GitDir, "index")); err == nil {
		if err := os.WriteFile(tmp.Name(), b, 0o600); err != nil {
			return "", fmt.Errorf("--carry: %w", err)
		}
	} else {
		os.Remove(tmp.Name())
	}
	cur := &gitcmd.Runner{GitDir: repo.GitDir, WorkTree: repo.WorkTree, IndexFile: tmp.Name()}
	staged, err := cur.Output(ctx, "write-tree")
	if err != nil {
		return "", usererr.Wrap(err, "--carry: the checkout's index cannot be written as a tree: %v", err).
			Hint("resolve any merge conflicts in your checkout first")
	}
	if _, err := cur.Run(ctx, nil, "add", "--all", "--", "."); err != nil {
		return "", fmt.Errorf("--carry: %w", err)
	}
	full, err := cur.Output(ctx, "write-tree")
	if err != nil {
		return "", fmt.Errorf("--carry: %w", err)
	}
	nw := &gitcmd.Runner{GitDir: newAdmin, WorkTree: newWorktree}
	if err := nw.ReadTree(ctx, gitcmd.ReadTreeRequest{From: "HEAD", Tree: full, Update: true}); err != nil {
		return "", fmt.Errorf("--carry: %w", err)
	}
	if err := nw.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: staged}); err != nil {
		return "", fmt.Errorf("--carry: %w", err)
	}
	if _, err := nw.Run(ctx, nil, "update-index", "-q", "--refresh"); err != nil && gitcmd.ExitCode(err) != 1 {
		return "", fmt.Errorf("--carry: %w", err)
	}
	return staged, nil
}
