package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

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
base branch, age, files changed since the baseline, and worktree. With engines
in your config, an ENGINE column says where each sandbox runs; the engines are
asked at once, and the sandboxes of one that does not answer are listed as
unreachable, with its error.`
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
	// The ENGINE column once there is more than one engine to tell apart.
	engines := len(env.Config.Engines) > 0
	for _, s := range list {
		engines = engines || s.Engine != ""
	}
	head := []string{"BRANCH", "STATE", "AGENT", "BASE", "AGE", "CHANGES", "DENIED", "WORKTREE"}
	if engines {
		head = slices.Insert(head, 2, "ENGINE")
	}
	rows := [][]string{head}
	for _, s := range list {
		state := s.State
		if s.State == sandbox.StateExited && s.ExitCode != nil {
			state = "exited (" + strconv.Itoa(*s.ExitCode) + ")"
		}
		row := []string{
			termsafe.String(s.Branch), state, s.Agent, termsafe.String(s.Base),
			age(time.Since(s.Created)), strconv.Itoa(s.Changes), denied(s), s.Worktree,
		}
		if engines {
			eng := s.Engine
			if eng == "" {
				eng = "default"
			}
			row = slices.Insert(row, 2, termsafe.String(eng))
		}
		rows = append(rows, row)
	}
	table(app.Stdout, rows)
	for _, s := range list {
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
