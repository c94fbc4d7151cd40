package main

import "github.com/git-sandbox/git-sandbox/internal/sandbox"

// RmCmd is git sandbox rm.
type RmCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	Force  bool   `short:"f" help:"Also remove a running sandbox, one with work that was not landed, or one holding nested repositories."`
}

// Help is rm's long help.
func (c *RmCmd) Help() string {
	return `Removes the sandbox's container, worktree, branch and agent repository. A final
snapshot is taken first and the snapshots stay: git sandbox rescue list shows
them until git sandbox rescue prune removes them.

Refuses (without --force) while the agent runs, when work was not landed, and
while the worktree holds a nested git repository (git init or a clone by the
agent): its files are in no snapshot, so removing the worktree would lose them.`
}

// Run removes the sandbox.
func (c *RmCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	last, err := sb.Remove(app.Ctx, sandbox.RemoveOptions{Force: c.Force})
	if err != nil {
		return err
	}
	if last != nil && last.Changes > 0 {
		app.UI.Infof("removed %s; its work is in snapshot %s (git sandbox rescue restore %s --branch NEW)", sb.Display(), last.ID[:12], last.ID[:12])
		return nil
	}
	app.UI.Infof("removed %s", sb.Display())
	return nil
}
