package fleet

// A fleet's budget is shared: what every task's sandbox spent on model
// calls since the fleet started (their usage logs, removed sandboxes
// included) counts against it. Once it is spent, the runner starts no
// queued task (they end as OverBudget, which fleet ps shows); a task it
// starts gets at most what is left as its sandbox's budget, so the
// credential broker stops it there. Tasks running at once each get what
// was left when they started: together they may pass the fleet's budget
// by what they spend in parallel.

import (
	"fmt"
	"strconv"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// FleetBudget is the file's budget in dollars (0: none).
func (f *File) FleetBudget() (float64, error) {
	if f.Budget == "" {
		return 0, nil
	}
	v, err := meter.ParseDollars(f.Budget)
	if err != nil {
		return 0, fmt.Errorf("budget: %v", err)
	}
	return v, nil
}

// spent asks what the fleet spent, -1 when there is no budget or the
// answer failed (the runner then goes on as without a budget, and says
// so).
func (r *Runner) spent() float64 {
	if r.Spent == nil {
		return -1
	}
	st, err := r.Store.Load(r.Name)
	if err != nil || st.Budget <= 0 {
		return -1
	}
	v, err := r.Spent(st)
	if err != nil {
		r.logf("fleet %s: what it spent cannot be read (%v): its budget is not kept", r.Name, err)
		return -1
	}
	return v
}

// stopAtBudget ends the queued tasks once the fleet's budget is spent.
func stopAtBudget(st *State, spent float64) {
	if st.Budget <= 0 || spent < 0 || spent < st.Budget {
		return
	}
	for i := range st.Tasks {
		if t := &st.Tasks[i]; t.Status == Queued {
			t.Status = OverBudget
			t.Error = fmt.Sprintf("not started: the fleet's budget of %s is spent (%s)", meter.Dollars(st.Budget), meter.Dollars(spent))
		}
	}
}

// shareBudget gives each task about to start at most what is left of the
// fleet's budget.
func shareBudget(st *State, spent float64, start []Task) {
	if st.Budget <= 0 || spent < 0 {
		return
	}
	left := st.Budget - spent
	for i := range start {
		own, err := meter.ParseDollars(start[i].Budget)
		if start[i].Budget == "" || err != nil || own > left {
			start[i].Budget = strconv.FormatFloat(left, 'f', 4, 64)
		}
	}
}

// Sources are the usage logs of st's tasks' sandboxes, live or removed,
// and the time from which they count (the fleet's start).
func Sources(l worktree.Layout, st *State) ([]meter.Source, time.Time, error) {
	var branches []string
	for _, t := range st.Tasks {
		branches = append(branches, t.Branch)
	}
	src, err := meter.Sources(l, branches)
	return meter.Only(src, branches), st.Created, err
}

// Spent implements the runner's Spent: the fleet's usage logs added up.
func (s *Sandboxes) Spent(st *State) (float64, error) {
	src, since, err := Sources(s.Env.Layout, st)
	if err != nil {
		return 0, err
	}
	rep, err := meter.Totals(src, since)
	if err != nil {
		return 0, err
	}
	return rep.Total.USD, nil
}

// Usage is what git sandbox usage --fleet reads: the usage logs of the
// named fleet's tasks, their branches, and the time to count from (the
// fleet's start, or since if later).
func (s *Store) Usage(l worktree.Layout, name string, since time.Time) ([]meter.Source, []string, time.Time, error) {
	name, err := s.Resolve(name)
	if err != nil {
		return nil, nil, since, err
	}
	st, err := s.Load(name)
	if err != nil {
		return nil, nil, since, err
	}
	src, from, err := Sources(l, st)
	var branches []string
	for _, t := range st.Tasks {
		branches = append(branches, t.Branch)
	}
	if from.After(since) {
		since = from
	}
	return src, branches, since, err
}
