package container_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/fake"
)

func oneShot() *container.Spec {
	s := &container.Spec{Name: "one-shot", Image: "img", User: "1:1", Network: container.NetworkNone,
		Limits: container.Limits{Pids: 8}, Labels: map[string]string{container.LabelManaged: "1"}, OpenStdin: true}
	s.Harden()
	return s
}

// echo is a fake whose containers copy stdin to stdout and exit with 7,
// or wait to be stopped when their command says "wait".
func echo() *fake.Engine {
	f := fake.New("img")
	f.Process = func(ctx context.Context, c fake.Container, stdin io.Reader, stdout, stderr io.Writer) int {
		if len(c.Spec.Argv) > 0 && c.Spec.Argv[0] == "wait" {
			<-ctx.Done()
			return -1
		}
		_, _ = io.Copy(stdout, stdin)
		_, _ = io.WriteString(stderr, "e")
		return 7
	}
	return f
}

func TestRunStreamsAndRemoves(t *testing.T) {
	f := echo()
	var out, errOut bytes.Buffer
	var startedID string
	stopped := false
	res, err := container.Run(context.Background(), f, oneShot(), container.RunOptions{
		Streams: container.Streams{Stdin: strings.NewReader("in"), Stdout: &out, Stderr: &errOut},
		Started: func(id string) func() { startedID = id; return func() { stopped = true } },
	})
	if err != nil || res.Err != nil || res.Code != 7 || out.String() != "in" || errOut.String() != "e" {
		t.Fatalf("run = %+v, %v, %q %q", res, err, out.String(), errOut.String())
	}
	if startedID == "" || !stopped {
		t.Errorf("started with %q, stopped %v", startedID, stopped)
	}
	if got := strings.Join(f.Methods(), " "); got != "Create WaitExit Attach Start Remove" {
		t.Errorf("calls: %s", got)
	}
	if len(f.Containers()) != 0 {
		t.Errorf("left: %+v", f.Containers())
	}
}

func TestRunWithoutStreamsAttachesNothing(t *testing.T) {
	f := echo()
	res, err := container.Run(context.Background(), f, oneShot(), container.RunOptions{})
	if err != nil || res.Code != 7 || f.Count("Attach") != 0 || len(f.Containers()) != 0 {
		t.Errorf("run = %+v, %v; calls %v", res, err, f.Methods())
	}
}

func TestRunFailuresLeaveNothing(t *testing.T) {
	for _, step := range []string{"Create", "Attach", "Start"} {
		f := echo()
		boom := errors.New("boom")
		f.Fail(step, boom)
		res, err := container.Run(context.Background(), f, oneShot(), container.RunOptions{Streams: container.Streams{Stdout: io.Discard}})
		if !errors.Is(err, boom) || res.Code != -1 {
			t.Errorf("%s fails: run = %+v, %v", step, res, err)
		}
		if len(f.Containers()) != 0 {
			t.Errorf("%s fails: left %+v", step, f.Containers())
		}
	}
}

func TestRunEndsWithItsContext(t *testing.T) {
	f := echo()
	s := oneShot()
	s.Argv = []string{"wait"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := container.Run(ctx, f, s, container.RunOptions{})
	if err != nil || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("run = %+v, %v; want the context's error", res, err)
	}
	if len(f.Containers()) != 0 {
		t.Errorf("left: %+v", f.Containers())
	}
}

// cancelledCreate makes the container, as an engine that got the request
// does, but its caller sees only that the context ended.
type cancelledCreate struct {
	*fake.Engine
	cancel context.CancelFunc
}

func (c cancelledCreate) Create(ctx context.Context, spec *container.Spec) (string, error) {
	if _, err := c.Engine.Create(context.Background(), spec); err != nil {
		return "", err
	}
	c.cancel()
	return "", ctx.Err()
}

func TestRunInterruptedWhileCreatingLeavesNothing(t *testing.T) {
	f := echo()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := container.Run(ctx, cancelledCreate{f, cancel}, oneShot(), container.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("run = %v; want the context's error", err)
	}
	if len(f.Containers()) != 0 {
		t.Errorf("left: %+v", f.Containers())
	}
}
