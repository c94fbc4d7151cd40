package main

import (
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// LogsCmd is git sandbox logs.
type LogsCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	Follow bool   `short:"f" help:"Keep printing output as it comes, until the agent exits."`
	Tail   string `help:"Only the last N lines." default:"all" placeholder:"N"`
	Raw    bool   `help:"Print control sequences as the agent wrote them instead of escaped."`
}

// Help is logs's long help.
func (c *LogsCmd) Help() string {
	return `Prints what the agent wrote. Control sequences in it are shown escaped (the
agent chose them, and they could rewrite your terminal or set its clipboard);
--raw passes them through, for example to replay an interactive session.`
}

// Run prints the logs.
func (c *LogsCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	stdout, stderr := app.Stdout, app.Stderr
	if !c.Raw {
		o, e := termsafe.NewWriter(stdout), termsafe.NewWriter(stderr)
		defer o.Flush()
		defer e.Flush()
		stdout, stderr = o, e
	}
	return sb.Logs(app.Ctx, c.Follow, c.Tail, stdout, stderr)
}
