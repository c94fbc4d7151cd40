// Package enginefake is an in-memory container engine for tests of the
// packages that drive one (sandbox, verify, hooks). It keeps containers,
// volumes, networks and images as data, moves containers through the
// states a real engine would (created, running, paused, exited), records
// every call, and can be told to fail a given call. No process runs: what
// a started container does is decided by the test (OnStart, Exit).
package enginefake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// Container states, as container.State.Status reports them.
const (
	StatusCreated = "created"
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusExited  = "exited"
)

// Call is one recorded call: the method and the object it named.
type Call struct {
	Method string
	// Target is the container id or name, volume, network or image the
	// call named ("" for List and the like).
	Target string
}

// String is "Method target".
func (c Call) String() string { return strings.TrimSpace(c.Method + " " + c.Target) }

// Container is a fake container.
type Container struct {
	ID     string
	Name   string
	Spec   container.Spec
	Status string
	// ExitCode is the last exit's code.
	ExitCode int
	// Starts counts Start calls that started it.
	Starts int
	// Networks are the networks it was connected to.
	Networks []string

	waiters []chan container.WaitResult // for the next exit
}

// Engine is the fake. The zero value is not usable; call New.
type Engine struct {
	// OnStart, when set, runs after a container started (outside the
	// lock): returning exits true makes it exit at once with code, as a
	// command that finishes would. Without it a container runs until
	// Stop, Kill, Exit or Remove.
	OnStart func(c Container) (code int, exits bool)
	// OnCall, when set, runs at the start of every call, outside the lock.
	OnCall func(c Call)
	// OnExec decides an exec's exit code (0 without it).
	OnExec func(c Container, o container.ExecOptions) int
	// Output is what every container printed (Attach and Logs write it).
	Output string
	// DuplicateNetworkNames lets CreateNetwork make a second network of a
	// name, as an engine does when two creates race.
	DuplicateNetworkNames bool

	mu         sync.Mutex
	seq        int
	containers map[string]*Container // by id
	volumes    map[string]container.Volume
	networks   map[string]*container.Network    // by id
	netSpecs   map[string]container.NetworkSpec // by id: what each was made from
	images     map[string][]string              // ref -> agents
	imageInfo  map[string]container.ImageInfo   // ref -> what a commit made
	commits    []Commit
	calls      []Call
	fail       map[string]failure
	subs       []*subscriber
	closed     bool
}

type failure struct {
	err  error
	once bool
}

type subscriber struct {
	labels []string
	ch     chan container.Event
	done   <-chan struct{}
}

// New returns an empty engine that has the given images.
func New(images ...string) *Engine {
	f := &Engine{
		containers: map[string]*Container{},
		volumes:    map[string]container.Volume{},
		networks:   map[string]*container.Network{},
		netSpecs:   map[string]container.NetworkSpec{},
		images:     map[string][]string{},
		fail:       map[string]failure{},
	}
	for _, i := range images {
		f.images[i] = nil
	}
	return f
}

// AddImage makes an image present, with the agent CLIs it says it has.
func (f *Engine) AddImage(ref string, agents ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[ref] = agents
}

// Fail makes every later call of method fail with err; a nil err stops it.
func (f *Engine) Fail(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, method)
		return
	}
	f.fail[method] = failure{err: err}
}

// FailOnce makes the next call of method fail with err.
func (f *Engine) FailOnce(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = failure{err: err, once: true}
}

// Calls returns every call so far, in order.
func (f *Engine) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Methods returns the method names of every call so far, in order.
func (f *Engine) Methods() []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, c.Method)
	}
	return out
}

// Count returns how many times method was called.
func (f *Engine) Count(method string) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Get returns a copy of a container by id or name.
func (f *Engine) Get(idOrName string) (Container, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(idOrName)
	if c == nil {
		return Container{}, false
	}
	cp := *c
	cp.waiters = nil
	return cp, true
}

// Containers returns copies of every container.
func (f *Engine) Containers() []Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Container
	for _, c := range f.containers {
		cp := *c
		cp.waiters = nil
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// SetStatus forces a container's state (created, running, paused, exited)
// without an event, as a container found in that state would be.
func (f *Engine) SetStatus(idOrName, status string, exitCode int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(idOrName); c != nil {
		c.Status, c.ExitCode = status, exitCode
	}
}

// Exit makes a running (or paused) container exit with code, as its main
// process ending would.
func (f *Engine) Exit(idOrName string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(idOrName); c != nil && (c.Status == StatusRunning || c.Status == StatusPaused) {
		f.exit(c, code)
	}
}

// Closed reports whether Close was called.
func (f *Engine) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// begin records a call and returns the failure set for it, if any.
func (f *Engine) begin(method, target string) error {
	if f.OnCall != nil {
		f.OnCall(Call{Method: method, Target: target})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Call{Method: method, Target: target})
	fl, ok := f.fail[method]
	if !ok {
		return nil
	}
	if fl.once {
		delete(f.fail, method)
	}
	return fl.err
}

func (f *Engine) lookup(idOrName string) *Container {
	if c, ok := f.containers[idOrName]; ok {
		return c
	}
	for _, c := range f.containers {
		if c.Name == idOrName && idOrName != "" {
			return c
		}
	}
	return nil
}

func notFound(kind, name string) error {
	return fmt.Errorf("no such %s: %s: %w", kind, name, container.ErrNotFound)
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), container.ErrConflict)
}

// exit moves c to exited and wakes its waiters; f.mu is held.
func (f *Engine) exit(c *Container, code int) {
	c.Status, c.ExitCode = StatusExited, code
	for _, w := range c.waiters {
		w <- container.WaitResult{Code: code}
	}
	c.waiters = nil
	f.emit(c, container.EventDie, &code)
}

// emit sends an event to every subscriber whose labels match; f.mu is held.
func (f *Engine) emit(c *Container, action container.EventAction, code *int) {
	ev := container.Event{ID: c.ID, Name: c.Name, Action: action, ExitCode: code, Labels: maps.Clone(c.Spec.Labels), Time: time.Now()}
	for _, s := range f.subs {
		if !hasLabels(c.Spec.Labels, s.labels) {
			continue
		}
		select {
		case s.ch <- ev:
		case <-s.done:
		default:
			// A test that does not read its events does not block the engine.
		}
	}
}

// hasLabels reports whether labels carry the managed label and every
// filter (key=value, or key alone).
func hasLabels(labels map[string]string, filter []string) bool {
	if _, ok := labels[container.LabelManaged]; !ok {
		return false
	}
	for _, l := range filter {
		k, v, withValue := strings.Cut(l, "=")
		got, ok := labels[k]
		if !ok || withValue && got != v {
			return false
		}
	}
	return true
}

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
	c.Status = StatusRunning
	c.Starts++
	f.emit(c, container.EventStart, nil)
	cp := *c
	cp.waiters = nil
	f.mu.Unlock()
	if f.OnStart != nil {
		if code, exits := f.OnStart(cp); exits {
			f.Exit(cp.ID, code)
		}
	}
	return nil
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
		ExitCode: c.ExitCode, Labels: maps.Clone(c.Spec.Labels), Image: c.Spec.Image,
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

// Attach implements the engine's Attach: the returned function writes
// Output to the streams once the container's next run has ended.
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
	f.mu.Unlock()
	return func() error {
		select {
		case <-w:
		case <-ctx.Done():
			return nil
		}
		if s.Stdout != nil {
			_, _ = io.WriteString(s.Stdout, f.Output)
		}
		return nil
	}, nil
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
	cp := *c
	cp.waiters = nil
	f.mu.Unlock()
	if o.Started != nil {
		o.Started()
	}
	if f.OnExec != nil {
		return f.OnExec(cp, o), nil
	}
	return 0, nil
}

// Logs implements the engine's Logs: it writes Output.
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
	if o.Stdout != nil {
		_, _ = io.WriteString(o.Stdout, f.Output)
	}
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

// CreateVolume implements the engine's CreateVolume.
func (f *Engine) CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error) {
	if err := f.begin("CreateVolume", s.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.volumes[s.Name]; ok {
		return nil, conflict("volume %s exists", s.Name)
	}
	v := container.Volume{Name: s.Name, Labels: withManaged(s.Labels)}
	f.volumes[s.Name] = v
	return &v, nil
}

// RemoveVolume implements the engine's RemoveVolume.
func (f *Engine) RemoveVolume(ctx context.Context, name string) error {
	if err := f.begin("RemoveVolume", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.volumes, name)
	return nil
}

// ListVolumes implements the engine's ListVolumes.
func (f *Engine) ListVolumes(ctx context.Context, labels ...string) ([]container.Volume, error) {
	if err := f.begin("ListVolumes", strings.Join(labels, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Volume
	for _, v := range f.volumes {
		if hasLabels(v.Labels, labels) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b container.Volume) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateNetwork implements the engine's CreateNetwork.
func (f *Engine) CreateNetwork(ctx context.Context, s container.NetworkSpec) (*container.Network, error) {
	if err := f.begin("CreateNetwork", s.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.networks {
		if n.Name == s.Name && !f.DuplicateNetworkNames {
			return nil, conflict("network %s exists", s.Name)
		}
		if s.Subnet != "" && f.netSpecs[id].Subnet == s.Subnet {
			return nil, fmt.Errorf("network %s: pool overlaps: %w", s.Name, container.ErrAddressInUse)
		}
	}
	f.seq++
	n := &container.Network{ID: fmt.Sprintf("net%061d", f.seq), Name: s.Name, Internal: s.Internal, Labels: withManaged(s.Labels), Created: time.Now()}
	f.networks[n.ID] = n
	f.netSpecs[n.ID] = s
	cp := *n
	return &cp, nil
}

// NetworkSpec is what the network with this id was made from.
func (f *Engine) NetworkSpec(id string) container.NetworkSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.netSpecs[id]
}

func (f *Engine) network(idOrName string) *container.Network {
	if n, ok := f.networks[idOrName]; ok {
		return n
	}
	for _, n := range f.networks {
		if n.Name == idOrName {
			return n
		}
	}
	return nil
}

// ConnectNetwork implements the engine's ConnectNetwork.
func (f *Engine) ConnectNetwork(ctx context.Context, networkID, containerID string) error {
	if err := f.begin("ConnectNetwork", networkID+" "+containerID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.network(networkID)
	if n == nil {
		return notFound("network", networkID)
	}
	c := f.lookup(containerID)
	if c == nil {
		return notFound("container", containerID)
	}
	c.Networks = append(c.Networks, n.ID)
	return nil
}

// RemoveNetwork implements the engine's RemoveNetwork.
func (f *Engine) RemoveNetwork(ctx context.Context, networkID string) error {
	if err := f.begin("RemoveNetwork", networkID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.network(networkID)
	if n == nil {
		return nil
	}
	for _, c := range f.containers {
		if slices.Contains(c.Networks, n.ID) {
			return conflict("network %s has active endpoints", n.Name)
		}
	}
	delete(f.networks, n.ID)
	return nil
}

// ListNetworks implements the engine's ListNetworks.
func (f *Engine) ListNetworks(ctx context.Context, labels ...string) ([]container.Network, error) {
	if err := f.begin("ListNetworks", strings.Join(labels, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Network
	for _, n := range f.networks {
		if hasLabels(n.Labels, labels) {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b container.Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func withManaged(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	if out[container.LabelManaged] == "" {
		out[container.LabelManaged] = "1"
	}
	return out
}

// ImageExists implements the engine's ImageExists.
func (f *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	if err := f.begin("ImageExists", ref); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.images[ref]
	return ok, nil
}

// ImageAgents implements the engine's ImageAgents.
func (f *Engine) ImageAgents(ctx context.Context, image string) ([]string, error) {
	if err := f.begin("ImageAgents", image); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	agents, ok := f.images[image]
	if !ok {
		return nil, notFound("image", image)
	}
	return slices.Clone(agents), nil
}

// Build implements the engine's Build: the tag becomes present.
func (f *Engine) Build(ctx context.Context, o container.BuildOptions) error {
	if err := f.begin("Build", o.Tag); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[o.Base]; !ok {
		return notFound("image", o.Base)
	}
	f.images[o.Tag] = nil
	return nil
}

// Close implements the engine's Close.
func (f *Engine) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
