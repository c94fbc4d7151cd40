package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// PsCmd is git sandbox ps.
type PsCmd struct {
	JSON bool `help:"Print a JSON array."`
}

// Help is ps's long help.
func (c *PsCmd) Help() string {
	return `One row per sandbox of this repository: branch, state (running, exited with its
code, stopped, container missing; unknown while Docker is unreachable), agent,
base branch, age, files changed since the baseline, and worktree. A sandbox
whose last git sandbox update left files with conflict markers says how many in
its state ("exited (0), 2 conflicted"), and the paths are named below the table
(and in --json as "conflicts").`
}

// Run lists sandboxes.
func (c *PsCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	list, err := env.Statuses(app.Ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(app.Stdout)
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
	rows := [][]string{{"BRANCH", "STATE", "AGENT", "BASE", "AGE", "CHANGES", "DENIED", "WORKTREE"}}
	for _, s := range list {
		state := s.State
		if s.State == sandbox.StateExited && s.ExitCode != nil {
			state = "exited (" + strconv.Itoa(*s.ExitCode) + ")"
		}
		if len(s.Conflicts) > 0 {
			state += ", " + strconv.Itoa(len(s.Conflicts)) + " conflicted"
		}
		rows = append(rows, []string{
			termsafe.String(s.Branch), state, s.Agent, termsafe.String(s.Base),
			age(time.Since(s.Created)), strconv.Itoa(s.Changes), denied(s), s.Worktree,
		})
	}
	table(app.Stdout, rows)
	for _, s := range list {
		if len(s.Conflicts) > 0 {
			app.UI.Warnf("%s: git sandbox update left conflict markers in %s", termsafe.String(s.Branch), strings.Join(escaped(s.Conflicts), ", "))
			app.UI.Hintf("resolve them in the sandbox (git sandbox exec %s, or a follow-up task); land refuses until then", termsafe.String(s.Branch))
		}
		if s.State == sandbox.StateRunning || s.State == sandbox.StatePaused {
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
	return nil
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

// escaped escapes paths for a message.
func escaped(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = termsafe.String(p)
	}
	return out
}
