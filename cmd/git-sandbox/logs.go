package main

import (
	"io"

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
		stdout, stderr = escapingWriter{stdout}, escapingWriter{stderr}
	}
	return sb.Logs(app.Ctx, c.Follow, c.Tail, stdout, stderr)
}

// escapingWriter escapes control sequences, keeping newlines and tabs.
type escapingWriter struct{ w io.Writer }

func (e escapingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, termsafe.Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
