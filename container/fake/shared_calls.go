package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// Create implements the engine's Create.
func (s *Shared) Create(ctx context.Context, spec *container.Spec) (id string, err error) {
	err = s.do(func(f *Engine) error {
		id, err = f.Create(ctx, spec)
		return err
	})
	return id, err
}

// Start implements the engine's Start: the Runner starts a run, with the
// streams of this process's Attach when it made one.
func (s *Shared) Start(ctx context.Context, id string) error {
	return s.do(func(f *Engine) error {
		before := 0
		if c := f.lookup(id); c != nil {
			before = c.Starts
		}
		if err := f.Start(ctx, id); err != nil {
			return err
		}
		c := f.lookup(id)
		if c.Starts == before {
			return nil // running already
		}
		c.started = time.Now()
		a := s.takeAttached(c.ID)
		if s.runner == nil {
			a.ran(nil)
			return nil
		}
		var streams *container.Streams
		if a != nil {
			streams = &a.streams
		}
		run, done, err := s.runner.Start(c.copy(), streams)
		if err != nil {
			f.exit(c, 127)
			a.ran(nil)
			return fmt.Errorf("start container %s: %w", c.Name, err)
		}
		c.runs = append(c.runs, run)
		a.ran(done)
		return nil
	})
}

// Stop implements the engine's Stop.
func (s *Shared) Stop(ctx context.Context, id string, timeout time.Duration) error {
	return s.do(func(f *Engine) error { return f.Stop(ctx, id, timeout) })
}

// Kill implements the engine's Kill.
func (s *Shared) Kill(ctx context.Context, id, signal string) error {
	return s.do(func(f *Engine) error { return f.Kill(ctx, id, signal) })
}

// Pause implements the engine's Pause (the run's processes go on: only
// the state says paused).
func (s *Shared) Pause(ctx context.Context, id string) error {
	return s.do(func(f *Engine) error { return f.Pause(ctx, id) })
}

// Unpause implements the engine's Unpause.
func (s *Shared) Unpause(ctx context.Context, id string) error {
	return s.do(func(f *Engine) error { return f.Unpause(ctx, id) })
}

// Remove implements the engine's Remove.
func (s *Shared) Remove(ctx context.Context, id string) error {
	return s.do(func(f *Engine) error { return f.Remove(ctx, id) })
}

// Inspect implements the engine's Inspect.
func (s *Shared) Inspect(ctx context.Context, id string) (st *container.State, err error) {
	err = s.read(func(f *Engine) error {
		st, err = f.Inspect(ctx, id)
		return err
	})
	return st, err
}

// List implements the engine's List.
func (s *Shared) List(ctx context.Context, labels ...string) (out []container.State, err error) {
	err = s.read(func(f *Engine) error {
		out, err = f.List(ctx, labels...)
		return err
	})
	return out, err
}

// WaitExit implements the engine's WaitExit by looking at the state until
// the container has exited (again, for WaitNextExit).
func (s *Shared) WaitExit(ctx context.Context, id string, cond container.WaitCondition) <-chan container.WaitResult {
	out := make(chan container.WaitResult, 1)
	exits := 0
	err := s.read(func(f *Engine) error {
		if err := f.begin("WaitExit", id); err != nil {
			return err
		}
		c := f.lookup(id)
		if c == nil {
			return notFound("container", id)
		}
		exits = c.exits
		if cond == container.WaitNotRunning && !isLive(c) {
			exits-- // it has, as far as this wait goes
		}
		return nil
	})
	if err != nil {
		out <- container.WaitResult{Code: -1, Err: err}
		return out
	}
	go func() {
		var res container.WaitResult
		err := s.waitFor(ctx, func(f *Engine) bool {
			c := f.lookup(id)
			switch {
			case c == nil:
				res = container.WaitResult{Code: -1, Err: notFound("container", id)}
			case c.exits > exits && !isLive(c):
				res = container.WaitResult{Code: c.ExitCode}
			default:
				return false
			}
			return true
		})
		if err != nil {
			res = container.WaitResult{Code: -1, Err: err}
		}
		out <- res
	}()
	return out
}

// attachment is one Attach of this process, waiting for its run.
type attachment struct {
	streams container.Streams
	exits   int           // the container's exits when attached
	started chan struct{} // closed once a Start of this process ran it
	done    <-chan struct{}
}

// ran says that a Start of this process began the run (done closes once
// its output is written; nil when none will be); a is nil when there was
// no Attach.
func (a *attachment) ran(done <-chan struct{}) {
	if a == nil {
		return
	}
	a.done = done
	close(a.started)
}

// takeAttached returns (and forgets) this process's Attach of a container.
func (s *Shared) takeAttached(id string) *attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.attached[id]
	delete(s.attached, id)
	return a
}

// Attach implements the engine's Attach. When this process starts the
// container, the run reads stdin and writes to the streams itself; else
// (a container started elsewhere) the returned function waits for its
// exit and writes its output then.
func (s *Shared) Attach(ctx context.Context, id string, st container.Streams) (func() error, error) {
	a := &attachment{streams: st, started: make(chan struct{})}
	var cid string
	err := s.read(func(f *Engine) error {
		if err := f.begin("Attach", id); err != nil {
			return err
		}
		c := f.lookup(id)
		if c == nil {
			return notFound("container", id)
		}
		cid, a.exits = c.ID, c.exits
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.attached[cid] = a
	s.mu.Unlock()
	return func() error { return s.pump(ctx, cid, a) }, nil
}

// pump waits for an attached run's output to end.
func (s *Shared) pump(ctx context.Context, id string, a *attachment) error {
	var runs []string
	err := s.waitFor(ctx, func(f *Engine) bool {
		select {
		case <-a.started:
			return true
		default:
		}
		c := f.lookup(id)
		if c != nil && (c.exits <= a.exits || isLive(c)) {
			return false
		}
		if c != nil && len(c.runs) > 0 {
			runs = c.runs[len(c.runs)-1:]
		}
		return true
	})
	if err != nil {
		return nil // the context ended: nothing more to copy
	}
	select {
	case <-a.started:
		if a.done != nil {
			select {
			case <-a.done:
			case <-ctx.Done():
			}
		}
		return nil
	default:
	}
	s.takeAttached(id)
	if s.runner == nil {
		return nil
	}
	for _, r := range runs {
		s.runner.Logs(r, orDiscard(a.streams.Stdout), orDiscard(a.streams.Stderr))
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Exec implements the engine's Exec: the Runner runs the command.
func (s *Shared) Exec(ctx context.Context, id string, o container.ExecOptions) (int, error) {
	var c Container
	err := s.read(func(f *Engine) error {
		if err := f.begin("Exec", id); err != nil {
			return err
		}
		x := f.lookup(id)
		if x == nil {
			return notFound("container", id)
		}
		if x.Status != StatusRunning {
			return conflict("container %s is not running", id)
		}
		c = x.copy()
		return nil
	})
	if err != nil {
		return -1, err
	}
	if s.runner == nil {
		if o.Started != nil {
			o.Started()
		}
		return 0, nil
	}
	return s.runner.Exec(ctx, c, o)
}

// Logs implements the engine's Logs: what the container's runs printed,
// once it has exited when following.
func (s *Shared) Logs(ctx context.Context, id string, o container.LogsOptions) error {
	var runs []string
	find := func(f *Engine) error {
		c := f.lookup(id)
		if c == nil {
			return notFound("container", id)
		}
		runs = slices.Clone(c.runs)
		return nil
	}
	err := s.read(func(f *Engine) error {
		if err := f.begin("Logs", id); err != nil {
			return err
		}
		return find(f)
	})
	if err != nil {
		return err
	}
	if o.Follow {
		_ = s.waitFor(ctx, func(f *Engine) bool {
			c := f.lookup(id)
			return c == nil || !isLive(c)
		})
		_ = s.look(func(f *Engine) { _ = find(f) })
	}
	if s.runner == nil {
		return nil
	}
	for _, r := range runs {
		s.runner.Logs(r, orDiscard(o.Stdout), orDiscard(o.Stderr))
	}
	return nil
}

// seen is what Events knows of a container from its last look.
type seen struct {
	name          string
	labels        map[string]string
	status        string
	starts, exits int
	code          int
}

// sightings are the containers as the state holds them now.
func sightings(f *Engine) map[string]seen {
	out := map[string]seen{}
	for id, c := range f.containers {
		out[id] = seen{name: c.Name, labels: maps.Clone(c.Spec.Labels), status: c.Status, starts: c.Starts, exits: c.exits, code: c.ExitCode}
	}
	return out
}

// changes are the events that lead from one look to the next.
func changes(prev, cur map[string]seen) []container.Event {
	var out []container.Event
	add := func(id string, c seen, a container.EventAction, code *int) {
		out = append(out, container.Event{ID: id, Name: c.name, Action: a, ExitCode: code, Labels: maps.Clone(c.labels), Time: time.Now()})
	}
	ids := slices.Sorted(maps.Keys(cur))
	for _, id := range ids {
		c, p := cur[id], prev[id]
		if _, ok := prev[id]; !ok {
			add(id, c, container.EventCreate, nil)
		}
		if c.starts > p.starts {
			add(id, c, container.EventStart, nil)
		}
		if c.exits > p.exits {
			code := c.code
			add(id, c, container.EventDie, &code)
		}
		switch {
		case c.status == StatusPaused && p.status != StatusPaused:
			add(id, c, container.EventPause, nil)
		case c.status == StatusRunning && p.status == StatusPaused:
			add(id, c, container.EventUnpause, nil)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := cur[id]; !ok {
			p := prev[id]
			if p.status == StatusRunning || p.status == StatusPaused {
				code := 137
				add(id, p, container.EventDie, &code)
			}
			add(id, p, container.EventDestroy, nil)
		}
	}
	return out
}

// Events implements the engine's Events by comparing each look at the
// state with the one before.
func (s *Shared) Events(ctx context.Context, labels ...string) (<-chan container.Event, <-chan error) {
	out := make(chan container.Event, 256)
	errs := make(chan error, 1)
	var prev map[string]seen
	err := s.read(func(f *Engine) error {
		if err := f.begin("Events", strings.Join(labels, ",")); err != nil {
			return err
		}
		prev = sightings(f)
		return nil
	})
	if err != nil {
		errs <- err
		close(out)
		close(errs)
		return out, errs
	}
	go func() {
		defer close(errs)
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.poll):
			}
			var cur map[string]seen
			if err := s.look(func(f *Engine) { cur = sightings(f) }); err != nil {
				errs <- err
				return
			}
			for _, ev := range changes(prev, cur) {
				if !hasLabels(ev.Labels, labels) {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
			prev = cur
		}
	}()
	return out, errs
}
