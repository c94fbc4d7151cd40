package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Task states, as fleet ps shows them.
const (
	Queued    = "queued"
	Starting  = "starting"
	Running   = "running"
	Exited    = "exited"
	Failed    = "failed" // start failed; Error says why
	Cancelled = "cancelled"
	// OverBudget: not started, the fleet's budget being spent.
	OverBudget = "budget"
)

// TaskState is one task and how far it got.
type TaskState struct {
	Task
	Status   string    `json:"status"`
	Error    string    `json:"error,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
}

// Active reports whether the task is queued, starting or running.
func (t TaskState) Active() bool {
	return t.Status == Queued || t.Status == Starting || t.Status == Running
}

// State is a fleet's state file.
type State struct {
	Name        string `json:"name"`
	File        string `json:"file"`
	MaxParallel int    `json:"max_parallel"`
	// Budget is the dollars the fleet may spend on model calls (0: no
	// bound).
	Budget   float64   `json:"budget,omitempty"`
	Created  time.Time `json:"created"`
	Stopping bool      `json:"stopping,omitempty"`
	// RunnerPID is the runner's process id, written once it holds the
	// runner lock (fleet start waits for it).
	RunnerPID int         `json:"runner_pid,omitempty"`
	Tasks     []TaskState `json:"tasks"`
}

// Counts returns how many tasks are in each state.
func (s *State) Counts() map[string]int {
	m := map[string]int{}
	for _, t := range s.Tasks {
		m[t.Status]++
	}
	return m
}

// Store is where a repository's fleets are kept: one directory per fleet
// under Dir (worktree.Layout.FleetDir), and the landing queue's file.
type Store struct {
	Dir string
}

// NewStore returns the store kept in dir.
func NewStore(dir string) *Store { return &Store{Dir: dir} }

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckName refuses a fleet name that is not a plain file name.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return usererr.New("invalid fleet name %q", name).
			Hint("use letters, digits, '.', '_' and '-' (at most 64), such as --name batch1")
	}
	return nil
}

func (s *Store) dir(name string) string    { return filepath.Join(s.Dir, name) }
func (s *Store) file(name string) string   { return filepath.Join(s.dir(name), "fleet.json") }
func (s *Store) lock(name string) string   { return filepath.Join(s.dir(name), "lock") }
func (s *Store) Log(name string) string    { return filepath.Join(s.dir(name), "runner.log") }
func (s *Store) runner(name string) string { return filepath.Join(s.dir(name), "runner.lock") }

// ErrNoFleet is in the chain of the error for a fleet that does not exist.
var ErrNoFleet = errors.New("no such fleet")

// Create writes a new fleet's state; a fleet of that name must not exist.
func (s *Store) Create(st *State) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.Mkdir(s.dir(st.Name), 0o700); errors.Is(err, os.ErrExist) {
		return usererr.New("a fleet named %s exists already", st.Name).
			Hint("git sandbox fleet ps %s shows it; git sandbox fleet rm %s removes it, or give another --name", st.Name, st.Name)
	} else if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	return s.save(st)
}

// Load reads a fleet's state.
func (s *Store) Load(name string) (*State, error) {
	b, err := os.ReadFile(s.file(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, usererr.Wrap(ErrNoFleet, "no fleet named %s in this repository", name).
			Hint("git sandbox fleet ps lists them")
	}
	if err != nil {
		return nil, fmt.Errorf("fleet state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("fleet state %s: %w", s.file(name), err)
	}
	return &st, nil
}

// Update changes a fleet's state under its lock.
func (s *Store) Update(name string, fn func(*State) error) (*State, error) {
	unlock, err := record.Lock(s.lock(name))
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	if err := fn(st); err != nil {
		return nil, err
	}
	return st, s.save(st)
}

func (s *Store) save(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir(st.Name), "fleet-*.json")
	if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.file(st.Name)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("fleet state: %w", err)
	}
	return nil
}

// Names lists the repository's fleets, sorted.
func (s *Store) Names() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && validName.MatchString(e.Name()) {
			if _, err := os.Stat(s.file(e.Name())); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Resolve picks a fleet: the one named, the one started from the tasks
// file name names (as users type it after fleet start tasks.toml), else
// the only one.
func (s *Store) Resolve(name string) (string, error) {
	if name != "" {
		if n, ok := s.byFile(name); ok {
			return n, nil
		}
		if err := CheckName(name); err != nil {
			return "", err
		}
		_, err := s.Load(name)
		return name, err
	}
	names, err := s.Names()
	if err != nil {
		return "", err
	}
	switch len(names) {
	case 0:
		return "", usererr.Wrap(ErrNoFleet, "no fleet in this repository").
			Hint("git sandbox fleet start TASKS.toml starts one")
	case 1:
		return names[0], nil
	}
	return "", usererr.New("this repository has %d fleets: %v", len(names), names).
		Hint("name one (git sandbox fleet ps lists them)")
}

// byFile finds the fleet started from the tasks file at path, when path
// is not a fleet's name but a file.
func (s *Store) byFile(path string) (string, bool) {
	if CheckName(path) == nil {
		if _, err := s.Load(path); err == nil {
			return "", false // a fleet's name first
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	names, _ := s.Names()
	for _, n := range names {
		if st, err := s.Load(n); err == nil && st.File == abs {
			return n, true
		}
	}
	return "", false
}

// Remove deletes a fleet's state.
func (s *Store) Remove(name string) error {
	return os.RemoveAll(s.dir(name))
}

// LockRunner takes the fleet's runner lock, held for the runner's life:
// one runner per fleet.
func (s *Store) LockRunner(name string) (func(), error) {
	return record.LockFor(s.runner(name), time.Nanosecond)
}

// RunnerAlive reports whether a runner holds the fleet's runner lock.
func (s *Store) RunnerAlive(name string) bool {
	unlock, err := record.LockFor(s.runner(name), time.Nanosecond)
	if err != nil {
		return errors.Is(err, record.ErrLockTimeout)
	}
	unlock()
	return false
}
