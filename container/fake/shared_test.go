package fake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/enginetest"
)

// programs is a Runner that acts out the suite's programs in goroutines of
// this process, keeping each run's output and exit by its token.
type programs struct {
	mu   sync.Mutex
	seq  int
	runs map[string]*programRun
}

type programRun struct {
	stop           context.CancelFunc
	stdout, stderr bytes.Buffer
	code           int
	ended          bool
}

func (p *programs) Start(c Container, attached *container.Streams) (string, <-chan struct{}, error) {
	prog, ok := enginetest.ProgramOf(c.Spec.Argv)
	if !ok {
		return "", nil, fmt.Errorf("not a program of the suite: %q", c.Spec.Argv)
	}
	ctx, stop := context.WithCancel(context.Background())
	p.mu.Lock()
	p.seq++
	run := fmt.Sprintf("run%d", p.seq)
	r := &programRun{stop: stop}
	p.runs[run] = r
	p.mu.Unlock()
	var stdin io.Reader = strings.NewReader("")
	stdout, stderr := io.Writer(&locked{p: p, b: &r.stdout}), io.Writer(&locked{p: p, b: &r.stderr})
	if attached != nil {
		if attached.Stdin != nil {
			stdin = attached.Stdin
		}
		stdout, stderr = io.MultiWriter(stdout, orDiscard(attached.Stdout)), io.MultiWriter(stderr, orDiscard(attached.Stderr))
	}
	done := make(chan struct{})
	go func() {
		code := prog.Run(ctx, enginetest.Process{Env: c.Spec.Env, Dir: c.Spec.WorkDir}, stdin, stdout, stderr)
		p.mu.Lock()
		r.code, r.ended = code, true
		p.mu.Unlock()
		close(done)
	}()
	if attached == nil {
		return run, nil, nil
	}
	return run, done, nil
}

// locked writes to a run's buffer under the runner's lock.
type locked struct {
	p *programs
	b *bytes.Buffer
}

func (l *locked) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.b.Write(b)
}

func (p *programs) Exited(run string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.runs[run]
	return r.code, r.ended
}

func (p *programs) Stop(run string) {
	p.mu.Lock()
	r := p.runs[run]
	p.mu.Unlock()
	r.stop()
}

func (p *programs) Logs(run string, stdout, stderr io.Writer) {
	p.mu.Lock()
	out, errOut := p.runs[run].stdout.String(), p.runs[run].stderr.String()
	p.mu.Unlock()
	_, _ = io.WriteString(stdout, out)
	_, _ = io.WriteString(stderr, errOut)
}

func (p *programs) Exec(ctx context.Context, c Container, o container.ExecOptions) (int, error) {
	if o.Started != nil {
		o.Started()
	}
	prog, ok := enginetest.ProgramOf(o.Argv)
	if !ok {
		return 127, nil
	}
	dir := o.WorkDir
	if dir == "" {
		dir = c.Spec.WorkDir
	}
	in := enginetest.Process{Env: append(append([]string(nil), c.Spec.Env...), o.Env...), Dir: dir}
	return prog.Run(ctx, in, o.Streams.Stdin, o.Streams.Stdout, o.Streams.Stderr), nil
}

// A Shared engine keeps the contract too, each call going through the
// file; two Shared values on one directory stand for two processes.
func TestSharedConformance(t *testing.T) {
	enginetest.Suite{
		Image: "suite-image",
		New: func(t *testing.T) container.Engine {
			dir := t.TempDir()
			if err := InitShared(dir, map[string][]string{"suite-image": nil}); err != nil {
				t.Fatal(err)
			}
			s, err := OpenShared(dir, SharedOptions{Runner: &programs{runs: map[string]*programRun{}}, Poll: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Cannot: map[enginetest.Feature]string{
			enginetest.Files: "the fake runs no processes: its volumes hold no files",
		},
	}.RunTests(t)
}

// twoProcesses opens two Shared values on one new directory, standing for
// two processes, with one runner (its runs outlive neither).
func twoProcesses(t *testing.T) (a, b *Shared, runner *programs) {
	dir := t.TempDir()
	if err := InitShared(dir, map[string][]string{"img": {"claude"}}); err != nil {
		t.Fatal(err)
	}
	runner = &programs{runs: map[string]*programRun{}}
	open := func() *Shared {
		s, err := OpenShared(dir, SharedOptions{Runner: runner, Poll: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return open(), open(), runner
}

// What one process starts, another sees running and stops; the first
// one's wait sees the exit, and the run ends.
func TestSharedStopAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	a, b, runner := twoProcesses(t)
	s := spec("c1")
	s.Argv = enginetest.Program{Forever: true}.Argv()
	id, err := a.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	waitB := b.WaitExit(ctx, "c1", container.WaitNextExit)
	if err := a.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(ctx, "c1"); err != nil || !st.Running || st.Started.IsZero() {
		t.Fatalf("the other process sees %+v, %v; want it running, with a start time", st, err)
	}
	if err := b.Stop(ctx, "c1", time.Second); err != nil {
		t.Fatal(err)
	}
	if res := <-waitB; res.Err != nil || res.Code != 143 {
		t.Errorf("wait in the other process = %+v, want code 143", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ended := runner.Exited("run1"); ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stopped run still runs")
		}
		time.Sleep(time.Millisecond)
	}
}

// A run that ends by itself is reaped by whichever process looks; a
// failure injected by one process fails the other's call (once); what one
// removes or adds, the other sees.
func TestSharedStateAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoProcesses(t)
	s := spec("c2")
	s.Argv = enginetest.Program{Code: 4}.Argv()
	id, err := b.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if res := <-a.WaitExit(ctx, id, container.WaitNotRunning); res.Err != nil || res.Code != 4 {
		t.Errorf("wait = %+v, want code 4", res)
	}
	if list, _ := b.List(ctx, container.LabelRepo+"=r"); len(list) != 1 || list[0].ListExitCode == nil || *list[0].ListExitCode != 4 {
		t.Errorf("list = %+v", list)
	}
	if err := a.Fail("Remove", "engine gone", true); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, id); err == nil || err.Error() != "engine gone" {
		t.Errorf("remove with a failure injected elsewhere = %v", err)
	}
	if err := b.Remove(ctx, id); err != nil {
		t.Errorf("the failure was for one call: %v", err)
	}
	if _, err := a.Inspect(ctx, id); !container.IsNotFound(err) {
		t.Errorf("inspect of a container removed elsewhere = %v", err)
	}
	if err := a.AddImage("other", "codex"); err != nil {
		t.Fatal(err)
	}
	if agents, err := b.Images().Agents(ctx, "other"); err != nil || len(agents) != 1 {
		t.Errorf("image added elsewhere: %v, %v", agents, err)
	}
}
