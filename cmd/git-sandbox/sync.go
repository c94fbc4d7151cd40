package main

// SyncCmd is git sandbox sync.
type SyncCmd struct {
	Branch string `arg:"" help:"The sandbox."`
}

// Help is sync's long help.
func (c *SyncCmd) Help() string {
	return `Brings the agent's commits back into your repository and moves the branch to
them, so it can be inspected, pushed, or opened as a pull request. The commits
come back as objects only, checked on the way (no .git-like paths, well-formed
trees), read without running anything the agent wrote.`
}

// Run syncs.
func (c *SyncCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	res, err := sb.Sync(app.Ctx, true)
	if err != nil {
		return err
	}
	switch {
	case res.Head == "":
		app.UI.Infof("the agent of %s has no commits", sb.Display())
	case res.Moved:
		app.UI.Infof("%s is now at %s (%d new objects)", sb.Display(), res.Head[:12], res.Objects)
	default:
		app.UI.Infof("%s is up to date at %s", sb.Display(), res.Head[:12])
	}
	return nil
}
