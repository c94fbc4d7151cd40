// Package spend answers git sandbox usage and budget: which usage logs a
// question covers (live sandboxes, removed ones, a fleet's), their totals,
// and a sandbox's budget changed and shown. The figures and their
// formatting are internal/meter's; changing a running proxy's budget is
// internal/network's.
package spend

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/fleet"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
)

// UsageHelp and BudgetHelp are the commands' long help.
const (
	UsageHelp = `What the sandboxes' agents spent on model calls, as the credential broker
metered them (the model APIs' own figures, not what the agents say), totalled
by sandbox, model and day, removed sandboxes included. Prices are the built-in
table and your [[price]] tables; a model without a price is counted in tokens.
A sandbox whose agent holds its own key (no [[secret]] for it) is not metered,
nor is one in copy mode (a remote engine, Kubernetes), which takes no [[secret]].`
	BudgetHelp = `Show or change what a sandbox may spend on model calls, in dollars, in tokens
(input, output and cache reads and writes together), or both. The credential broker meters them;
once either budget is spent it answers the agent's model requests with the
API's own 429 error. A change reaches a running sandbox at its next model call,
without a restart.

  git sandbox budget B                 what B spent of its budget
  git sandbox budget B +2.00           raise its dollar budget by $2
  git sandbox budget B 10.00           set it to $10 (0: no dollar bound)
  git sandbox budget B --tokens +500k  raise its token budget by 500,000
  git sandbox budget B --tokens 2M     set it to 2,000,000 (0: no bound)

Tokens are a whole number or one with k (thousand) or M (million). Only a
sandbox whose model key is a [[secret]] of your config, on a local engine, is
metered: copy mode (a remote engine, Kubernetes) takes no [[secret]].`
)

// Query is what git sandbox usage asks.
type Query struct {
	Branches []string
	Fleet    string
	Since    string // a duration: 24h, 7d
}

// Result is the totals and the sandboxes they cannot cover.
type Result struct {
	Report *meter.Report
	// Unmetered are the live sandboxes the broker does not meter: the
	// agent holds its own key, or copy mode (UnmeteredCopy of them).
	Unmetered     []string
	UnmeteredCopy []string
}

// Collect totals the usage logs q covers.
func Collect(env *sandbox.Env, store *fleet.Store, q Query) (*Result, error) {
	since, err := meter.ParseSince(q.Since, time.Now())
	if err != nil {
		return nil, usererr.New("%v", err)
	}
	all, _ := env.All()
	var live, unmetered, copies []string
	for _, sb := range all {
		live = append(live, sb.Branch)
		switch {
		case network.Metered(sb.Record):
		case workspace.OnEngine(sb.Record):
			copies = append(copies, sb.Branch)
		default:
			unmetered = append(unmetered, sb.Branch)
		}
	}
	sources, err := meter.Sources(env.Layout, live)
	if err != nil {
		return nil, err
	}
	if len(q.Branches) > 0 {
		sources = meter.Only(sources, q.Branches)
		unmetered, copies = only(unmetered, q.Branches), only(copies, q.Branches)
	}
	if q.Fleet != "" {
		var branches []string
		if sources, branches, since, err = store.Usage(env.Layout, q.Fleet, since); err != nil {
			return nil, err
		}
		unmetered, copies = only(unmetered, branches), only(copies, branches)
	}
	rep, err := meter.Totals(sources, since)
	if err != nil {
		return nil, err
	}
	return &Result{Report: rep, Unmetered: unmetered, UnmeteredCopy: copies}, nil
}

func only(list, keep []string) []string {
	return slices.DeleteFunc(list, func(b string) bool { return !slices.Contains(keep, b) })
}

// Notes are what the totals leave out, to print after them.
func (r *Result) Notes() []string {
	var out []string
	if un := r.Report.Unpriced(); len(un) > 0 {
		out = append(out, fmt.Sprintf("no price for %s: counted in tokens only (a [[price]] table in your config prices a model: model = \"NAME*\" input = 3.0 output = 15.0, dollars per million tokens)", strings.Join(un, ", ")))
	}
	if n := r.Report.Total.Unknown; n > 0 {
		out = append(out, fmt.Sprintf("%d request(s) ended without their usage (cut short, an error, or an answer the meter does not know): counted as far as they were read", n))
	}
	if len(r.Unmetered) > 0 {
		out = append(out, "not metered (the agent holds its own model key): "+termsafe.String(strings.Join(r.Unmetered, ", ")))
	}
	if len(r.UnmeteredCopy) > 0 {
		out = append(out, "not metered (copy mode: its engine takes no [[secret]], so no credential broker sees its model calls): "+termsafe.String(strings.Join(r.UnmeteredCopy, ", ")))
	}
	return out
}

// Change is a budget change: dollars and tokens, each "+X" (raise that
// bound by X), "X" (set it; 0 takes it away) or "" (leave it).
type Change struct {
	Dollars, Tokens string
}

// Budget changes a sandbox's budget when c says so and says what it has
// spent of it.
func Budget(net *network.Env, t network.LiveTarget, r *record.Record, netLog string, c Change) (string, error) {
	name := termsafe.String(r.Branch)
	if c != (Change{}) {
		if _, err := net.ChangeBudget(t, c.Dollars, c.Tokens); err != nil {
			return "", err
		}
		if err := t.Update(func(fresh *record.Record) error { *r = *fresh; return nil }); err != nil {
			return "", err
		}
	}
	st := network.SpendOf(r, netLog)
	switch {
	case !st.Metered:
		return name + ": unmetered (" + network.WhyUnmetered(r) + ")", nil
	case st.Over:
		return name + ": spent " + st.Column() + ": the broker refuses its model calls (git sandbox budget " + name + " +2.00 raises it by $2; --tokens +500k by 500k tokens)", nil
	}
	return name + ": spent " + st.Column(), nil
}
