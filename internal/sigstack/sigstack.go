// Package sigstack owns the process's handling of SIGINT, SIGTERM and
// SIGHUP. Code that wants to react to one of them pushes a handler and pops
// it when done; the innermost handler that asks for a signal gets it, and
// only that one: cancel a context, forward the signal to the agent's
// container, or hold it until a paused agent is thawed and then pass it on.
// A signal no handler asks for has its default effect (the process ends).
//
// Nothing else in git sandbox calls signal.Notify for these signals.
// SIGWINCH (terminal resize) is different in nature — it is not a request
// to stop and nothing else wants it — and stays with the terminal code in
// package container.
package sigstack

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
)

// Handled are the signals a Stack dispatches.
var Handled = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// Handler receives a signal. It runs on the stack's own goroutine, so it
// must not block for long; a second signal waits until it returns.
type Handler func(os.Signal)

type entry struct {
	sigs []os.Signal
	h    Handler
}

// Stack dispatches signals to the innermost handler that asks for them.
// The zero value is not usable; use New. A process has one: the package
// functions use it.
type Stack struct {
	mu       sync.Mutex
	entries  []*entry
	channels map[os.Signal]chan os.Signal
	// dispatch serialises handlers, so a handler never runs twice at once.
	dispatch sync.Mutex
}

// New returns an empty stack.
func New() *Stack {
	return &Stack{channels: map[os.Signal]chan os.Signal{}}
}

var std = New()

// Push installs h as the innermost handler of sigs (all of Handled when
// none are named) and returns the function that removes it again. Popping
// out of order is allowed: the entry is removed wherever it is. A signal
// the process was started ignoring (as under nohup) stays ignored.
func (s *Stack) Push(h Handler, sigs ...os.Signal) (pop func()) {
	if len(sigs) == 0 {
		sigs = Handled
	}
	e := &entry{sigs: slices.Clone(sigs), h: h}
	s.mu.Lock()
	s.entries = append(s.entries, e)
	for _, sig := range e.sigs {
		// A signal the process was started ignoring (nohup) stays ignored.
		if _, ok := s.channels[sig]; !ok && !signal.Ignored(sig) {
			ch := make(chan os.Signal, 4)
			s.channels[sig] = ch
			signal.Notify(ch, sig)
			go s.loop(ch)
		}
	}
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.remove(e) }) }
}

func (s *Stack) remove(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.entries, e); i >= 0 {
		s.entries = slices.Delete(s.entries, i, i+1)
	}
	// A signal nobody asks for any more gets its default effect again.
	for _, sig := range e.sigs {
		if s.handler(sig) == nil {
			if ch, ok := s.channels[sig]; ok {
				signal.Stop(ch)
				close(ch)
				delete(s.channels, sig)
			}
		}
	}
}

// handler returns the innermost handler of sig; the caller holds mu.
func (s *Stack) handler(sig os.Signal) Handler {
	for i := len(s.entries) - 1; i >= 0; i-- {
		if slices.Contains(s.entries[i].sigs, sig) {
			return s.entries[i].h
		}
	}
	return nil
}

func (s *Stack) loop(ch chan os.Signal) {
	for sig := range ch {
		s.Deliver(sig)
	}
}

// Deliver hands sig to the innermost handler that asks for it, as if the
// process had received it. With no such handler, sig has its default
// effect: it is sent to the process again with no handler in the way.
func (s *Stack) Deliver(sig os.Signal) {
	s.dispatch.Lock()
	defer s.dispatch.Unlock()
	s.mu.Lock()
	h := s.handler(sig)
	s.mu.Unlock()
	if h != nil {
		h(sig)
		return
	}
	if ss, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), ss)
	}
}

// NotifyContext returns a copy of ctx that is cancelled when one of sigs
// (all of Handled when none are named) arrives while it is the innermost
// handler, and the function that removes the handler and releases the
// context. The signal is consumed: outer handlers do not see it.
func (s *Stack) NotifyContext(ctx context.Context, sigs ...os.Signal) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	pop := s.Push(func(os.Signal) { cancel() }, sigs...)
	return cctx, func() { pop(); cancel() }
}

// Hold keeps sigs (all of Handled when none are named) from acting until
// release is called; release removes the hold and passes on what arrived
// meanwhile, each signal once, to the next handler out (or to its default
// effect).
func (s *Stack) Hold(sigs ...os.Signal) (release func()) {
	var mu sync.Mutex
	var held []os.Signal
	pop := s.Push(func(sig os.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(held, sig) {
			held = append(held, sig)
		}
	}, sigs...)
	var once sync.Once
	return func() {
		once.Do(func() {
			pop()
			mu.Lock()
			pending := held
			held = nil
			mu.Unlock()
			for _, sig := range pending {
				s.Deliver(sig)
			}
		})
	}
}

// Push installs h on the process's stack; see Stack.Push.
func Push(h Handler, sigs ...os.Signal) (pop func()) { return std.Push(h, sigs...) }

// NotifyContext is Stack.NotifyContext on the process's stack.
func NotifyContext(ctx context.Context, sigs ...os.Signal) (context.Context, context.CancelFunc) {
	return std.NotifyContext(ctx, sigs...)
}

// Hold is Stack.Hold on the process's stack.
func Hold(sigs ...os.Signal) (release func()) { return std.Hold(sigs...) }
