// Package steps runs a long flow — one that creates several things — as a
// list of named steps. Each step registers how to undo what it made as it
// makes it; when a step fails, everything registered so far is undone in
// reverse order (the failed step's own part included) and the error names
// the step. start, resume and land are flows of this kind.
package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/dieat"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Step is one named step of a flow.
type Step struct {
	Name string
	Do   func(ctx context.Context, u *Undo) error
}

// Undo collects what undoes a flow's steps.
type Undo struct {
	fns []func()
}

// Add registers fn to run if the flow fails: after the ones added later,
// before the ones added earlier. It runs with a context of its own (an
// interrupted flow still cleans up), so it takes none.
func (u *Undo) Add(fn func()) { u.fns = append(u.fns, fn) }

// Run undoes everything registered, newest first, and forgets it.
func (u *Undo) Run() {
	for i := len(u.fns) - 1; i >= 0; i-- {
		u.fns[i]()
	}
	u.fns = nil
}

// Options tune a run.
type Options struct {
	// Flow names the flow ("start", "land"): after each step the test
	// hook of internal/dieat may end the process at "<flow>: <step>".
	Flow string
	// Inject, when set, is asked after each step whether to fail there
	// (tests of the rollback).
	Inject func(step string) error
	// Trace, when set, is told each step as it ends.
	Trace func(format string, args ...any)
}

// Run runs the steps in order into u. On the first failure it undoes
// everything u holds and returns an *Error naming the step; on success u
// keeps its undo actions (the caller may run later steps of its own, or
// drop them).
func Run(ctx context.Context, u *Undo, o Options, steps ...Step) error {
	for _, s := range steps {
		start := time.Now()
		err := s.Do(ctx, u)
		if err == nil && o.Flow != "" {
			dieat.Point(o.Flow + ": " + s.Name)
		}
		if err == nil && o.Inject != nil {
			err = o.Inject(s.Name)
		}
		if o.Trace != nil {
			o.Trace("step %s: %v (%.1f ms)", s.Name, err, float64(time.Since(start).Microseconds())/1000)
		}
		if err != nil {
			u.Run()
			return &Error{Step: s.Name, Err: err}
		}
	}
	return nil
}

// Error is a flow's failure at one step.
type Error struct {
	Step string
	Err  error
}

// Error is the cause's message; a cause that is not already a message for
// the user is prefixed with the step.
func (e *Error) Error() string {
	if _, ok := usererr.As(e.Err); ok {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s: %v", e.Step, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// FailedStep returns the step err failed at, or "".
func FailedStep(err error) string {
	if se, ok := errors.AsType[*Error](err); ok {
		return se.Step
	}
	return ""
}
