package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// PsCmd is git sandbox ps.
type PsCmd struct {
	JSON     bool `help:"Print a JSON array."`
	Wide     bool `help:"Add the WORKTREE column (--json always has it)."`
	Watch    bool `short:"w" help:"Print the table again whenever a sandbox's container changes state (from Docker's events), until interrupted; with --json, one array per line."`
	AllRepos bool `name:"all-repos" help:"List the sandboxes of every repository on this machine, with a REPO column (--json: repo, repo_path, repo_missing)."`
}

// Help is ps's long help.
func (c *PsCmd) Help() string {
	return `One row per sandbox of this repository: branch, state (running, exited with its
code, stopped, container missing, lost when a Kubernetes engine lost its Pod;
unknown while Docker is unreachable), agent,
base branch, age, files changed since the baseline and how old the snapshot
that count comes from is (SNAP; a running agent is snapshotted every
rescue.interval), denied egress, spend (SPEND, when the credential broker
meters a sandbox: "$1.20/$5.00" of its budget, "unmetered" for the
others), the conflict forecast,
published ports (PORTS, when a sandbox has any: host port -> the agent's),
and with --wide the worktree; without --wide the table fits 100 columns for
everyday names. A
sandbox whose last git sandbox update left files with conflict markers says
how many in its state ("exited (0), 2 conflicted"), and the paths are named
below the table (and in --json as "conflicts").

CONFLICTS forecasts landing from the newest snapshots: "base" when landing
now would conflict with the base branch's tip, else the first other sandbox
it would conflict with if both landed, and how many more ("base+2"; --json:
"forecast" has them all). git sandbox
conflicts lists the paths.

--watch follows Docker's events for this repository's containers and prints
the table again when one changes (an agent starts, exits, is stopped or
removed); on a terminal it redraws in place and also refreshes the ages.
git sandbox dash is the interactive view.

With engines in your config, an ENGINE column says where each sandbox runs;
the engines are asked at once, and the sandboxes of one that does not answer
are listed as unreachable, with its error.

--all-repos lists the sandboxes of every repository that has any on
this machine (the ones git sandbox's state directory holds), from anywhere,
with a REPO column: the repository's directory name, or its path where two
share a name. A repository moved or deleted since its sandboxes started is
shown as "NAME (missing)", its sandboxes listed from their records (their
containers' state still asked of the engines), and named below the table
with where it was.`
}

// Run lists sandboxes.
func (c *PsCmd) Run(app *App) error {
	if c.AllRepos {
		return c.runAll(app)
	}
	// ps always asks the environment's engine: it is reached while git
	// finds the repository.
	early := engines.ConnectEarly(app.Ctx)
	env, err := app.Env()
	if err != nil {
		early.Discard()
		return err
	}
	others := env.Engines
	env.Engines = sandbox.ConnectorFunc(early.Connector(func(ctx context.Context, name string) (sandbox.Engine, error) {
		if others != nil {
			return others.Connect(ctx, name)
		}
		return engines.Connect(ctx, env.Config, name)
	}))
	if c.Watch {
		return c.watch(app, env)
	}
	list, err := env.Statuses(app.Ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		if list == nil {
			list = []sandbox.Status{}
		}
		return enc.Encode(list)
	}
	if len(list) == 0 {
		app.UI.Infof("no sandboxes in this repository")
		app.UI.Hintf("git sandbox start BRANCH -p \"TASK\" creates one")
		return nil
	}
	psTable(app.Stdout, list, nil, showEngine(env, list), c.Wide)
	psNotes(app, list)
	return nil
}

// psNotes are the warnings and hints below ps's table.
func psNotes(app *App, list []sandbox.Status) {
	for _, s := range list {
		if len(s.Conflicts) > 0 {
			app.UI.Warnf("%s: git sandbox update left conflict markers in %s", termsafe.String(s.Branch), termsafe.Join(s.Conflicts, ", "))
			app.UI.Hintf("resolve them in the sandbox (git sandbox exec %s, or a follow-up task); land refuses until then", termsafe.String(s.Branch))
		}
		if s.State == sandbox.StateLost {
			app.UI.Warnf("%s: engine %s lost its container while it ran (its Pod was deleted or evicted, or its node is gone)", termsafe.String(s.Branch), termsafe.String(s.Engine))
			app.UI.Hintf("its last snapshot is on this machine: git sandbox rescue list %s; git sandbox start %s -p \"...\" continues in a new Pod", termsafe.String(s.Branch), termsafe.String(s.Branch))
		}
		if (s.State == sandbox.StateRunning || s.State == sandbox.StatePaused) && filepath.IsAbs(s.Worktree) {
			// (A worktree on an engine is not a path here: no git of this
			// machine runs in it.)
			for _, p := range s.Nested {
				app.UI.Warnf("%s is a nested git repository: while %s runs, git run in it on the host runs configuration the agent wrote", termsafe.String(filepath.Join(s.Worktree, p)), termsafe.String(s.Branch))
			}
		}
		if s.SnapshotBudgetSpent && (s.State == sandbox.StateRunning || s.State == sandbox.StatePaused) {
			app.UI.Warnf("%s: its snapshots wrote %s, all of budget.snapshots: interval snapshots have stopped (the exit snapshot is still taken)", termsafe.String(s.Branch), units.BytesSize(float64(s.SnapshotBytes)))
			app.UI.Hintf("git sandbox rescue snapshot %s takes one now; raise budget.snapshots in your config for more", termsafe.String(s.Branch))
		}
		if s.TooLarge > 0 {
			app.UI.Warnf("%s: %d untracked file(s) larger than rescue.max_file_size are not in its snapshots and would not land", termsafe.String(s.Branch), s.TooLarge)
			app.UI.Hintf("git sandbox rescue show %s lists them", s.Snapshot[:min(12, len(s.Snapshot))])
		}
	}
}

// watch prints the table (or JSON) now and again after every change.
func (c *PsCmd) watch(app *App, env *sandbox.Env) error {
	// Ctrl-C ends the watch, as it ends a pager: exit status 0.
	ctx, cancel := context.WithCancel(app.Ctx)
	defer cancel()
	pop := sigstack.Push(func(os.Signal) { cancel() }, syscall.SIGINT)
	defer pop()
	changes, errc := env.Changes(ctx)
	tty := isTerminal(app.Stdout)
	var tick <-chan time.Time
	if tty && !c.JSON {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		tick = t.C
	}
	last := ""
	show := func() error {
		list, err := env.Statuses(ctx)
		if err != nil {
			return err
		}
		var b strings.Builder
		switch {
		case c.JSON:
			if list == nil {
				list = []sandbox.Status{}
			}
			j, err := termsafe.MarshalJSON(list)
			if err != nil {
				return err
			}
			b.Write(j)
			b.WriteByte('\n')
		case len(list) == 0:
			b.WriteString("no sandboxes in this repository\n")
		default:
			psTable(&b, list, nil, showEngine(env, list), c.Wide)
		}
		if b.String() == last {
			return nil
		}
		last = b.String()
		switch {
		case tty && !c.JSON:
			fmt.Fprint(app.Stdout, "\x1b[H\x1b[2J"+time.Now().Format("15:04:05")+"  git sandbox ps --watch\n\n"+last)
		case c.JSON:
			fmt.Fprint(app.Stdout, last)
		default:
			fmt.Fprint(app.Stdout, "# "+time.Now().UTC().Format(time.RFC3339)+"\n"+last+"\n")
		}
		return nil
	}
	if err := show(); err != nil {
		return err
	}
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				if err := <-errc; err != nil {
					return err
				}
				return nil
			}
		case <-tick:
		case <-ctx.Done():
			return nil
		}
		if err := show(); err != nil {
			return err
		}
	}
}

// psTable writes ps's table; repos, when given, is the REPO column (one
// per row of list).
func psTable(w io.Writer, list []sandbox.Status, repos []psRepo, engines, wide bool) {
	head := []string{"BRANCH", "STATE", "AGENT", "BASE", "AGE", "CHANGES", "SNAP", "DENIED", "SPEND", "CONFLICTS"}
	ports := slices.ContainsFunc(list, func(s sandbox.Status) bool { return len(s.Ports) > 0 })
	if ports {
		head = append(head, "PORTS")
	}
	if wide {
		head = append(head, "WORKTREE")
	}
	if engines {
		head = slices.Insert(head, 2, "ENGINE")
	}
	if repos != nil {
		head = slices.Insert(head, 0, "REPO")
	}
	rows := [][]string{head}
	for i, s := range list {
		state := s.State
		if s.State == sandbox.StateExited && s.ExitCode != nil {
			state = "exited (" + strconv.Itoa(*s.ExitCode) + ")"
		}
		if s.Spend != nil && s.Spend.Over && s.State == sandbox.StateRunning {
			state = "budget"
		}
		if len(s.Conflicts) > 0 {
			state += ", " + strconv.Itoa(len(s.Conflicts)) + " conflicted"
		}
		row := []string{
			termsafe.String(s.Branch), state, s.Agent, termsafe.String(s.Base),
			age(time.Since(s.Created)), strconv.Itoa(s.Changes), snapshotAge(s), denied(s), spendColumn(s.Spend), conflictsColumn(s.Forecast),
		}
		if repos != nil && repos[i].missing {
			// Its snapshots are in the repository that is gone.
			row[5], row[6] = "?", "?"
		}
		if ports {
			row = append(row, portsColumn(s.Ports))
		}
		if wide {
			row = append(row, s.Worktree)
		}
		if engines {
			eng := s.Engine
			if eng == "" {
				eng = "default"
			}
			row = slices.Insert(row, 2, termsafe.String(eng))
		}
		if repos != nil {
			row = slices.Insert(row, 0, repos[i].name)
		}
		rows = append(rows, row)
	}
	if !slices.ContainsFunc(list, func(s sandbox.Status) bool { return s.Spend != nil && s.Spend.Metered }) {
		// No model calls are metered (no secret is brokered): no SPEND.
		i := slices.Index(head, "SPEND")
		for j := range rows {
			rows[j] = slices.Delete(rows[j], i, i+1)
		}
	}
	table(w, rows)
}

// spendColumn is ps's SPEND: what the broker metered, of the budget
// ("$1.20/$5.00"), "unmetered" where it meters nothing (never a zero).
func spendColumn(st *meter.Status) string {
	if st == nil || !st.Metered {
		return "unmetered"
	}
	return strings.Replace(st.Column(), " of ", "/", 1)
}

// conflictsColumn is ps's CONFLICTS: the first of what the sandbox would
// conflict with and how many more ("base+2"); git sandbox conflicts
// names them all.
func conflictsColumn(r *forecast.Result) string {
	names := r.Names()
	if len(names) <= 1 {
		return r.Column()
	}
	return termsafe.String(names[0]) + "+" + strconv.Itoa(len(names)-1)
}

// psRepo is a row's REPO column, and whether the repository is missing.
type psRepo struct {
	name    string
	missing bool
}

// portsColumn is ps's PORTS: each published port as host port -> the
// agent's ("-" for none).
func portsColumn(ports []container.Port) string {
	if len(ports) == 0 {
		return "-"
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(p.HostPort) + "->" + strconv.Itoa(p.Port)
	}
	return strings.Join(out, ",")
}

// showEngine says whether ps shows the ENGINE column: once there is more
// than one engine to tell apart.
func showEngine(env *sandbox.Env, list []sandbox.Status) bool {
	if len(env.Config.Engines) > 0 {
		return true
	}
	for _, s := range list {
		if s.Engine != "" {
			return true
		}
	}
	return false
}

// snapshotAge is how old the snapshot CHANGES counts is, "-" without one.
func snapshotAge(s sandbox.Status) string {
	if s.SnapshotTime.IsZero() {
		return "-"
	}
	return age(time.Since(s.SnapshotTime))
}

// denied is ps's count of egress refusals, "-" without a proxy.
func denied(s sandbox.Status) string {
	if s.Network != "allowlist" {
		return "-"
	}
	return strconv.Itoa(s.Denied)
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
