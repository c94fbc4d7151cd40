package sigstack

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is a handler that remembers what it got.
type recorder struct {
	mu   sync.Mutex
	got  []os.Signal
	note chan os.Signal
}

func newRecorder() *recorder { return &recorder{note: make(chan os.Signal, 8)} }

func (r *recorder) handle(sig os.Signal) {
	r.mu.Lock()
	r.got = append(r.got, sig)
	r.mu.Unlock()
	r.note <- sig
}

func (r *recorder) signals() []os.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// wait returns the next signal the recorder gets, failing after a while.
func (r *recorder) wait(t *testing.T) os.Signal {
	t.Helper()
	select {
	case sig := <-r.note:
		return sig
	case <-time.After(5 * time.Second):
		t.Fatal("no signal arrived")
		return nil
	}
}

func raise(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
}

// settle gives a signal that should not arrive the time to do so.
func settle() { time.Sleep(100 * time.Millisecond) }

func TestInnermostHandlerDecides(t *testing.T) {
	s := New()
	outer, inner := newRecorder(), newRecorder()
	popOuter := s.Push(outer.handle)
	defer popOuter()
	popInner := s.Push(inner.handle)

	raise(t, syscall.SIGHUP)
	if got := inner.wait(t); got != syscall.SIGHUP {
		t.Fatalf("inner got %v", got)
	}
	settle()
	if got := outer.signals(); len(got) != 0 {
		t.Errorf("the outer handler got %v while an inner one handled it", got)
	}

	popInner()
	raise(t, syscall.SIGHUP)
	if got := outer.wait(t); got != syscall.SIGHUP {
		t.Fatalf("outer got %v after the inner handler was popped", got)
	}
	if got := inner.signals(); len(got) != 1 {
		t.Errorf("the popped handler got %v", got)
	}
}

func TestSignalsAnInnerHandlerDoesNotAskForGoOut(t *testing.T) {
	s := New()
	outer, inner := newRecorder(), newRecorder()
	defer s.Push(outer.handle, syscall.SIGHUP, syscall.SIGTERM)()
	defer s.Push(inner.handle, syscall.SIGTERM)()

	raise(t, syscall.SIGHUP)
	if got := outer.wait(t); got != syscall.SIGHUP {
		t.Fatalf("outer got %v", got)
	}
	raise(t, syscall.SIGTERM)
	if got := inner.wait(t); got != syscall.SIGTERM {
		t.Fatalf("inner got %v", got)
	}
	settle()
	if got := outer.signals(); !slices.Equal(got, []os.Signal{syscall.SIGHUP}) {
		t.Errorf("outer got %v, want only SIGHUP", got)
	}
}

func TestPopOutOfOrder(t *testing.T) {
	s := New()
	a, b := newRecorder(), newRecorder()
	popA := s.Push(a.handle)
	popB := s.Push(b.handle)
	defer popB()
	popA()
	popA() // twice is harmless
	raise(t, syscall.SIGHUP)
	if got := b.wait(t); got != syscall.SIGHUP {
		t.Fatalf("b got %v", got)
	}
}

func TestNotifyContext(t *testing.T) {
	s := New()
	outer := newRecorder()
	defer s.Push(outer.handle)()
	ctx, stop := s.NotifyContext(context.Background(), syscall.SIGHUP)
	defer stop()
	raise(t, syscall.SIGHUP)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context was not cancelled by SIGHUP")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("ctx.Err() = %v", ctx.Err())
	}
	settle()
	if got := outer.signals(); len(got) != 0 {
		t.Errorf("the signal went on to the outer handler too: %v", got)
	}
	stop()
	raise(t, syscall.SIGHUP)
	if got := outer.wait(t); got != syscall.SIGHUP {
		t.Fatalf("outer got %v after stop", got)
	}
}

func TestHoldRedeliversOnRelease(t *testing.T) {
	s := New()
	outer := newRecorder()
	defer s.Push(outer.handle)()
	release := s.Hold()
	raise(t, syscall.SIGTERM)
	raise(t, syscall.SIGHUP)
	raise(t, syscall.SIGTERM)
	settle()
	if got := outer.signals(); len(got) != 0 {
		t.Fatalf("signals went through a hold: %v", got)
	}
	release()
	got := []os.Signal{outer.wait(t), outer.wait(t)}
	if !slices.Contains(got, os.Signal(syscall.SIGTERM)) || !slices.Contains(got, os.Signal(syscall.SIGHUP)) {
		t.Errorf("released %v; want SIGTERM and SIGHUP, once each", got)
	}
	settle()
	if got := outer.signals(); len(got) != 2 {
		t.Errorf("outer got %v", got)
	}
	release() // twice is harmless
}

func TestHoldWithNothingHeld(t *testing.T) {
	s := New()
	outer := newRecorder()
	defer s.Push(outer.handle)()
	s.Hold()()
	settle()
	if got := outer.signals(); len(got) != 0 {
		t.Errorf("an empty hold delivered %v", got)
	}
}

// TestUnhandledSignalHasItsDefaultEffect runs a child process (this test
// binary) that pushes and pops a handler and then receives SIGTERM: with
// nothing on the stack, it must die of it.
func TestUnhandledSignalHasItsDefaultEffect(t *testing.T) {
	if os.Getenv("SIGSTACK_CHILD") == "1" {
		s := New()
		r := newRecorder()
		pop := s.Push(r.handle, syscall.SIGTERM)
		raise(t, syscall.SIGTERM)
		r.wait(t)
		pop()
		raise(t, syscall.SIGTERM)
		time.Sleep(5 * time.Second)
		os.Exit(0) // not reached when the signal acts
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnhandledSignalHasItsDefaultEffect$")
	cmd.Env = append(os.Environ(), "SIGSTACK_CHILD=1")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the child was not killed: %v", err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("the child ended with %v, want killed by SIGTERM", err)
	}
}

// TestReleaseWithNoHandlerLeft: a held signal released with no
// handler left has the effect it would have had.
func TestReleaseWithNoHandlerLeft(t *testing.T) {
	if os.Getenv("SIGSTACK_CHILD") == "2" {
		s := New()
		release := s.Hold(syscall.SIGTERM)
		raise(t, syscall.SIGTERM)
		settle()
		release()
		time.Sleep(5 * time.Second)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReleaseWithNoHandlerLeft$")
	cmd.Env = append(os.Environ(), "SIGSTACK_CHILD=2")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the child was not killed: %v", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("the child ended with %v, want killed by SIGTERM", err)
	}
}
