package main

import (
	"os"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// VerifyCmd is git sandbox verify.
type VerifyCmd struct {
	Branch string `arg:"" help:"The sandbox."`
}

// Help is verify's long help.
func (c *VerifyCmd) Help() string {
	return `Runs the sandbox's verify command in a fresh container on a snapshot of its
worktree taken now, and records the verdict with the snapshot's tree, outside
the agent's reach. land uses the verdict: it refuses a failed one, and one
recorded for other work. Exits with the verify command's status.`
}

// Run verifies.
func (c *VerifyCmd) Run(app *App) error {
	// Ctrl-C must still remove the verify container and its files.
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	v, snap, err := sb.VerifyNow(ctx, app.IO())
	if err != nil {
		return err
	}
	if v.OK {
		app.UI.Infof("verify passed on %s (tree %s)", sb.Display(), snap.Tree[:12])
		return nil
	}
	app.UI.Infof("verify FAILED on %s (tree %s): exit code %d", sb.Display(), snap.Tree[:12], v.ExitCode)
	return usererr.ExitStatus(v.ExitCode)
}
