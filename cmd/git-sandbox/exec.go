package main

import "github.com/git-sandbox/git-sandbox/internal/usererr"

// ExecCmd is git sandbox exec.
type ExecCmd struct {
	Branch  string   `arg:"" help:"The sandbox."`
	Command []string `arg:"" optional:"" help:"The command, after --; default: an interactive shell."`
}

// Run runs the command in the sandbox and exits with its code.
func (c *ExecCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	code, err := sb.Exec(app.Ctx, c.Command, app.IO())
	if err != nil {
		return err
	}
	if code != 0 {
		return usererr.ExitStatus(code)
	}
	return nil
}
