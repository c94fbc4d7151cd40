package main

import (
	"fmt"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/fleetcmd"
	"github.com/git-sandbox/git-sandbox/internal/spend"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// UsageCmd is git sandbox usage.
type UsageCmd struct {
	Branches []string `arg:"" optional:"" name:"branch" help:"Only these sandboxes (removed ones included)."`
	Fleet    string   `help:"Only the sandboxes of this fleet, since it started." placeholder:"NAME"`
	Since    string   `help:"Only what was spent in this last while: 24h, 7d." placeholder:"DURATION"`
	JSON     bool     `help:"Print the totals as JSON."`
}

// Help is usage's long help.
func (c *UsageCmd) Help() string { return spend.UsageHelp }

// Run prints the totals by sandbox, model and day.
func (c *UsageCmd) Run(app *App) error {
	fl, env, err := fleetcmd.Fleets(app)
	if err != nil {
		return err
	}
	res, err := spend.Collect(env, fl.Store, spend.Query{Branches: c.Branches, Fleet: c.Fleet, Since: c.Since})
	if err != nil {
		return err
	}
	if c.JSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res.Report)
	}
	if res.Report.Total.Requests == 0 {
		app.UI.Infof("no model calls metered")
	} else {
		for _, t := range res.Report.Tables() {
			table(app.Stdout, t)
			fmt.Fprintln(app.Stdout)
		}
	}
	for _, n := range res.Notes() {
		app.UI.Warnf("%s", n)
	}
	return nil
}
