package main

import (
	"fmt"

	"github.com/git-sandbox/git-sandbox/internal/spend"
)

// BudgetCmd is git sandbox budget.
type BudgetCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	Amount string `arg:"" optional:"" help:"+DOLLARS raises its budget, DOLLARS sets it; none shows it." placeholder:"[+]DOLLARS"`
}

// Help is budget's long help.
func (c *BudgetCmd) Help() string { return spend.BudgetHelp }

// Run shows, or changes then shows, the budget.
func (c *BudgetCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	net, target := sb.Live()
	line, err := spend.Budget(app.Ctx, net, target, sb.Record, sb.NetLog(), c.Amount)
	if err == nil {
		fmt.Fprintln(app.Stdout, line)
	}
	return err
}
