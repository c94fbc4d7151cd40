package main

import (
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// ConflictsCmd is git sandbox conflicts.
type ConflictsCmd struct {
	JSON bool `help:"Print a JSON array, one object per sandbox."`
}

// Help is conflicts's long help.
func (c *ConflictsCmd) Help() string {
	return `The conflict forecast with its paths: for every sandbox of this repository,
the paths where landing its newest snapshot now would conflict with the base
branch's tip, and, for every pair of sandboxes on the same base, the paths
where they would conflict if both landed. Each prediction is the 3-way merge
land would make (git merge-tree, the baseline as merge base); results are
cached by the trees merged, so asking again is fast.

A running agent's newest snapshot is up to rescue.interval old (ps shows its
age); git sandbox rescue snapshot BRANCH takes a fresh one.`
}

// Run prints the forecast.
func (c *ConflictsCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	list, err := env.Statuses(app.Ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sandbox.ForecastRows(list))
	}
	rows := [][]string{{"BRANCH", "CONFLICTS WITH", "PATHS"}}
	unknown := 0
	for _, s := range list {
		r := s.Forecast
		if r == nil {
			unknown++
			continue
		}
		if len(r.Base) > 0 {
			rows = append(rows, []string{termsafe.String(s.Branch), forecast.BaseName + " (" + termsafe.String(s.Base) + ")", paths(r.Base)})
		}
		for _, other := range r.Names() {
			// Each pair once, under the first of the two.
			if p, ok := r.With[other]; ok && s.Branch < other {
				rows = append(rows, []string{termsafe.String(s.Branch), termsafe.String(other), paths(p)})
			}
		}
	}
	if len(rows) > 1 {
		table(app.Stdout, rows)
	} else if unknown < len(list) {
		app.UI.Infof("no conflicts forecast among %d sandbox(es)", len(list)-unknown)
	}
	if unknown > 0 {
		app.UI.Warnf("%d sandbox(es) without a forecast (no snapshot, or the base branch is gone)", unknown)
	}
	if len(list) == 0 {
		app.UI.Infof("no sandboxes in this repository")
	}
	return nil
}

func paths(ps []string) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = termsafe.String(p)
	}
	return strings.Join(out, ", ")
}
