package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/dash"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// DashCmd is git sandbox dash.
type DashCmd struct{}

// Help is dash's long help.
func (c *DashCmd) Help() string {
	return `A live table of this repository's sandboxes — branch, state, agent, age,
changes and the age of the snapshot they come from, verify's verdict, denied
egress, the conflict forecast — redrawn when a container changes state
(Docker's events) and every few seconds for the ages.

Keys: enter attach, d diff (in the pager), l land (asks first, and lands only
the tree shown), u update, s stop, x rm (asks first), e shell in the sandbox,
r rescue list, c count the changes now (a snapshot), n new sandbox (branch, agent, prompt; detached), ? help,
q quit. Each runs the same git sandbox command you would type.

With network_prompt = true in your config, a connection held for your
answer shows at once above the footer (HELD): o allows it once, a for the
sandbox, A for the repository (your config), D denies it.

Needs a terminal; git sandbox ps --watch is the plain live table. NO_COLOR
turns colours off.`
}

// Run shows the dashboard.
func (c *DashCmd) Run(app *App) error {
	if !isTerminal(app.Stdout) || !isTerminalReader(app.Stdin) {
		return usererr.New("git sandbox dash needs a terminal").
			Hint("git sandbox ps --watch prints a live table to a pipe or file")
	}
	env, err := app.Env()
	if err != nil {
		return err
	}
	readHeld := func(branch string) ([]held.Request, error) {
		return held.Read(filepath.Join(env.Layout.NetLogDir(branch), held.File), time.Now())
	}
	return dash.Run(app.Ctx, dash.Options{Backend: env, Dir: env.Repo.MainWorkTree, NoColor: dash.NoColor(), Held: readHeld})
}

func isTerminalReader(r any) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f)
}
