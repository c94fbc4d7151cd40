package main

import (
	"time"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// WaitCmd is git sandbox wait.
type WaitCmd struct {
	Branch  string        `arg:"" help:"The sandbox."`
	Timeout time.Duration `help:"Give up after this long (exit 124); 0 waits for ever." default:"0"`
}

// Run waits for the agent and exits with its code.
func (c *WaitCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	code, err := sb.Wait(app.Ctx, c.Timeout)
	if err != nil {
		return err
	}
	if code != 0 {
		return usererr.ExitStatus(code)
	}
	return nil
}
