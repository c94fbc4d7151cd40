package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/git-sandbox/git-sandbox/container"
)

// execCall is one exec or attach the stand-in API server took.
type execCall struct {
	pod, sub string
	command  []string
	stdin    string
	tty      bool
}

// streamServer stands in for the API server's exec and attach
// subresources: it takes the WebSocket as a kubelet does (remote command
// protocol v5), reads stdin to its end, and answers as the test says
// (what the command printed and its exit code).
type streamServer struct {
	mu     sync.Mutex
	calls  []execCall
	answer func(c execCall) (stdout string, code int)
	// broken answers every request with an error.
	broken bool
	// seen, when set, receives every call once it was taken.
	seen chan execCall
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	if broken {
		http.Error(w, "the API server is unwell", http.StatusInternalServerError)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// api/v1/namespaces/NS/pods/POD/SUB
	if len(parts) != 7 {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	c := execCall{pod: parts[5], sub: parts[6], command: q["command"], tty: q.Get("tty") == "true"}
	wantStdin, wantStdout, wantStderr := q.Get("stdin") == "true", q.Get("stdout") == "true", q.Get("stderr") == "true"
	ch := func(real bool, t wsstream.ChannelType) wsstream.ChannelType {
		if real {
			return t
		}
		return wsstream.IgnoreChannel
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommand.StreamProtocolV5Name: {Binary: true, Channels: []wsstream.ChannelType{
			ch(wantStdin, wsstream.ReadChannel), ch(wantStdout, wsstream.WriteChannel), ch(wantStderr, wsstream.WriteChannel),
			wsstream.WriteChannel, wsstream.ReadChannel,
		}},
	})
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return
	}
	defer conn.Close()
	// The first message says the connection is up.
	switch {
	case wantStdout:
		streams[1].Write(nil)
	case wantStderr:
		streams[2].Write(nil)
	default:
		streams[3].Write(nil)
	}
	if wantStdin {
		b, _ := io.ReadAll(streams[0])
		c.stdin = string(b)
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	answer, seen := s.answer, s.seen
	s.mu.Unlock()
	if seen != nil {
		seen <- c
	}
	out, code := "", 0
	if answer != nil {
		out, code = answer(c)
	}
	if out != "" && wantStdout {
		streams[1].Write([]byte(out))
	}
	status := metav1.Status{Status: metav1.StatusSuccess}
	if code != 0 {
		status = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(code)}}}}
	}
	b, _ := json.Marshal(status)
	streams[3].Write(b)
}

func (s *streamServer) commands() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]string
	for _, c := range s.calls {
		out = append(out, c.command)
	}
	return out
}

// withREST is a clientset whose core REST client (the one exec and
// attach requests are built with; client-go's fake has none) reaches a
// real server, everything else the fake.
type withREST struct {
	kubernetes.Interface
	rc rest.Interface
}

func (w withREST) CoreV1() corev1client.CoreV1Interface {
	return coreWithREST{w.Interface.CoreV1(), w.rc}
}

type coreWithREST struct {
	corev1client.CoreV1Interface
	rc rest.Interface
}

func (c coreWithREST) RESTClient() rest.Interface { return c.rc }

// streamEngine is a test engine whose streams reach a stand-in API
// server, with one container "c1" whose first Pod runs.
func streamEngine(t *testing.T) (*Engine, *streamServer, *record) {
	t.Helper()
	e := newTestEngine(t)
	srv := &streamServer{}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e.rest = &rest.Config{Host: hs.URL}
	real, err := kubernetes.NewForConfig(e.rest)
	if err != nil {
		t.Fatal(err)
	}
	e.cs = withREST{e.cs, real.CoreV1().RESTClient()}
	ctx := context.Background()
	if _, err := e.Create(ctx, testSpec("c1")); err != nil {
		t.Fatal(err)
	}
	r, err := e.getRecord(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	setPod(t, e, r, 1, running)
	r, _ = e.getRecord(ctx, "c1")
	return e, srv, r
}

func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

// endPod makes the container's running Pod end with code, as the kubelet
// reports a main process that exited.
func endPod(t *testing.T, e *Engine, pod string, code int32) {
	t.Helper()
	ctx := context.Background()
	p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	terminated(code)(p)
	if _, err := e.cs.CoreV1().Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func TestExec(t *testing.T) {
	e, srv, _ := streamEngine(t)
	ctx := context.Background()
	srv.answer = func(c execCall) (string, int) { return "out of " + c.command[len(c.command)-1] + "\n", 3 }
	var out bytes.Buffer
	started := false
	code, err := e.Exec(ctx, "c1", container.ExecOptions{Argv: []string{"make", "test"}, Streams: container.Streams{Stdin: strings.NewReader("input"), Stdout: &out},
		Started: func() { started = true }})
	if err != nil || code != 3 {
		t.Fatalf("Exec = %d, %v; want the command's 3", code, err)
	}
	if !started || out.String() != "out of test\n" {
		t.Errorf("started %v, output %q", started, out.String())
	}
	c := srv.calls[0]
	if c.pod != "c1-1" || c.sub != "exec" || strings.Join(c.command, " ") != "make test" || c.stdin != "input" {
		t.Errorf("exec call %+v", c)
	}

	// A directory or an environment: a shell around the command sets them.
	srv.answer = nil
	if code, err := e.Exec(ctx, "c1", container.ExecOptions{Argv: []string{"ls"}, Env: []string{"A=1"}, WorkDir: "/workspace/sub"}); err != nil || code != 0 {
		t.Fatalf("Exec = %d, %v", code, err)
	}
	want := []string{"/bin/sh", "-c", `cd -- "$0" || exit 126; exec env "$@"`, "/workspace/sub", "A=1", "ls"}
	if got := srv.commands()[1]; !slices.Equal(got, want) {
		t.Errorf("wrapped command %q, want %q", got, want)
	}

	// Not running: a conflict, and Started still says the exec is over.
	endPod(t, e, "c1-1", 0)
	started = false
	if _, err := e.Exec(ctx, "c1", container.ExecOptions{Argv: []string{"ls"}, Started: func() { started = true }}); !container.IsConflict(err) || !started {
		t.Errorf("Exec in an ended container = %v, started %v", err, started)
	}
}

func TestKillPauseUnpause(t *testing.T) {
	e, srv, _ := streamEngine(t)
	ctx := context.Background()
	if err := e.Kill(ctx, "c1", "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	cmd := srv.commands()[0]
	if cmd[0] != "/bin/sh" || cmd[2] != signalScript || cmd[4] != "HUP" {
		t.Errorf("kill ran %q", cmd)
	}
	if r2, _ := e.getRecord(ctx, "c1"); r2.cm.Annotations[annStopped] != "" {
		t.Error("SIGHUP marked the container stopped")
	}
	if err := e.Kill(ctx, "c1", "term"); err != nil {
		t.Fatal(err)
	}
	if r2, _ := e.getRecord(ctx, "c1"); r2.cm.Annotations[annStopped] != "1" {
		t.Error("SIGTERM did not mark the container stopped")
	}
	// No main process found: the signal script exits 3.
	srv.answer = func(execCall) (string, int) { return "", 3 }
	if err := e.Kill(ctx, "c1", "INT"); err == nil || !strings.Contains(err.Error(), "exit 3") {
		t.Errorf("Kill whose signal found no process = %v", err)
	}
	srv.answer = nil

	if err := e.Pause(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if got := srv.commands()[3]; !strings.Contains(got[2], "kill -STOP -1") {
		t.Errorf("pause ran %q", got)
	}
	if err := e.Pause(ctx, "c1"); !container.IsConflict(err) {
		t.Errorf("a second Pause = %v, want a conflict", err)
	}
	st, _ := e.Inspect(ctx, "c1")
	if !st.Paused {
		t.Errorf("Inspect after Pause = %+v", st)
	}
	if err := e.Unpause(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if got := srv.commands()[len(srv.commands())-1]; !strings.Contains(got[2], "kill -CONT -1") {
		t.Errorf("unpause ran %q", got)
	}
	if err := e.Unpause(ctx, "c1"); !container.IsConflict(err) {
		t.Errorf("Unpause of a running container = %v, want a conflict", err)
	}
	// An exec that fails undoes the pause's mark.
	srv.mu.Lock()
	srv.broken = true
	srv.mu.Unlock()
	if err := e.Pause(ctx, "c1"); err == nil {
		t.Error("Pause whose exec failed gave no error")
	}
	if r2, _ := e.getRecord(ctx, "c1"); r2.cm.Annotations[annPaused] != "" {
		t.Error("a failed Pause left the container marked paused")
	}
	if err := e.Unpause(ctx, "c1"); !container.IsConflict(err) {
		t.Errorf("Unpause after a failed Pause = %v", err)
	}
	endPod(t, e, "c1-1", 0)
	for name, f := range map[string]func() error{
		"Kill":    func() error { return e.Kill(ctx, "c1", "TERM") },
		"Pause":   func() error { return e.Pause(ctx, "c1") },
		"Unpause": func() error { return e.Unpause(ctx, "c1") },
	} {
		if err := f(); !container.IsConflict(err) {
			t.Errorf("%s of an ended container = %v, want a conflict", name, err)
		}
	}
}

// TestStop: SIGTERM first; a Pod whose process ends is stopped; one that
// does not end in time gets SIGKILL. A paused container is continued so
// that it can take the signal.
func TestStop(t *testing.T) {
	tests := []struct {
		name     string
		endOn    string // the signal that ends the process
		paused   bool
		wantSigs []string
		wantCONT bool
	}{
		{"ends on TERM", "TERM", false, []string{"TERM"}, false},
		{"needs KILL", "KILL", false, []string{"TERM", "KILL"}, false},
		{"paused", "TERM", true, []string{"TERM"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, srv, _ := streamEngine(t)
			ctx := context.Background()
			if tt.paused {
				if err := e.Pause(ctx, "c1"); err != nil {
					t.Fatal(err)
				}
			}
			var sigs []string
			cont := false
			srv.answer = func(c execCall) (string, int) {
				if len(c.command) == 5 && c.command[2] == signalScript {
					sigs = append(sigs, c.command[4])
					if c.command[4] == tt.endOn {
						endPod(t, e, c.pod, 143)
					}
				} else if strings.Contains(c.command[2], "kill -CONT") {
					cont = true
				}
				return "", 0
			}
			if err := e.Stop(ctx, "c1", 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if strings.Join(sigs, ",") != strings.Join(tt.wantSigs, ",") || cont != tt.wantCONT {
				t.Errorf("signals %v, CONT %v; want %v, %v", sigs, cont, tt.wantSigs, tt.wantCONT)
			}
			st, err := e.Inspect(ctx, "c1")
			if err != nil || st.Running || st.Paused {
				t.Errorf("after Stop: %+v, %v", st, err)
			}
			r, _ := e.getRecord(ctx, "c1")
			if r.cm.Annotations[annStopped] != "1" || r.cm.Annotations[annPaused] != "" {
				t.Errorf("record after Stop: %v", r.cm.Annotations)
			}
			// Stopping what does not run is no error.
			if err := e.Stop(ctx, "c1", time.Second); err != nil {
				t.Errorf("a second Stop = %v", err)
			}
		})
	}
	e := newTestEngine(t)
	if err := e.Stop(context.Background(), "missing", time.Second); err != nil {
		t.Errorf("Stop of a missing container = %v", err)
	}
}

func TestLogsAndAttach(t *testing.T) {
	e, srv, _ := streamEngine(t)
	ctx := context.Background()
	// client-go's fake clientset answers every log request with "fake
	// logs".
	for _, tail := range []string{"", "all", "10"} {
		var out bytes.Buffer
		if err := e.Logs(ctx, "c1", container.LogsOptions{Stdout: &out, Tail: tail}); err != nil || out.String() != "fake logs" {
			t.Errorf("Logs tail %q = %q, %v", tail, out.String(), err)
		}
	}
	if err := e.Logs(ctx, "c1", container.LogsOptions{Tail: "ten"}); err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Errorf("Logs with a bad tail = %v", err)
	}
	if err := e.Logs(ctx, "missing", container.LogsOptions{}); !container.IsNotFound(err) {
		t.Errorf("Logs of a missing container = %v", err)
	}
	// A container never started has no output yet.
	if _, err := e.Create(ctx, testSpec("fresh")); err != nil {
		t.Fatal(err)
	}
	var none bytes.Buffer
	if err := e.Logs(ctx, "fresh", container.LogsOptions{Stdout: &none}); err != nil || none.Len() != 0 {
		t.Errorf("Logs of a container never started = %q, %v", none.String(), err)
	}

	// Attach without a terminal: output is the Pod's log from its start,
	// stdin goes through an attach of stdin alone.
	var out bytes.Buffer
	srv.mu.Lock()
	srv.seen = make(chan execCall, 1)
	srv.mu.Unlock()
	wait, err := e.Attach(ctx, "c1", container.Streams{Stdin: strings.NewReader("typed"), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil || out.String() != "fake logs" {
		t.Errorf("Attach = %q, %v", out.String(), err)
	}
	select {
	case c := <-srv.seen:
		if c.sub != "attach" || c.stdin != "typed" || c.pod != "c1-1" || c.tty {
			t.Errorf("attach call %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Error("stdin was never attached")
	}
	if _, err := e.Attach(ctx, "missing", container.Streams{}); !container.IsNotFound(err) {
		t.Errorf("Attach to a missing container = %v", err)
	}
}
