// Package fake is an in-memory container.Engine for tests of the packages
// that drive one (sandbox, verify, hooks). It keeps containers, volumes,
// networks and images as data, moves containers through the states a real
// engine would (created, running, paused, exited), records every call, and
// can be told to fail a given call. No process runs: what a started
// container does is decided by the test (OnStart, Process, Exit). It
// passes the conformance suite (container/enginetest) every backend
// passes, declaring what it cannot do there.
//
// Shared is the same engine with its state in a file, for tests whose
// separate processes must see one engine (the command's scripts: a
// command, the supervisor it spawns, the next command); a Runner acts out
// its containers.
package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

var _ container.Engine = (*Engine)(nil)

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
	// ExitCode is the last exit's code; OOMKilled says it was for memory.
	ExitCode  int
	OOMKilled bool
	// Starts counts Start calls that started it.
	Starts int
	// Networks are the networks it was connected to; Addrs its addresses
	// on those it was connected to at an address of its own.
	Networks []string
	Addrs    map[string]netip.Addr

	waiters []chan container.WaitResult // for the next exit
	// stdout and stderr are what its runs printed (Process), and stdin
	// what the last Attach gave its next run.
	stdout, stderr []byte
	stdin          io.Reader
	// stop ends the running Process, if any.
	stop context.CancelFunc
	// exits counts the runs that ended; runs names each run a Shared
	// engine's Runner started; started is when the last run began (Shared
	// only: the in-memory fake reports no start time).
	exits   int
	runs    []string
	started time.Time
}

// copy is c as tests see it: without its waiters and process.
func (c *Container) copy() Container {
	return Container{ID: c.ID, Name: c.Name, Spec: c.Spec, Status: c.Status, ExitCode: c.ExitCode, Starts: c.Starts, Networks: slices.Clone(c.Networks), Addrs: maps.Clone(c.Addrs)}
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
	// Process, when set, is what a started container runs (after OnStart,
	// unless that made it exit), in a goroutine of its own: it reads the
	// stdin the last Attach gave, what it writes is the container's output
	// (Logs and Attach give it back), and its return is the exit code.
	// ctx ends when the container is stopped, killed or removed.
	Process func(ctx context.Context, c Container, stdin io.Reader, stdout, stderr io.Writer) int
	// VolumesWritable is what Abilities says of new volumes.
	VolumesWritable bool
	// MovesImages makes the fake save and load images (Abilities says
	// MoveImages): Save writes an archive whose manifest names the image,
	// Load makes present every tag an archive's manifest names.
	MovesImages bool

	mu         sync.Mutex
	seq        int
	containers map[string]*Container // by id
	volumes    map[string]container.Volume
	networks   map[string]*container.Network    // by id
	netSpecs   map[string]container.NetworkSpec // by id: what each was made from
	images     map[string][]string              // ref -> agents
	imageInfo  map[string]container.ImageInfo   // ref -> what a commit made
	commits    []Commit
	pushed     []string
	builds     []container.ContextBuild
	commit     bool // WithCommit
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
	cp := c.copy()
	return cp, true
}

// Containers returns copies of every container.
func (f *Engine) Containers() []Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Container
	for _, c := range f.containers {
		cp := c.copy()
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

// OutOfMemory ends a running (or paused) container as the engine does
// one past its memory limit: killed (137), marked OOMKilled.
func (f *Engine) OutOfMemory(idOrName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(idOrName); c != nil && (c.Status == StatusRunning || c.Status == StatusPaused) {
		c.OOMKilled = true
		f.exit(c, 137)
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
	c.exits++
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
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

// Abilities implements the engine's Abilities: it mounts anything, and
// keeps images only once WithCommit has been called (an engine without
// commits takes the path of one that cannot keep setup's result).
func (f *Engine) Abilities() container.Abilities {
	f.mu.Lock()
	defer f.mu.Unlock()
	return container.Abilities{Kind: container.KindFake, BindMounts: true, VolumesWritable: f.VolumesWritable, CommitImages: f.commit, MoveImages: f.MovesImages, FixedAddresses: true}
}

// Check implements the engine's Check.
func (f *Engine) Check(ctx context.Context) (string, error) {
	if err := f.begin("Check", ""); err != nil {
		return "", err
	}
	return "fake engine", nil
}

// MemoryBytes implements the engine's MemoryBytes: the fake has no size
// (a test that needs one wraps it).
func (f *Engine) MemoryBytes(ctx context.Context) (int64, error) {
	return 0, container.NotSupported("the fake engine has no memory size")
}

// Close implements the engine's Close.
func (f *Engine) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
