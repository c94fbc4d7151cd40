package netcmd

import (
	"fmt"
	"strconv"
	"time"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// NetPendingCmd is git sandbox net pending.
type NetPendingCmd struct {
	Branch string `arg:"" optional:"" help:"The sandbox (default: every sandbox of this repository)."`
}

// Help is net pending's long help.
func (c *NetPendingCmd) Help() string {
	return `Lists the connections sandboxes' proxies hold for your answer: with
network_prompt = true in your config, a connection to a host off the allow
list waits (network_prompt_timeout, 30s by default) instead of being refused.
Several connections to one host are one line. Answer with

  git sandbox net allow --once BRANCH HOST   let them through, keep nothing
  git sandbox net allow BRANCH HOST          and allow it for the sandbox
  git sandbox net allow --repo HOST          for every new sandbox of this
                                             repository (then net allow for
                                             this one)
  git sandbox net deny BRANCH HOST           refuse them, and later tries

or in git sandbox dash. Unanswered, they are refused when their time runs
out. Host names come from the agent and are shown escaped.`
}

// Run lists the held connections.
func (c *NetPendingCmd) Run(app *cliapp.App) error {
	var sbs []*sandbox.Sandbox
	if c.Branch != "" {
		_, sb, err := app.Find(c.Branch)
		if err != nil {
			return err
		}
		sbs = append(sbs, sb)
	} else {
		env, err := app.Env()
		if err != nil {
			return err
		}
		all, errs := env.All()
		for _, err := range errs {
			app.UI.Warnf("%v", err)
		}
		sbs = all
	}
	rows := [][]string{{"BRANCH", "ENTRY", "KIND", "WAITING", "LEFT"}}
	for _, sb := range sbs {
		if sb.Egress == nil {
			continue
		}
		net, _ := sb.Live()
		qs, err := net.Held(sb.Branch)
		if err != nil {
			return err
		}
		for _, q := range qs {
			rows = append(rows, []string{termsafe.String(sb.Branch), termsafe.String(q.Entry), termsafe.String(q.Kind),
				strconv.Itoa(q.Count), fmt.Sprintf("%ds", int(time.Until(q.Until).Seconds()))})
		}
	}
	if len(rows) == 1 {
		app.UI.Infof("no connection waits for an answer")
		return nil
	}
	cliapp.Table(app.Stdout, rows)
	app.UI.Hintf("git sandbox net allow [--once] BRANCH ENTRY lets one through; git sandbox net deny BRANCH ENTRY refuses it")
	return nil
}
