package main

import (
	"fmt"

	"github.com/git-sandbox/git-sandbox/internal/spend"
)

// BudgetCmd is git sandbox budget.
type BudgetCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	Amount string `arg:"" optional:"" help:"+DOLLARS raises its dollar budget, DOLLARS sets it (0: no dollar bound); none shows it." placeholder:"[+]DOLLARS"`
	Tokens string `help:"+TOKENS raises its token budget, TOKENS sets it (0: no token bound): 2000000, 500k, 2.5M." placeholder:"[+]TOKENS"`
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
	line, err := spend.Budget(net, target, sb.Record, sb.NetLog(), spend.Change{Dollars: c.Amount, Tokens: c.Tokens})
	if err == nil {
		fmt.Fprintln(app.Stdout, line)
	}
	return err
}
