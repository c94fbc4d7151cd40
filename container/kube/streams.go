package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	kexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/rawterm"
)

// stream connects to a Pod's exec or attach subresource: over a
// WebSocket, or SPDY for an API server that does not take one.
func (e *Engine) stream(ctx context.Context, pod, sub string, params runtime.Object, s remotecommand.StreamOptions) error {
	req := e.cs.CoreV1().RESTClient().Post().Namespace(e.ns).Resource("pods").Name(pod).SubResource(sub).
		VersionedParams(params, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.rest, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.rest, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, s)
}

// execIn runs argv in a Pod's main container; the exit code is the
// command's.
func (e *Engine) execIn(ctx context.Context, pod string, argv []string, s container.Streams) (int, error) {
	opts := &corev1.PodExecOptions{
		Container: mainContainer, Command: argv,
		Stdin: s.Stdin != nil, Stdout: true, Stderr: !s.TTY, TTY: s.TTY,
	}
	so := remotecommand.StreamOptions{Stdin: s.Stdin, Stdout: orDiscard(s.Stdout), Tty: s.TTY}
	if !s.TTY {
		so.Stderr = orDiscard(s.Stderr)
	}
	var restore func()
	if s.TTY {
		q := newSizeQueue()
		defer close(q.done)
		restore = rawterm.Raw(ctx, s.TerminalFd, q.resize)
		so.TerminalSizeQueue = q
	}
	err := e.stream(ctx, pod, "exec", opts, so)
	if restore != nil {
		restore()
	}
	var ee kexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", pod, err)
	}
	return 0, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// sizeQueue hands window sizes to the stream.
type sizeQueue struct {
	c    chan remotecommand.TerminalSize
	done chan struct{}
}

func newSizeQueue() *sizeQueue {
	return &sizeQueue{c: make(chan remotecommand.TerminalSize, 4), done: make(chan struct{})}
}

func (q *sizeQueue) resize(h, w uint) error {
	select {
	case q.c <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}:
	default:
	}
	return nil
}

// Next blocks until the window changes, or returns nil once the stream
// is over.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.c:
		return &s
	case <-q.done:
		return nil
	}
}

// Exec runs a command in the running container. The Pod's user runs it
// (an exec cannot change user on Kubernetes); the working directory and
// environment are set by a shell around it.
func (e *Engine) Exec(ctx context.Context, id string, o container.ExecOptions) (int, error) {
	_, p, err := e.runningPod(ctx, id)
	if err != nil {
		if o.Started != nil {
			o.Started()
		}
		return -1, err
	}
	argv := o.Argv
	if o.WorkDir != "" || len(o.Env) > 0 {
		dir := o.WorkDir
		if dir == "" {
			dir = "."
		}
		argv = append([]string{"/bin/sh", "-c", `cd -- "$0" || exit 126; exec env "$@"`, dir}, append(append([]string{}, o.Env...), o.Argv...)...)
	}
	if o.Started != nil {
		o.Started()
	}
	return e.execIn(ctx, p.Name, argv, o.Streams)
}

// Logs writes what the container's current Pod printed (stdout and
// stderr arrive as one stream, written to Stdout).
func (e *Engine) Logs(ctx context.Context, id string, o container.LogsOptions) error {
	r, err := e.getRecord(ctx, id)
	if err != nil {
		return err
	}
	if r.run() == 0 {
		return nil
	}
	p, err := e.getPod(ctx, r, r.run())
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("container logs: %s: %w", r.spec.Name, errLost)
	}
	return e.podLogs(ctx, p.Name, o.Follow, o.Tail, orDiscard(o.Stdout))
}

func (e *Engine) podLogs(ctx context.Context, pod string, follow bool, tail string, w io.Writer) error {
	lo := &corev1.PodLogOptions{Container: mainContainer, Follow: follow}
	if tail != "" && tail != "all" {
		n, err := strconv.ParseInt(tail, 10, 64)
		if err != nil {
			return fmt.Errorf("container logs: tail %q is not a number", tail)
		}
		lo.TailLines = &n
	}
	rc, err := e.cs.CoreV1().Pods(e.ns).GetLogs(pod, lo).Stream(ctx)
	if err != nil {
		return fmt.Errorf("container logs: %w", kerr(err))
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("container logs: %w", err)
	}
	return nil
}

// Attach connects streams to the container's main process, in the Pod of
// its current run, or of its next one when none runs (call it before
// Start). Without a terminal, output is the Pod's log followed from its
// start, so nothing printed before the attach is missed, and stdin goes
// through an attach of stdin alone.
func (e *Engine) Attach(ctx context.Context, id string, s container.Streams) (func() error, error) {
	r, err := e.getRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	run := r.run()
	if p, err := e.getPod(ctx, r, run); err != nil {
		return nil, err
	} else if p == nil || podEnded(p) || mainEnded(p) {
		run++
	}
	pod := podName(r.object(), run)
	done := make(chan error, 1)
	go func() { done <- e.attach(ctx, pod, s) }()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			// The stream ends with ctx: a moment for it to, so the
			// terminal is out of raw mode before the caller prints.
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
			return nil
		}
	}, nil
}

func (e *Engine) attach(ctx context.Context, pod string, s container.Streams) error {
	// Wait for the Pod to exist and its container to have started.
	for {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
		if err == nil && (p.Status.Phase == corev1.PodRunning || podEnded(p)) {
			break
		}
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return fmt.Errorf("attach: %w", kerr(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	opts := &corev1.PodAttachOptions{Container: mainContainer, Stdin: s.Stdin != nil, Stdout: s.TTY, Stderr: false, TTY: s.TTY}
	if s.TTY {
		q := newSizeQueue()
		defer close(q.done)
		restore := rawterm.Raw(ctx, s.TerminalFd, q.resize)
		defer restore()
		err := e.stream(ctx, pod, "attach", opts, remotecommand.StreamOptions{
			Stdin: s.Stdin, Stdout: orDiscard(s.Stdout), Tty: true, TerminalSizeQueue: q,
		})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("attach: %w", err)
		}
		return nil
	}
	if s.Stdin != nil {
		go func() {
			_ = e.stream(ctx, pod, "attach", opts, remotecommand.StreamOptions{Stdin: s.Stdin})
		}()
	}
	err := e.podLogs(ctx, pod, true, "", orDiscard(s.Stdout))
	if ctx.Err() != nil {
		return nil
	}
	return err
}
