package main

import "time"

// StopCmd is git sandbox stop.
type StopCmd struct {
	Branch  string        `arg:"" help:"The sandbox."`
	Timeout time.Duration `help:"How long the agent gets to exit before it is killed." default:"10s"`
}

// Run stops the agent and takes a snapshot.
func (c *StopCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	snap, err := sb.Stop(app.Ctx, c.Timeout)
	if err != nil {
		return err
	}
	app.UI.Infof("stopped %s; snapshot %s (%d changes)", sb.Display(), snap.ID[:12], snap.Changes)
	return nil
}
