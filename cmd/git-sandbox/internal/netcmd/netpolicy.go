package netcmd

import (
	"fmt"
	"strings"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// NetAllowCmd is git sandbox net allow.
type NetAllowCmd struct {
	netChange
	Once bool `help:"Let the connections the sandbox holds for these hosts through (network_prompt), and keep nothing: the next try after a few seconds is held again."`
}

// NetDenyCmd is git sandbox net deny.
type NetDenyCmd struct {
	netChange
}

// netChange is what net allow and net deny take.
type netChange struct {
	Args []string `arg:"" name:"BRANCH HOST" help:"The sandbox, then the entries: HOST[:PORT], *.DOMAIN or an IP address (with --repo: the entries only)."`
	Repo bool     `help:"Write the entries to your config for this repository (a [[repository]] table) instead: every new sandbox of it gets them."`
}

// Help is net allow's long help.
func (c *NetAllowCmd) Help() string {
	return `Allows hosts on a running or stopped sandbox's egress proxy. The proxy reads
the change at the agent's next connection: no restart. The entries are kept
with the sandbox (every later start and follow-up has them), logged as policy
changes in git sandbox net's log, and shown by git sandbox net BRANCH --policy
as "live change". A live entry is an --allow entry: the proxy still refuses
IP literals, private and local addresses and the metadata address as it
would, and a deny list (yours, the repository's, or net deny) still wins.

--repo writes the entries to your config for this repository instead: a
[[repository]] table appended to your config file, which sandboxes started
afterwards get. A repository's own .sandbox.toml cannot add entries.

With network_prompt = true in your config, a connection to a host off the
list waits for your answer (git sandbox net pending lists them): net allow
lets it through and keeps the entry, --once lets it through and keeps
nothing, net deny refuses it (and every later try).`
}

// Help is net deny's long help.
func (c *NetDenyCmd) Help() string {
	return `Denies hosts on a running or stopped sandbox's egress proxy, whoever allowed
them (a denial overrides every allow entry): the agent's next connection to
them is refused; tunnels already open stay until they close. Kept with the
sandbox and logged like net allow. net allow of the same entry takes the
denial back. --repo writes a deny entry to your config for this repository.`
}

// Run allows the entries.
func (c *NetAllowCmd) Run(app *cliapp.App) error {
	if c.Once && c.Repo {
		return usererr.New("--once and --repo do not go together").Hint("--once answers a sandbox's held connections; --repo writes your config")
	}
	return c.change(app, false, c.Once)
}

// Run denies the entries.
func (c *NetDenyCmd) Run(app *cliapp.App) error { return c.change(app, true, false) }

func (c *netChange) change(app *cliapp.App, deny, once bool) error {
	verb := "allowed"
	if deny {
		verb = "denied"
	}
	if c.Repo {
		return c.changeRepo(app, deny, verb)
	}
	if len(c.Args) < 2 {
		return usererr.New("name a sandbox and at least one host").
			Hint("git sandbox net %s BRANCH HOST[:PORT]...", strings.TrimSuffix(verb, "ed"))
	}
	_, sb, err := app.Find(c.Args[0])
	if err != nil {
		return err
	}
	net, target := sb.Live()
	var changed []string
	if once {
		verb = "allowed once"
		changed, err = net.AllowOnce(app.Ctx, target, c.Args[1:])
	} else {
		changed, err = net.ChangeEgress(app.Ctx, target, deny, c.Args[1:])
	}
	if err != nil {
		return err
	}
	name := termsafe.String(sb.Branch)
	if len(changed) == 0 {
		app.UI.Infof("%s already has them %s", name, verb)
		return nil
	}
	app.UI.Infof("%s on %s: %s (the agent's next connection)", verb, name, termsafe.String(strings.Join(changed, ", ")))
	return nil
}

// changeRepo writes the entries to the user's config for this repository.
func (c *netChange) changeRepo(app *cliapp.App, deny bool, verb string) error {
	if len(c.Args) == 0 {
		return usererr.New("name at least one host").Hint("git sandbox net %s --repo HOST[:PORT]...", strings.TrimSuffix(verb, "ed"))
	}
	parse := egress.ParseAllowEntry
	if deny {
		parse = egress.ParseEntry
	}
	for _, a := range c.Args {
		if _, err := parse(a, egress.FromUser); err != nil {
			return err
		}
	}
	env, err := app.Env()
	if err != nil {
		return err
	}
	path, err := config.AppendRepoEgress(env.Repo.MainWorkTree, deny, c.Args)
	if err != nil {
		return err
	}
	app.UI.Infof("%s for %s in %s: %s", verb, termsafe.String(env.Repo.MainWorkTree), termsafe.String(path), termsafe.String(strings.Join(c.Args, ", ")))
	app.UI.Hintf("sandboxes started from now get them; git sandbox net %s BRANCH HOST changes a sandbox that exists", strings.TrimSuffix(verb, "ed"))
	return nil
}

// printPolicy prints a sandbox's effective allow list with the sources.
func printPolicy(app *cliapp.App, r *record.Record, asJSON bool) error {
	entries, err := network.EffectivePolicy(r)
	if err != nil {
		return err
	}
	if asJSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	rows := [][]string{{"ENTRY", "RULE", "SOURCE", "NOTE"}}
	for _, e := range entries {
		rule, note := "allow", ""
		if e.Deny {
			rule = "deny"
		}
		if e.RemovedBy != "" {
			note = "removed by " + e.RemovedBy
		}
		rows = append(rows, []string{termsafe.String(e.Entry), rule, termsafe.String(string(e.Source)), termsafe.String(note)})
	}
	cliapp.Table(app.Stdout, rows)
	return nil
}

// NetSuggestCmd is git sandbox net suggest.
type NetSuggestCmd struct {
	Branches []string `arg:"" name:"BRANCH" help:"The sandboxes whose logs are read."`
}

// Help is net suggest's long help.
func (c *NetSuggestCmd) Help() string {
	return `Prints the smallest allow list the given sandboxes' decision logs needed:
every host they were allowed or denied, with the port when it is not 443 or
80, and three or more names below one registrable domain (api.example.com,
cdn.example.com, www.example.com) folded into one wildcard (*.example.com).
Hosts seen once are marked with a comment: they may have been tried and not
needed. The output is TOML: an allow = [...] for your config, or for a
fleet's tasks file. Read it before you use it: the hosts come from the
agents.`
}

// Run prints the suggestion.
func (c *NetSuggestCmd) Run(app *cliapp.App) error {
	var sums []netlog.Summary
	var names []string
	for _, b := range c.Branches {
		_, sb, err := app.Find(b)
		if err != nil {
			return err
		}
		if sb.Egress == nil {
			return usererr.New("sandbox %s has no egress proxy, so no decision log", sb.Display()).
				Hint("net suggest reads the logs of allowlist-mode sandboxes")
		}
		s, err := netlog.SummarizeFile(sb.NetLog())
		if err != nil {
			return err
		}
		sums = append(sums, s)
		names = append(names, sb.Display())
	}
	_, err := fmt.Fprint(app.Stdout, netlog.SuggestTOML(netlog.Suggest(sums...), strings.Join(names, ", ")))
	return err
}
