package main

import (
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/sigstack"
)

// AttachCmd is git sandbox attach.
type AttachCmd struct {
	Branch string `arg:"" help:"The sandbox."`
}

// Run attaches to the agent. Termination and hang-up end the attachment
// (like logs -f); the agent goes on running.
func (c *AttachCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	ctx, stop := sigstack.NotifyContext(app.Ctx, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return sb.Attach(ctx, app.IO())
}
