package main

import (
	"github.com/git-sandbox/git-sandbox/internal/doctor"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// DoctorCmd is git sandbox doctor.
type DoctorCmd struct{}

// Help is doctor's long help.
func (c *DoctorCmd) Help() string {
	return `Checks everything git sandbox needs and says how to fix what is missing: git
2.38 or newer, this repository, the Docker daemon and its API version, the
image and which agent CLIs it has, the egress proxy (this binary is static,
its image), the configuration, the state directory, every engine of your config (asked at once: it answers, its mode, whether it
has the image), that git sandbox mcp starts here and answers a client's
initialize, and each agent's login. It also repairs what git sandbox processes
killed midway left in this repository — a start's half-made sandbox is removed,
a land's half-done move of a branch is put back or finished — and prints a
"fixed" line for each.`
}

// Run runs the checks (internal/doctor) and prints their lines.
func (c *DoctorCmd) Run(app *App) error {
	env, err := app.Env()
	d := &doctor.Doctor{Ctx: app.Ctx, Out: app.Stdout, ProxyBinary: selfProxyBinary}
	if failed := d.Run(env, err); failed > 0 {
		return usererr.New("%d check(s) failed", failed).Hint("fix the FAIL lines above")
	}
	return nil
}
