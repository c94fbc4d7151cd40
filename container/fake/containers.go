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
func (f *Engine) Create(ctx context.Context, spec *container.Spec) (string, error) {
	if err := f.begin("Create", spec.Name); err != nil {
		return "", err
	}
	if err := spec.Validate(); err != nil {
		return "", fmt.Errorf("container spec: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[spec.Image]; !ok {
		return "", notFound("image", spec.Image)
	}
	if spec.Name != "" && f.lookup(spec.Name) != nil {
		return "", conflict("a container named %s already exists", spec.Name)
	}
	if f.sharedName(spec.NetworkName) {
		return "", fmt.Errorf("network %s is ambiguous: %w", spec.NetworkName, container.ErrAmbiguousName)
	}
	f.seq++
	c := &Container{ID: fmt.Sprintf("fake%060d", f.seq), Name: spec.Name, Status: StatusCreated}
	c.Spec = *spec
	c.Spec.Labels = maps.Clone(spec.Labels)
	c.Spec.Mounts = slices.Clone(spec.Mounts)
	if c.Name == "" {
		c.Name = fmt.Sprintf("fake-%d", f.seq)
	}
	f.containers[c.ID] = c
	f.emit(c, container.EventCreate, nil)
	return c.ID, nil
}

// Start implements the engine's Start.
func (f *Engine) Start(ctx context.Context, id string) error {
	if err := f.begin("Start", id); err != nil {
		return err
	}
	f.mu.Lock()
	c := f.lookup(id)
	switch {
	case c == nil:
		f.mu.Unlock()
		return notFound("container", id)
	case c.Status == StatusRunning:
		f.mu.Unlock()
		return nil
	case c.Status == StatusPaused:
		f.mu.Unlock()
		return conflict("container %s is paused", id)
	}
	if name := f.ambiguous(c); name != "" {
		f.mu.Unlock()
		return fmt.Errorf("network %s is ambiguous: %w", name, container.ErrAmbiguousName)
	}
	c.Status = StatusRunning
	c.Starts++
	c.OOMKilled = false
	f.emit(c, container.EventStart, nil)
	cp := c.copy()
	f.mu.Unlock()
	if f.OnStart != nil {
		if code, exits := f.OnStart(cp); exits {
			f.Exit(cp.ID, code)
			return nil
		}
	}
	if f.Process != nil {
		f.launch(cp.ID)
	}
	return nil
}

// launch runs Process for a container that has just started, and makes
// it exit with what Process returns unless something else ended the run
// first.
func (f *Engine) launch(id string) {
	f.mu.Lock()
	c := f.containers[id]
	if c == nil || c.Status != StatusRunning {
		f.mu.Unlock()
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	stdin := c.stdin
	c.stdin = nil
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cp := c.copy()
	f.mu.Unlock()
	go func() {
		code := f.Process(ctx, cp, stdin, &output{f: f, id: id}, &output{f: f, id: id, stderr: true})
		f.mu.Lock()
		defer f.mu.Unlock()
		if ctx.Err() == nil && (c.Status == StatusRunning || c.Status == StatusPaused) {
			f.exit(c, code)
		}
		stop()
	}()
}

// output is where a Process writes: the container's stdout or stderr.
type output struct {
	f      *Engine
	id     string
	stderr bool
}

// Write appends to the container's output.
func (o *output) Write(b []byte) (int, error) {
	o.f.mu.Lock()
	defer o.f.mu.Unlock()
	if c := o.f.containers[o.id]; c != nil {
		if o.stderr {
			c.stderr = append(c.stderr, b...)
		} else {
			c.stdout = append(c.stdout, b...)
		}
	}
	return len(b), nil
}

// Stop implements the engine's Stop: a running or paused container exits
// with 143 (terminated); a missing one is not an error.
func (f *Engine) Stop(ctx context.Context, id string, timeout time.Duration) error {
	if err := f.begin("Stop", id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(id); c != nil && (c.Status == StatusRunning || c.Status == StatusPaused) {
		f.exit(c, 143)
	}
	return nil
}

// Kill implements the engine's Kill: the container exits with 128 plus the
// signal's number (SIGINT 2, SIGTERM 15, SIGKILL 9, others 15).
func (f *Engine) Kill(ctx context.Context, id, signal string) error {
	if err := f.begin("Kill", id+" "+signal); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(id)
	if c == nil {
		return notFound("container", id)
	}
	if c.Status != StatusRunning && c.Status != StatusPaused {
		return conflict("container %s is not running", id)
	}
	n := map[string]int{"SIGINT": 2, "SIGKILL": 9, "SIGHUP": 1}[signal]
	if n == 0 {
		n = 15
	}
	f.exit(c, 128+n)
	return nil
}

// Pause implements the engine's Pause.
func (f *Engine) Pause(ctx context.Context, id string) error {
	if err := f.begin("Pause", id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(id)
	switch {
	case c == nil:
		return notFound("container", id)
	case c.Status == StatusPaused:
		return conflict("container %s is already paused", id)
	case c.Status != StatusRunning:
		return conflict("container %s is not running", id)
	}
	c.Status = StatusPaused
	f.emit(c, container.EventPause, nil)
	return nil
}

// Unpause implements the engine's Unpause.
func (f *Engine) Unpause(ctx context.Context, id string) error {
	if err := f.begin("Unpause", id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(id)
	switch {
	case c == nil:
		return notFound("container", id)
	case c.Status != StatusPaused:
		return conflict("container %s is not paused", id)
	}
	c.Status = StatusRunning
	f.emit(c, container.EventUnpause, nil)
	return nil
}

// Remove implements the engine's Remove (forced; a missing one is fine).
func (f *Engine) Remove(ctx context.Context, id string) error {
	if err := f.begin("Remove", id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(id)
	if c == nil {
		return nil
	}
	if c.Status == StatusRunning || c.Status == StatusPaused {
		f.exit(c, 137)
	}
	for _, w := range c.waiters {
		w <- container.WaitResult{Code: -1, Err: notFound("container", id)}
	}
	c.waiters = nil
	delete(f.containers, c.ID)
	f.emit(c, container.EventDestroy, nil)
	return nil
}

// state converts c; f.mu is held.
func state(c *Container) container.State {
	st := container.State{
		ID: c.ID, Name: c.Name, Status: c.Status,
		Running: c.Status == StatusRunning || c.Status == StatusPaused, Paused: c.Status == StatusPaused,
		ExitCode: c.ExitCode, OOMKilled: c.OOMKilled, Started: c.started, Labels: maps.Clone(c.Spec.Labels), Image: c.Spec.Image,
		TTY: c.Spec.TTY, OpenStdin: c.Spec.OpenStdin, Mounts: map[string]string{},
	}
	for _, m := range c.Spec.Mounts {
		if m.Volume {
			continue // bind mounts only, as the real engine reports them
		}
		st.Mounts[m.Target] = m.Source
	}
	return st
}

// Inspect implements the engine's Inspect.
func (f *Engine) Inspect(ctx context.Context, id string) (*container.State, error) {
	if err := f.begin("Inspect", id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(id)
	if c == nil {
		return nil, notFound("container", id)
	}
	st := state(c)
	return &st, nil
}

// List implements the engine's List.
func (f *Engine) List(ctx context.Context, labels ...string) ([]container.State, error) {
	if err := f.begin("List", strings.Join(labels, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.State
	for _, c := range f.containers {
		if !hasLabels(c.Spec.Labels, labels) {
			continue
		}
		st := state(c)
		if c.Status == StatusExited {
			code := c.ExitCode
			st.ListExitCode = &code
		}
		// As a listing reports it: paused is not running; the rest is
		// Inspect's.
		st.Running = c.Status == StatusRunning
		st.Mounts, st.TTY, st.OpenStdin = nil, false, false
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b container.State) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// WaitExit implements the engine's WaitExit.
func (f *Engine) WaitExit(ctx context.Context, id string, cond container.WaitCondition) <-chan container.WaitResult {
	out := make(chan container.WaitResult, 1)
	if err := f.begin("WaitExit", id); err != nil {
		out <- container.WaitResult{Code: -1, Err: err}
		return out
	}
	f.mu.Lock()
	c := f.lookup(id)
	if c == nil {
		f.mu.Unlock()
		out <- container.WaitResult{Code: -1, Err: notFound("container", id)}
		return out
	}
	if cond == container.WaitNotRunning && c.Status != StatusRunning && c.Status != StatusPaused {
		code := c.ExitCode
		f.mu.Unlock()
		out <- container.WaitResult{Code: code}
		return out
	}
	w := make(chan container.WaitResult, 1)
	c.waiters = append(c.waiters, w)
	f.mu.Unlock()
	go func() {
		select {
		case r := <-w:
			out <- r
		case <-ctx.Done():
			out <- container.WaitResult{Code: -1, Err: ctx.Err()}
		}
	}()
	return out
}

// Attach implements the engine's Attach: the stdin given goes to the
// container's next run (Process), and the returned function writes Output
// and what the container printed to the streams once that run has ended.
func (f *Engine) Attach(ctx context.Context, id string, s container.Streams) (func() error, error) {
	if err := f.begin("Attach", id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	c := f.lookup(id)
	if c == nil {
		f.mu.Unlock()
		return nil, notFound("container", id)
	}
	w := make(chan container.WaitResult, 1)
	c.waiters = append(c.waiters, w)
	if s.Stdin != nil {
		c.stdin = s.Stdin
	}
	f.mu.Unlock()
	return func() error {
		select {
		case <-w:
		case <-ctx.Done():
			return nil
		}
		f.writeOutput(c, s.Stdout, s.Stderr)
		return nil
	}, nil
}

// writeOutput writes Output and c's own output to the given streams (a
// nil one discards its part).
func (f *Engine) writeOutput(c *Container, stdout, stderr io.Writer) {
	f.mu.Lock()
	out, errOut := f.Output+string(c.stdout), string(c.stderr)
	f.mu.Unlock()
	if stdout != nil {
		_, _ = io.WriteString(stdout, out)
	}
	if stderr != nil {
		_, _ = io.WriteString(stderr, errOut)
	}
}

// Exec implements the engine's Exec.
func (f *Engine) Exec(ctx context.Context, id string, o container.ExecOptions) (int, error) {
	if err := f.begin("Exec", id); err != nil {
		return -1, err
	}
	f.mu.Lock()
	c := f.lookup(id)
	if c == nil {
		f.mu.Unlock()
		return -1, notFound("container", id)
	}
	if c.Status != StatusRunning {
		f.mu.Unlock()
		return -1, conflict("container %s is not running", id)
	}
	cp := c.copy()
	f.mu.Unlock()
	if o.Started != nil {
		o.Started()
	}
	if f.OnExec != nil {
		return f.OnExec(cp, o), nil
	}
	return 0, nil
}

// Logs implements the engine's Logs: it writes Output and what the
// container printed.
func (f *Engine) Logs(ctx context.Context, id string, o container.LogsOptions) error {
	if err := f.begin("Logs", id); err != nil {
		return err
	}
	f.mu.Lock()
	c := f.lookup(id)
	f.mu.Unlock()
	if c == nil {
		return notFound("container", id)
	}
	f.writeOutput(c, o.Stdout, o.Stderr)
	return nil
}

// Events implements the engine's Events.
func (f *Engine) Events(ctx context.Context, labels ...string) (<-chan container.Event, <-chan error) {
	out := make(chan container.Event, 256)
	errs := make(chan error, 1)
	if err := f.begin("Events", strings.Join(labels, ",")); err != nil {
		errs <- err
		close(out)
		close(errs)
		return out, errs
	}
	s := &subscriber{labels: slices.Clone(labels), ch: out, done: ctx.Done()}
	f.mu.Lock()
	f.subs = append(f.subs, s)
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		f.subs = slices.DeleteFunc(f.subs, func(x *subscriber) bool { return x == s })
		close(out)
		close(errs)
		f.mu.Unlock()
	}()
	return out, errs
}
