package main

import (
	"os"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// AttachCmd is git sandbox attach.
type AttachCmd struct {
	Branch string `arg:"" help:"The sandbox."`
}

// Help is attach's long help.
func (c *AttachCmd) Help() string {
	return `Connects this terminal to the running agent: you see what it prints and type
into it. It ends when the agent exits, or when you leave; the agent runs on.

Keys, when the agent has a terminal (it was started from one, or is an
interactive agent started with -d):
  Ctrl-P Ctrl-Q  detach, as docker attach does: attach ends (exit status 0)
                 and the agent runs on; git sandbox attach BRANCH connects
                 again. A Ctrl-P followed by any other key is passed on with
                 that key.
  Ctrl-C         is a key like any other: it goes to the agent's terminal
                 as if typed there, which sends SIGINT to the program in its
                 foreground (the agent, or the command it runs). The agent
                 decides what that means; attach ends only if it exits.

When the agent has no terminal (started with -d and a prompt, or from a
script), you see its output only: Ctrl-C, like SIGTERM or a hang-up, ends
attach (exit status 0) and the agent runs on; no signal is sent to it.
git sandbox stop BRANCH stops it.

The keys are read by git sandbox, not by the engine, so they are the same on
every engine, Kubernetes included.`
}

// Run attaches to the agent. Termination, hang-up and, without a terminal
// of the agent's, Ctrl-C end the attachment (like logs -f); the agent goes
// on running.
func (c *AttachCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	detached, err := sb.Attach(ctx, app.IO())
	if detached {
		app.UI.Infof("detached from %s; it runs on", termsafe.String(c.Branch))
		app.UI.Hintf("git sandbox attach %s connects again; git sandbox stop %s stops it", termsafe.String(c.Branch), termsafe.String(c.Branch))
	}
	return err
}
