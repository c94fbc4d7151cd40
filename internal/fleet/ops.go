package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Removed is the status of a started task whose sandbox is gone (landed,
// or removed).
const Removed = "removed"

// Row is one task as fleet ps shows it: the fleet's status, made precise
// by its sandbox's state where it has one.
type Row struct {
	Fleet    string `json:"fleet"`
	Branch   string `json:"branch"`
	Agent    string `json:"agent,omitempty"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Changes  int    `json:"changes"`
	Error    string `json:"error,omitempty"`
}

// Active reports whether the row's task has not ended.
func (r Row) Active() bool {
	return r.Status == Queued || r.Status == Starting || r.Status == sandbox.StateRunning ||
		r.Status == sandbox.StatePaused || r.Status == sandbox.StateCreated
}

// Report is a fleet's rows with its state.
type Report struct {
	State       *State `json:"-"`
	Name        string `json:"name"`
	MaxParallel int    `json:"max_parallel"`
	Runner      bool   `json:"runner"`
	Stopping    bool   `json:"stopping,omitempty"`
	Tasks       []Row  `json:"tasks"`
}

// Fleets works on a repository's fleets and their sandboxes.
type Fleets struct {
	Store *Store
	SB    *Sandboxes
}

// Report reads a fleet's state and its sandboxes' states.
func (f *Fleets) Report(ctx context.Context, name string) (*Report, error) {
	st, err := f.Store.Load(name)
	if err != nil {
		return nil, err
	}
	statuses, err := f.SB.Env.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	byBranch := map[string]sandbox.Status{}
	for _, s := range statuses {
		byBranch[s.Branch] = s
	}
	rep := &Report{State: st, Name: name, MaxParallel: st.MaxParallel, Runner: f.Store.RunnerAlive(name), Stopping: st.Stopping}
	for _, t := range st.Tasks {
		r := Row{Fleet: name, Branch: t.Branch, Agent: t.Agent, Status: t.Status, ExitCode: t.ExitCode, Error: t.Error}
		if t.Status == Running || t.Status == Exited || t.Status == Starting {
			if s, ok := byBranch[t.Branch]; ok {
				r.Status, r.Changes = s.State, s.Changes
				if s.ExitCode != nil {
					r.ExitCode = s.ExitCode
				}
				if s.State == sandbox.StateMissing && t.Status == Starting {
					r.Status = Starting
				}
			} else if t.Status != Starting {
				r.Status = Removed
			}
		}
		rep.Tasks = append(rep.Tasks, r)
	}
	return rep, nil
}

// Wait waits until no task of the fleet is queued or running. A runner
// that died with tasks still queued is an error (its log says why).
func (f *Fleets) Wait(ctx context.Context, name string, timeout time.Duration) (*Report, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		rep, err := f.Report(ctx, name)
		if err != nil {
			return nil, err
		}
		queued := false
		active := false
		for _, r := range rep.Tasks {
			active = active || r.Active()
			queued = queued || r.Status == Queued || r.Status == Starting
		}
		if !active && !rep.Runner {
			return rep, nil
		}
		if queued && !rep.Runner {
			// The runner may have ended between the two reads.
			if again, err := f.Store.Load(name); err == nil && stillQueued(again) && !f.Store.RunnerAlive(name) {
				return rep, usererr.New("the runner of fleet %s ended with tasks still queued", name).
					Hint("its log is %s; git sandbox fleet resume %s starts a new one", f.Store.Log(name), name)
			}
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return rep, usererr.New("fleet %s is still running after %s", name, timeout).
				Hint("wait again, or stop it with git sandbox fleet stop").
				WithCode(usererr.ExitTimeout)
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func stillQueued(st *State) bool {
	for _, t := range st.Tasks {
		if t.Status == Queued || t.Status == Starting {
			return true
		}
	}
	return false
}

// Stop cancels the fleet's queued tasks and stops its running agents
// (their work is kept, as git sandbox stop keeps it). It returns the
// branches it stopped.
func (f *Fleets) Stop(ctx context.Context, name string, timeout time.Duration) ([]string, error) {
	if _, err := f.Store.Update(name, func(st *State) error {
		st.Stopping = true
		for i := range st.Tasks {
			if st.Tasks[i].Status == Queued {
				st.Tasks[i].Status = Cancelled
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// A start in flight finishes first: its agent is then stopped too.
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); {
		st, err := f.Store.Load(name)
		if err != nil {
			return nil, err
		}
		if !stillQueued(st) || !f.Store.RunnerAlive(name) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, err := f.Store.Load(name)
	if err != nil {
		return nil, err
	}
	var stopped []string
	var errs []error
	for _, t := range st.Tasks {
		if t.Status != Running && t.Status != Starting {
			continue
		}
		sb, err := f.SB.Env.Find(t.Branch)
		if err != nil {
			continue // landed or removed
		}
		running, err := sb.Running(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !running {
			continue
		}
		if _, err := sb.Stop(ctx, timeout); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", termsafe.String(t.Branch), err))
			continue
		}
		stopped = append(stopped, t.Branch)
	}
	return stopped, errors.Join(errs...)
}

// Remove removes the fleet's sandboxes (as git sandbox rm does: a final
// snapshot first, refusing running ones and unlanded work unless force)
// and then the fleet. Nothing of the fleet goes while one of its
// sandboxes could not be removed.
func (f *Fleets) Remove(ctx context.Context, name string, force bool) ([]string, error) {
	if f.Store.RunnerAlive(name) {
		if !force {
			return nil, usererr.New("fleet %s still has tasks queued or running", name).
				Hint("stop it first (git sandbox fleet stop %s), or remove it anyway with -f", name).
				WithCode(usererr.ExitRefused)
		}
		if _, err := f.Stop(ctx, name, 10*time.Second); err != nil {
			return nil, err
		}
	}
	st, err := f.Store.Load(name)
	if err != nil {
		return nil, err
	}
	var removed, refused []string
	var errs []error
	for _, t := range st.Tasks {
		sb, err := f.SB.Env.Find(t.Branch)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := sb.Remove(ctx, sandbox.RemoveOptions{Force: force}); err != nil {
			if usererr.Code(err) == usererr.ExitRefused {
				refused = append(refused, termsafe.String(t.Branch))
				continue
			}
			errs = append(errs, fmt.Errorf("rm %s: %w", termsafe.String(t.Branch), err))
			continue
		}
		removed = append(removed, t.Branch)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, err
	}
	if len(refused) > 0 {
		return removed, usererr.New("fleet %s: %s running or hold work that was not landed; the fleet is kept", name, strings.Join(refused, ", ")).
			Hint("land them (git sandbox fleet land), or remove them anyway with git sandbox fleet rm -f (their snapshots stay)").
			WithCode(usererr.ExitRefused)
	}
	return removed, f.Store.Remove(name)
}

// LandOrder is the order fleet land lands in without branches: the
// fleet's tasks in file order whose sandbox still exists.
func (f *Fleets) LandOrder(name string) ([]string, error) {
	st, err := f.Store.Load(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range st.Tasks {
		if f.SB.SandboxExists(t.Branch) {
			out = append(out, t.Branch)
		}
	}
	if len(out) == 0 {
		return nil, usererr.New("fleet %s has no sandboxes left to land", name).
			Hint("git sandbox fleet ps %s shows its tasks", name)
	}
	return out, nil
}

// Resume prepares a fleet whose runner ended with tasks left (killed, or
// the machine restarted, or fleet stop cancelled them) for a new runner:
// a cancelled task is queued again, a task the dead runner was starting
// is queued again, or counted as running when its sandbox was made. The
// caller spawns the runner.
func (f *Fleets) Resume(name string) error {
	if f.Store.RunnerAlive(name) {
		return usererr.New("the runner of fleet %s is running", name).
			Hint("git sandbox fleet ps %s shows its tasks", name)
	}
	_, err := f.Store.Update(name, func(st *State) error {
		// What fleet stop cancelled is queued again: resume undoes it.
		cancelled := false
		for i := range st.Tasks {
			if st.Tasks[i].Status == Cancelled {
				st.Tasks[i].Status, cancelled = Queued, true
			}
		}
		if !stillQueued(st) {
			return usererr.New("fleet %s has no queued or cancelled tasks: there is nothing to resume", name).
				Hint("git sandbox fleet ps %s shows its tasks", name)
		}
		if cancelled {
			st.Stopping = false
		}
		st.RunnerPID = 0
		for i := range st.Tasks {
			t := &st.Tasks[i]
			if t.Status != Starting {
				continue
			}
			if f.SB.SandboxExists(t.Branch) {
				t.Status = Running
			} else {
				t.Status = Queued
			}
		}
		return nil
	})
	return err
}

// Start makes a fleet of checked tasks (Load or CheckTasks) and starts its
// runner: each task's base and agent are resolved now (Resolve), the
// fleet is recorded under name with every task queued, and the runner is
// spawned. path is the tasks file's absolute path ("" for tasks given as
// data). A fleet whose runner could not start is removed again.
func (f *Fleets) Start(ctx context.Context, name, path string, file *File) (*State, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := f.SB.Resolve(ctx, path, file); err != nil {
		return nil, err
	}
	n := file.MaxParallel
	if n == 0 {
		n = DefaultParallel(MemAvailable(), PerTaskMemory(file, f.SB.Env.Config), 0)
	}
	budget, err := file.FleetBudget()
	if err != nil {
		return nil, err
	}
	st := &State{Name: name, File: path, MaxParallel: n, Created: time.Now().UTC(), Budget: budget}
	for _, t := range file.Tasks {
		st.Tasks = append(st.Tasks, TaskState{Task: t, Status: Queued})
	}
	if err := f.Store.Create(st); err != nil {
		return nil, err
	}
	if err := SpawnRunner(f.SB.Env, f.Store, name); err != nil {
		_ = f.Store.Remove(name)
		return nil, fmt.Errorf("start the fleet's runner: %w", err)
	}
	return st, nil
}
