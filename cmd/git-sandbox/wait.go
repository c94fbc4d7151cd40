package main

import (
	"fmt"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// WaitCmd is git sandbox wait.
type WaitCmd struct {
	Branches []string      `arg:"" name:"branch" help:"The sandboxes."`
	Any      bool          `help:"Return when the first of the sandboxes' agents exits, printing which."`
	Timeout  time.Duration `help:"Give up after this long (exit 124); 0 waits for ever." default:"0"`
}

// Help is wait's long help.
func (c *WaitCmd) Help() string {
	return `Waits for a sandbox's agent to exit and exits with its code. With several
sandboxes, waits for each in turn and exits with the first non-zero code;
with --any, returns as soon as one of them has exited (one that already has
counts at once), prints its branch, and exits with its code.`
}

// Run waits for the agents and exits with their code.
func (c *WaitCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	var sbs []*sandbox.Sandbox
	for _, b := range c.Branches {
		sb, err := env.Find(b)
		if err != nil {
			return err
		}
		sbs = append(sbs, sb)
	}
	if c.Any {
		sb, code, err := env.WaitAny(app.Ctx, sbs, c.Timeout)
		if err != nil {
			return err
		}
		fmt.Fprintln(app.Stdout, termsafe.String(sb.Branch))
		sayOutOfMemory(app, sb, code)
		if code != 0 {
			return usererr.ExitStatus(code)
		}
		return nil
	}
	deadline := time.Time{}
	if c.Timeout > 0 {
		deadline = time.Now().Add(c.Timeout)
	}
	first := 0
	for _, sb := range sbs {
		left := time.Duration(0)
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				left = time.Nanosecond
			}
		}
		code, err := sb.Wait(app.Ctx, left)
		if err != nil {
			return err
		}
		sayOutOfMemory(app, sb, code)
		if first == 0 {
			first = code
		}
	}
	if first != 0 {
		return usererr.ExitStatus(first)
	}
	return nil
}
