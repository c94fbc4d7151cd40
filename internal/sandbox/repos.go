package sandbox

import (
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/ui"

	"github.com/git-sandbox/git-sandbox/worktree"
)

// NewGoneEnv is the environment of a repository that is no longer where
// its note says (moved or deleted): its records and its engines' containers
// can still be read (RecordedStatuses), nothing that needs its git.
func NewGoneEnv(k worktree.Known, cfg *config.Loaded, stateRoot string, p *ui.Printer) *Env {
	return NewEnv(&worktree.Repo{ID: k.ID, CommonDir: k.CommonDir, MainWorkTree: k.MainWorkTree, Name: k.Name, Bare: k.Bare}, cfg, stateRoot, p)
}
