package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Lander lands one sandbox, verifying the merged tree; it returns the
// commit made ("" when there was nothing to land).
type Lander interface {
	Land(ctx context.Context, branch string) (commit string, err error)
}

// ErrMoved is what a Lander's error wraps when the base moved under a
// land (another land won the compare-and-swap); the queue tries again.
var ErrMoved = errors.New("the base moved while landing")

// Landed is one sandbox the queue landed.
type Landed struct {
	Branch string `json:"branch"`
	Commit string `json:"commit"`
}

// QueueState is a landing queue that stopped, kept so --continue resumes
// it: the order, what landed, and where and why it stopped.
type QueueState struct {
	Order   []string  `json:"order"`
	Next    int       `json:"next"`
	Landed  []Landed  `json:"landed"`
	Stopped string    `json:"stopped,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Time    time.Time `json:"time"`
	// First is the index in Landed of the first land of this run (a
	// continued queue's earlier lands come before it).
	First int `json:"-"`
}

// Rest is what the queue has not landed, the stopped one first.
func (q *QueueState) Rest() []string {
	if q.Next >= len(q.Order) {
		return nil
	}
	return q.Order[q.Next:]
}

// Queue lands sandboxes one after another onto their base as the previous
// ones left it. One queue runs per repository at a time.
type Queue struct {
	Store  *Store
	Lander Lander
	// Logf reports each land as it happens.
	Logf func(format string, args ...any)
	// Retries is how often a land whose base moved under it is tried
	// again (3 when 0).
	Retries int
}

func (q *Queue) path() string { return filepath.Join(q.Store.Dir, "landing.json") }
func (q *Queue) lock() string { return filepath.Join(q.Store.Dir, "landing.lock") }

// Stopped returns the stopped queue kept for --continue, or nil.
func (q *Queue) Stopped() (*QueueState, error) {
	b, err := os.ReadFile(q.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("landing queue: %w", err)
	}
	var st QueueState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("landing queue %s: %w", q.path(), err)
	}
	return &st, nil
}

func (q *Queue) save(st *QueueState) error {
	if err := os.MkdirAll(q.Store.Dir, 0o700); err != nil {
		return fmt.Errorf("landing queue: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := q.path() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("landing queue: %w", err)
	}
	return os.Rename(tmp, q.path())
}

// Abort forgets a stopped queue; its sandboxes stay as they are.
func (q *Queue) Abort() error {
	err := os.Remove(q.path())
	if errors.Is(err, os.ErrNotExist) {
		return usererr.New("no landing queue is stopped in this repository")
	}
	return err
}

// ErrStopped is in the chain of the error Run returns when the queue
// stopped at a sandbox.
var ErrStopped = errors.New("the landing queue stopped")

// Run lands order one by one (or, with cont, resumes the stopped queue
// at the sandbox it stopped at). It stops at the first land that fails —
// a conflict, a failed verify of the merged tree, a sandbox still running
// — keeps the queue for --continue, and leaves the rest untouched. The
// returned state says what landed and where it stopped.
func (q *Queue) Run(ctx context.Context, order []string, cont bool) (*QueueState, error) {
	if err := os.MkdirAll(q.Store.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("landing queue: %w", err)
	}
	unlock, err := record.LockFor(q.lock(), time.Nanosecond)
	if errors.Is(err, record.ErrLockTimeout) {
		return nil, usererr.New("another landing queue runs in this repository").
			Hint("wait for it to end, then run git sandbox fleet land again")
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	prev, err := q.Stopped()
	if err != nil {
		return nil, err
	}
	var st *QueueState
	switch {
	case cont && prev == nil:
		return nil, usererr.New("no landing queue is stopped in this repository: there is nothing to continue").
			Hint("git sandbox fleet land [BRANCH…] starts one")
	case cont && len(order) > 0:
		return nil, usererr.New("--continue resumes the stopped queue in its own order; it takes no branches").
			Hint("git sandbox fleet land --continue")
	case cont:
		st = prev
	case prev != nil:
		return nil, usererr.New("a landing queue stopped at %s (%s)", termsafe.String(prev.Stopped), termsafe.String(prev.Reason)).
			Hint("fix it (git sandbox update %s), then git sandbox fleet land --continue; or forget that queue with git sandbox fleet land --abort", termsafe.String(prev.Stopped))
	default:
		if len(order) == 0 {
			return nil, usererr.New("nothing to land")
		}
		st = &QueueState{Order: order}
	}
	st.First = len(st.Landed)
	retries := q.Retries
	if retries <= 0 {
		retries = 3
	}
	for st.Next < len(st.Order) {
		b := st.Order[st.Next]
		var commit string
		for try := 0; ; try++ {
			commit, err = q.Lander.Land(ctx, b)
			if !errors.Is(err, ErrMoved) || try >= retries {
				break
			}
			q.logf("the base moved under %s (another land); landing it again", termsafe.String(b))
		}
		if err != nil {
			st.Stopped, st.Reason, st.Time = b, oneLine(err.Error()), time.Now().UTC()
			if serr := q.save(st); serr != nil {
				return st, errors.Join(err, serr)
			}
			return st, &StopError{State: st, Err: err}
		}
		st.Landed = append(st.Landed, Landed{Branch: b, Commit: commit})
		st.Next++
		st.Stopped, st.Reason = "", ""
		if st.Next < len(st.Order) {
			// Progress is kept as it is made: a queue killed here
			// resumes after what landed.
			st.Stopped, st.Reason = st.Order[st.Next], "interrupted"
			if err := q.save(st); err != nil {
				return st, err
			}
			st.Stopped, st.Reason = "", ""
		}
	}
	if err := os.Remove(q.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("landing queue: %w", err)
	}
	return st, nil
}

func (q *Queue) logf(format string, args ...any) {
	if q.Logf != nil {
		q.Logf(format, args...)
	}
}

// StopError is the queue stopping at a sandbox: the land's own error
// (its hints and exit status) with the queue's state.
type StopError struct {
	State *QueueState
	Err   error
}

func (e *StopError) Error() string {
	return fmt.Sprintf("the landing queue stopped at %s: %v", termsafe.String(e.State.Stopped), e.Err)
}

// Unwrap gives both the land's error and ErrStopped.
func (e *StopError) Unwrap() []error { return []error{e.Err, ErrStopped} }

func oneLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
