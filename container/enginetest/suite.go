// Package enginetest is the conformance suite of container.Engine: one set
// of tests every backend runs from its own tests (restic's
// internal/backend/test is the model) — the fake engine and the Kubernetes
// engine over client-go's fake clientset in unit tests, the Docker daemon
// and the test cluster in the end-to-end tests. It checks the contract
// callers rely on whatever the engine: the lifecycle and its error kinds,
// labels, waits, exec, attach, logs, events, volumes, networks, and that
// images an engine cannot handle say ErrNotSupported as its Abilities
// declare.
//
// What an engine cannot do where it is tested (the fake clientset has no
// exec streams) is declared in Suite.Cannot with the reason, and the tests
// that need it are skipped saying so: nothing is left out silently.
package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// Feature is something a test needs beyond what every engine can do
// everywhere.
type Feature string

// The features an engine may lack where it is tested.
const (
	// Exec: commands run in a running container, their stdin and stdout
	// streamed.
	Exec Feature = "exec"
	// Signals: Stop and Kill reach a running container's main process.
	Signals Feature = "signals"
	// Pause: Pause and Unpause of a running container.
	Pause Feature = "pause"
	// Attach: a container's main process streamed, stdin included.
	Attach Feature = "attach"
	// Logs: what a container printed, read back.
	Logs Feature = "logs"
	// Files: what a container writes into a volume is there for the next.
	Files Feature = "files"
)

// Suite is the conformance suite for one engine.
type Suite struct {
	// New returns the engine under test for one test, connected; the
	// suite closes it when the test ends.
	New func(t *testing.T) container.Engine
	// Image is an image the engine runs, with /bin/sh, cat and sleep.
	Image string
	// User is the user the containers run as, "uid:gid" (65534:65534 when
	// empty).
	User string
	// Cannot names what the engine cannot do where it is tested, each
	// with the reason; the tests that need it are skipped with it.
	Cannot map[Feature]string
	// Timeout bounds each test (2 minutes when 0).
	Timeout time.Duration
}

// RunTests runs every test of the suite as a subtest of t, one after
// another.
func (s Suite) RunTests(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*env)
	}{
		{"Lifecycle", testLifecycle},
		{"StartAndWait", testStartAndWait},
		{"Run", testRun},
		{"ListByLabels", testListByLabels},
		{"StopAndKill", testStopAndKill},
		{"PauseAndUnpause", testPauseAndUnpause},
		{"Exec", testExec},
		{"Attach", testAttach},
		{"Logs", testLogs},
		{"Events", testEvents},
		{"Volumes", testVolumes},
		{"VolumeFiles", testVolumeFiles},
		{"Networks", testNetworks},
		{"FixedAddresses", testFixedAddresses},
		{"Images", testImages},
		{"Describe", testDescribe},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(s.env(t)) })
	}
}

// env is one test's engine, context, and the label that marks (and
// finds, to remove) everything it makes.
type env struct {
	*testing.T
	s   Suite
	e   container.Engine
	ctx context.Context
	// tag is the test's own value of LabelRepo; label is the filter.
	tag, label string
}

func (s Suite) env(t *testing.T) *env {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "gs-suite-" + hex.EncodeToString(b)
	e := s.New(t)
	x := &env{T: t, s: s, e: e, ctx: ctx, tag: tag, label: container.LabelRepo + "=" + tag}
	t.Cleanup(func() {
		cancel()
		x.removeAll()
		_ = e.Close()
	})
	return x
}

// need skips the test, saying why, when the engine declared it cannot do
// f here.
func (x *env) need(f Feature) {
	x.Helper()
	if why, ok := x.s.Cannot[f]; ok {
		x.Skipf("skipped: the engine lacks %s here: %s", f, why)
	}
}

// removeAll removes what the test made: its containers, networks and
// volumes.
func (x *env) removeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cs, err := x.e.List(ctx, x.label); err == nil {
		for _, c := range cs {
			_ = x.e.Remove(ctx, c.ID)
		}
	}
	if ns, err := x.e.ListNetworks(ctx, x.label); err == nil {
		for _, n := range ns {
			_ = x.e.RemoveNetwork(ctx, n.ID)
		}
	}
	if vs, err := x.e.ListVolumes(ctx, x.label); err == nil {
		for _, v := range vs {
			_ = x.e.RemoveVolume(ctx, v.Name)
		}
	}
}

// name is a name of the test's own.
func (x *env) name(what string) string { return x.tag + "-" + what }

// spec is a hardened container of the test running p, carrying its label.
func (x *env) spec(what string, p Program) *container.Spec {
	user := x.s.User
	if user == "" {
		user = "65534:65534"
	}
	s := &container.Spec{
		Name: x.name(what), Image: x.s.Image, Argv: p.Argv(), User: user,
		Env:     []string{EnvVar + "="},
		Network: container.NetworkNone,
		Limits:  container.Limits{Pids: 64, MemoryBytes: 128 << 20},
		Labels:  map[string]string{container.LabelManaged: "1", container.LabelRepo: x.tag},
	}
	s.Harden()
	return s
}

// create creates a container and fails the test if it cannot.
func (x *env) create(s *container.Spec) string {
	x.Helper()
	id, err := x.e.Create(x.ctx, s)
	if err != nil {
		x.Fatalf("create %s: %v", s.Name, err)
	}
	return id
}

// started creates and starts a container running p for ever.
func (x *env) started(what string) string {
	x.Helper()
	id := x.create(x.spec(what, Program{Forever: true}))
	if err := x.e.Start(x.ctx, id); err != nil {
		x.Fatalf("start: %v", err)
	}
	return id
}

// inspect returns a container's state and fails the test if it cannot.
func (x *env) inspect(id string) *container.State {
	x.Helper()
	st, err := x.e.Inspect(x.ctx, id)
	if err != nil {
		x.Fatalf("inspect: %v", err)
	}
	return st
}

// runToEnd starts a created container and waits for its exit.
func (x *env) runToEnd(id string) container.WaitResult {
	x.Helper()
	waitC := x.e.WaitExit(x.ctx, id, container.WaitNextExit)
	if err := x.e.Start(x.ctx, id); err != nil {
		x.Fatalf("start: %v", err)
	}
	return <-waitC
}

// ids are the ids of listed states.
func ids(list []container.State) map[string]bool {
	out := map[string]bool{}
	for _, st := range list {
		out[st.ID] = true
	}
	return out
}
