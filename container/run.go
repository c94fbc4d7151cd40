package container

import (
	"context"
	"io"
)

// Runner is what Run asks of an engine: a part of Engine, so that a
// package that only runs containers can declare what it needs.
type Runner interface {
	Create(ctx context.Context, spec *Spec) (string, error)
	Start(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	WaitExit(ctx context.Context, id string, cond WaitCondition) <-chan WaitResult
	Attach(ctx context.Context, id string, s Streams) (func() error, error)
}

// RunOptions say how Run connects to its container.
type RunOptions struct {
	// Streams are attached before the container starts. Without any of
	// Stdin, Stdout and Stderr nothing is attached (the output stays in
	// the engine's log); a nil Stdout or Stderr beside another stream
	// discards that stream.
	Streams Streams
	// Started, when set, is called with the container's id once it has
	// started; the function it returns, when not nil, is called once the
	// container has exited (signals forwarded while it runs, for one).
	Started func(id string) (stop func())
}

// Run runs spec's container to completion: create, attach, start, wait,
// remove (also when ctx ends). err is the failure of one of the steps
// before the wait; res is the exit as WaitExit reported it, its Err set
// when the wait itself failed or ctx ended first. This is the one place a
// short-lived container (a probe, a loader, a command run beside a
// sandbox) is run, whatever the engine.
func Run(ctx context.Context, e Runner, spec *Spec, o RunOptions) (res WaitResult, err error) {
	id, err := e.Create(ctx, spec)
	if err != nil {
		if ctx.Err() != nil && spec.Name != "" {
			// Ctrl-C while the engine created it: the engine may have
			// made the container all the same, and only its name is known.
			_ = e.Remove(context.WithoutCancel(ctx), spec.Name)
		}
		return WaitResult{Code: -1}, err
	}
	defer func() { _ = e.Remove(context.WithoutCancel(ctx), id) }()
	waitC := e.WaitExit(ctx, id, WaitNextExit)
	var pump func() error
	if s := o.Streams; s.Stdin != nil || s.Stdout != nil || s.Stderr != nil {
		if s.Stdout == nil {
			s.Stdout = io.Discard
		}
		if s.Stderr == nil {
			s.Stderr = io.Discard
		}
		if pump, err = e.Attach(ctx, id, s); err != nil {
			return WaitResult{Code: -1}, err
		}
	}
	if err := e.Start(ctx, id); err != nil {
		return WaitResult{Code: -1}, err
	}
	var stop func()
	if o.Started != nil {
		stop = o.Started(id)
	}
	if pump != nil {
		_ = pump()
	}
	select {
	case res = <-waitC:
	case <-ctx.Done():
		res = WaitResult{Code: -1, Err: ctx.Err()}
	}
	if stop != nil {
		stop()
	}
	return res, nil
}
