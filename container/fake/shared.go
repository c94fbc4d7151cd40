package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

var _ container.Engine = (*Shared)(nil)

// Shared is a fake engine whose state is a file, so that the separate
// processes of one test — a command, the supervisor it spawns, the next
// command — see one engine, as they would see one daemon. Every call locks
// the state's directory, loads the state into an Engine, makes the call
// there and saves what it changed; waits, attaches and events look at the
// file again until what they wait for is there. What a started container
// does is its Runner's; without one it runs until it is stopped.
//
// Unlike Engine it records no calls and has no hooks of one process
// (OnStart, Process, OnExec): the state is what a test looks at, and a
// failure injected with Fail is seen by every process.
type Shared struct {
	dir    string
	runner Runner
	poll   time.Duration

	mu       sync.Mutex
	attached map[string]*attachment // by container id: this process's Attach calls
}

// Runner acts out what a Shared engine's containers do. Its runs outlive
// the process that started them (a detached agent runs on after the
// command that started it exits), so a run is named by a token the engine
// keeps, and any process asks the runner about it.
type Runner interface {
	// Start begins a run of c, which has just been marked running, and
	// returns the run's token. attached, when not nil, are the streams an
	// Attach of this process gave: the run reads its stdin and writes its
	// output there (as well as keeping it for Logs), and done is closed
	// once all its output has been written there.
	Start(c Container, attached *container.Streams) (run string, done <-chan struct{}, err error)
	// Exited reports whether a run has ended, and its exit code.
	Exited(run string) (code int, ok bool)
	// Stop ends a run at once (the container was stopped, killed or
	// removed); one that has ended already is left alone.
	Stop(run string)
	// Logs writes what a run has printed so far.
	Logs(run string, stdout, stderr io.Writer)
	// Exec runs a command in c, which runs, and returns its exit code; it
	// calls o.Started once the command runs.
	Exec(ctx context.Context, c Container, o container.ExecOptions) (int, error)
}

// SharedOptions configure OpenShared.
type SharedOptions struct {
	// Runner acts out the containers (none: they run until stopped).
	Runner Runner
	// Poll bounds how long waits and events sleep between looks at the
	// file (20 ms when 0; the first looks come sooner).
	Poll time.Duration
}

// The files of a Shared engine's directory.
const (
	sharedState = "engine.json"
	sharedLock  = "engine.lock"
)

// InitShared makes dir hold a new, empty engine that has the given images
// (each with the agent CLIs it says it has).
func InitShared(dir string, images map[string][]string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f := New()
	for ref, agents := range images {
		f.images[ref] = slices.Clone(agents)
	}
	s := &Shared{dir: dir}
	return s.save(f)
}

// OpenShared returns the engine whose state InitShared made in dir.
func OpenShared(dir string, o SharedOptions) (*Shared, error) {
	if _, err := os.Stat(filepath.Join(dir, sharedState)); err != nil {
		return nil, fmt.Errorf("fake engine: %w", err)
	}
	poll := o.Poll
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	return &Shared{dir: dir, runner: o.Runner, poll: poll, attached: map[string]*attachment{}}, nil
}

// Fail makes the next call of method (once), or every later one, fail
// with an error saying message, in every process; an empty message stops
// it.
func (s *Shared) Fail(method, message string, once bool) error {
	return s.do(func(f *Engine) error {
		if message == "" {
			delete(f.fail, method)
			return nil
		}
		f.fail[method] = failure{err: errors.New(message), once: once}
		return nil
	})
}

// Engine returns the state as it is now, loaded into an Engine of its
// own, for a test to look at (Containers, Get, ListVolumes, …). Changing
// it changes nothing of the shared state.
func (s *Shared) Engine() (*Engine, error) {
	var out *Engine
	err := s.look(func(f *Engine) { out = f })
	return out, err
}

// lock takes the state's lock, waiting for it.
func (s *Shared) lock() (func(), error) {
	fh, err := os.OpenFile(filepath.Join(s.dir, sharedLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fake engine: %w", err)
	}
	for {
		err = syscall.Flock(int(fh.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("fake engine: lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(fh.Fd()), syscall.LOCK_UN)
		fh.Close()
	}, nil
}

// do makes one call that changes the state: with the lock held, it loads
// the state, notes the runs that ended, runs op, ends the runs op
// stopped, and saves.
func (s *Shared) do(op func(f *Engine) error) error { return s.call(true, op) }

// read makes one call that only reads the state: it is saved only when a
// run was found ended or a failure injected once was used up.
func (s *Shared) read(op func(f *Engine) error) error { return s.call(false, op) }

func (s *Shared) call(write bool, op func(f *Engine) error) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.load()
	if err != nil {
		return err
	}
	write = s.reap(f) || write
	failures := len(f.fail)
	live := liveRuns(f)
	opErr := op(f)
	if !write && len(f.fail) == failures {
		return opErr
	}
	if s.runner != nil {
		for id, run := range live {
			if c := f.containers[id]; c == nil || !isLive(c) || c.runs[len(c.runs)-1] != run {
				s.runner.Stop(run)
			}
		}
	}
	if err := s.save(f); err != nil {
		return errors.Join(opErr, err)
	}
	return opErr
}

// look reads the state (saving it only when a run was found ended).
func (s *Shared) look(fn func(f *Engine)) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.load()
	if err != nil {
		return err
	}
	if s.reap(f) {
		if err := s.save(f); err != nil {
			return err
		}
	}
	fn(f)
	return nil
}

func isLive(c *Container) bool { return c.Status == StatusRunning || c.Status == StatusPaused }

// liveRuns are the runs of the containers that run, by container id.
func liveRuns(f *Engine) map[string]string {
	out := map[string]string{}
	for id, c := range f.containers {
		if isLive(c) && len(c.runs) > 0 {
			out[id] = c.runs[len(c.runs)-1]
		}
	}
	return out
}

// reap makes the containers whose run ended exited, with its code; it
// reports whether any did.
func (s *Shared) reap(f *Engine) bool {
	if s.runner == nil {
		return false
	}
	changed := false
	for id, run := range liveRuns(f) {
		if code, ok := s.runner.Exited(run); ok {
			f.exit(f.containers[id], code)
			changed = true
		}
	}
	return changed
}

// waitFor looks at the state until cond holds, sooner at first.
func (s *Shared) waitFor(ctx context.Context, cond func(f *Engine) bool) error {
	d := time.Millisecond
	for {
		ok := false
		if err := s.look(func(f *Engine) { ok = cond(f) }); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		d = min(2*d, s.poll)
	}
}

// The state as the file holds it.
type (
	sharedFile struct {
		Seq        int                            `json:"seq"`
		Containers []sharedContainer              `json:"containers"`
		Volumes    []container.Volume             `json:"volumes"`
		Networks   []sharedNetwork                `json:"networks"`
		Images     map[string][]string            `json:"images"`
		ImageInfo  map[string]container.ImageInfo `json:"image_info,omitempty"`
		Fail       map[string]sharedFailure       `json:"fail,omitempty"`
	}
	sharedContainer struct {
		ID       string                `json:"id"`
		Name     string                `json:"name"`
		Spec     container.Spec        `json:"spec"`
		Status   string                `json:"status"`
		ExitCode int                   `json:"exit_code"`
		Starts   int                   `json:"starts"`
		Exits    int                   `json:"exits"`
		Networks []string              `json:"networks,omitempty"`
		Addrs    map[string]netip.Addr `json:"addrs,omitempty"`
		Runs     []string              `json:"runs,omitempty"`
		Started  time.Time             `json:"started"`
	}
	sharedNetwork struct {
		Network container.Network     `json:"network"`
		Spec    container.NetworkSpec `json:"spec"`
	}
	sharedFailure struct {
		Message string `json:"message"`
		Once    bool   `json:"once,omitempty"`
	}
)

// load reads the state into a new Engine.
func (s *Shared) load() (*Engine, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, sharedState))
	if err != nil {
		return nil, fmt.Errorf("fake engine: %w", err)
	}
	var st sharedFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("fake engine: %s: %w", sharedState, err)
	}
	f := New()
	f.seq = st.Seq
	for _, c := range st.Containers {
		f.containers[c.ID] = &Container{
			ID: c.ID, Name: c.Name, Spec: c.Spec, Status: c.Status, ExitCode: c.ExitCode, Starts: c.Starts,
			Networks: c.Networks, Addrs: c.Addrs, exits: c.Exits, runs: c.Runs, started: c.Started,
		}
	}
	for _, v := range st.Volumes {
		f.volumes[v.Name] = v
	}
	for _, n := range st.Networks {
		f.networks[n.Network.ID] = &n.Network
		f.netSpecs[n.Network.ID] = n.Spec
	}
	for ref, agents := range st.Images {
		f.images[ref] = agents
	}
	if len(st.ImageInfo) > 0 {
		f.imageInfo = st.ImageInfo
	}
	for m, fl := range st.Fail {
		f.fail[m] = failure{err: errors.New(fl.Message), once: fl.Once}
	}
	return f, nil
}

// save writes f's state, replacing the file whole.
func (s *Shared) save(f *Engine) error {
	st := sharedFile{Seq: f.seq, Images: f.images, ImageInfo: f.imageInfo, Fail: map[string]sharedFailure{}}
	for _, c := range f.containers {
		st.Containers = append(st.Containers, sharedContainer{
			ID: c.ID, Name: c.Name, Spec: c.Spec, Status: c.Status, ExitCode: c.ExitCode, Starts: c.Starts,
			Exits: c.exits, Networks: c.Networks, Addrs: c.Addrs, Runs: c.runs, Started: c.started,
		})
	}
	slices.SortFunc(st.Containers, func(a, b sharedContainer) int { return strings.Compare(a.ID, b.ID) })
	for _, v := range f.volumes {
		st.Volumes = append(st.Volumes, v)
	}
	slices.SortFunc(st.Volumes, func(a, b container.Volume) int { return strings.Compare(a.Name, b.Name) })
	for id, n := range f.networks {
		st.Networks = append(st.Networks, sharedNetwork{Network: *n, Spec: f.netSpecs[id]})
	}
	slices.SortFunc(st.Networks, func(a, b sharedNetwork) int { return strings.Compare(a.Network.ID, b.Network.ID) })
	for m, fl := range f.fail {
		st.Fail[m] = sharedFailure{Message: fl.err.Error(), Once: fl.once}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("fake engine: %w", err)
	}
	tmp := filepath.Join(s.dir, sharedState+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("fake engine: %w", err)
	}
	return os.Rename(tmp, filepath.Join(s.dir, sharedState))
}

// AddImage makes an image present, with the agent CLIs it says it has.
func (s *Shared) AddImage(ref string, agents ...string) error {
	return s.do(func(f *Engine) error {
		f.images[ref] = slices.Clone(agents)
		return nil
	})
}
