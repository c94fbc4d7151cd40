package fleet

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// Engine is what the runner asks of the container engine: which agent
// containers exist and in what state, and a wake-up when one changes.
type Engine interface {
	List(ctx context.Context, labels ...string) ([]container.State, error)
	Events(ctx context.Context, labels ...string) (<-chan container.Event, <-chan error)
}

// Runner starts a fleet's queued tasks, at most MaxParallel running at
// once, as running ones exit. It runs until no task is queued or running,
// or the fleet is stopped.
type Runner struct {
	Store  *Store
	Name   string
	Engine Engine
	// RepoID selects the repository's containers (container.LabelRepo).
	RepoID string
	// Start starts the task's sandbox detached; it returns once the
	// agent's container runs.
	Start func(ctx context.Context, t Task) error
	// Spent is what the fleet's sandboxes spent on model calls so far
	// (dollars); nil when no budget is kept.
	Spent func(st *State) (float64, error)
	// Poll is how often the runner looks without an event (a missed
	// event, an engine without events): 2 s when 0.
	Poll time.Duration
	// Logf reports what the runner did.
	Logf func(format string, args ...any)
}

func (r *Runner) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

// agents lists the repository's agent containers by branch.
func (r *Runner) agents(ctx context.Context) (map[string]container.State, error) {
	list, err := r.Engine.List(ctx, container.LabelRepo+"="+r.RepoID, container.LabelRole+"="+container.RoleAgent)
	if err != nil {
		return nil, err
	}
	out := map[string]container.State{}
	for _, c := range list {
		out[c.Labels[container.LabelBranch]] = c
	}
	return out, nil
}

// Step brings the state up to date with the engine (running tasks whose
// agent exited become exited) and picks the queued tasks to start now,
// marking them starting. It reports whether the fleet is done.
func (r *Runner) Step(ctx context.Context) (start []Task, done bool, err error) {
	agents, err := r.agents(ctx)
	if err != nil {
		return nil, false, err
	}
	spent := r.spent()
	_, err = r.Store.Update(r.Name, func(st *State) error {
		stopAtBudget(st, spent)
		start, done = plan(st, agents, time.Now())
		shareBudget(st, spent, start)
		return nil
	})
	return start, done, err
}

// plan is Step's pure part.
func plan(st *State, agents map[string]container.State, now time.Time) (start []Task, done bool) {
	active := 0
	for i := range st.Tasks {
		t := &st.Tasks[i]
		if t.Status == Running {
			c, ok := agents[t.Branch]
			switch {
			case !ok:
				// Removed (rm, land) while the runner looked away.
				t.Status, t.Ended = Exited, now
			case !c.Running && c.Status != "paused" && c.Status != "created":
				t.Status, t.Ended = Exited, now
				if c.ListExitCode != nil {
					code := *c.ListExitCode
					t.ExitCode = &code
				}
			}
		}
		if st.Stopping && t.Status == Queued {
			t.Status = Cancelled
		}
		if t.Status == Running || t.Status == Starting {
			active++
		}
	}
	for i := range st.Tasks {
		t := &st.Tasks[i]
		if active >= st.MaxParallel {
			break
		}
		if t.Status == Queued {
			t.Status, t.Started = Starting, now
			start = append(start, t.Task)
			active++
		}
	}
	return start, active == 0
}

// finish records how a start ended.
func (r *Runner) finish(t Task, startErr error) error {
	_, err := r.Store.Update(r.Name, func(st *State) error {
		for i := range st.Tasks {
			x := &st.Tasks[i]
			if x.Branch != t.Branch || x.Status != Starting {
				continue
			}
			if startErr != nil {
				x.Status, x.Error, x.Ended = Failed, startErr.Error(), time.Now()
			} else {
				x.Status = Running
			}
		}
		return nil
	})
	return err
}

// Run runs the fleet to its end. Tasks start one at a time, in file
// order: starts build images and take locks, and a fleet is not a race.
func (r *Runner) Run(ctx context.Context) error {
	poll := r.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	if _, err := r.Store.Update(r.Name, func(st *State) error {
		st.RunnerPID = os.Getpid()
		return nil
	}); err != nil {
		return err
	}
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, errs := r.Engine.Events(ectx, container.LabelRepo+"="+r.RepoID)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		start, done, err := r.Step(ctx)
		if err != nil {
			return err
		}
		if done {
			r.logf("fleet %s: every task has ended", r.Name)
			return nil
		}
		for _, t := range start {
			r.logf("fleet %s: starting %s", r.Name, t.Branch)
			serr := r.Start(ctx, t)
			if serr != nil {
				r.logf("fleet %s: %s did not start: %v", r.Name, t.Branch, serr)
			}
			if err := r.finish(t, serr); err != nil {
				return err
			}
		}
		if len(start) > 0 {
			continue // look again at once: a quick agent may have exited
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case err, ok := <-errs:
			if ok && err != nil {
				r.logf("fleet %s: engine events broke (%v); polling every %s", r.Name, err, poll)
			}
			errs, events = nil, nil
		}
	}
}

// DefaultParallel is max_parallel when a file does not set it: as many
// tasks as the free memory holds at their memory limit (perTask bytes;
// 0 is no limit, then one per CPU), at least 1 and at most 2 per CPU.
func DefaultParallel(memAvailable, perTask int64, cpus int) int {
	if cpus <= 0 {
		cpus = runtime.NumCPU()
	}
	n := cpus
	if perTask > 0 && memAvailable > 0 {
		n = int(memAvailable / perTask)
	}
	return max(1, min(n, 2*cpus))
}

// Describe says how max_parallel was chosen, for fleet start's message.
func Describe(n int, fromFile bool) string {
	if fromFile {
		return fmt.Sprintf("max_parallel %d (from the file)", n)
	}
	return fmt.Sprintf("max_parallel %d (from free memory and the memory limit)", n)
}
