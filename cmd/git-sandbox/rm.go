package main

import "github.com/git-sandbox/git-sandbox/internal/sandbox"

// RmCmd is git sandbox rm.
type RmCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	Force  bool   `short:"f" help:"Also remove a running sandbox or one with work that was not landed."`
}

// Help is rm's long help.
func (c *RmCmd) Help() string {
	return `Removes the sandbox's container, worktree, branch and agent repository. A final
snapshot is taken first and the snapshots stay: git sandbox rescue list shows
them until git sandbox rescue prune removes them.`
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
