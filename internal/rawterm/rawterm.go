// Package rawterm owns the local terminal during an attached session:
// raw mode while it lasts, and the remote terminal's size kept in step
// with the window (SIGWINCH). Every engine's attach and exec use it, so a
// terminal behaves the same whichever engine the sandbox is on.
package rawterm

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"
)

// Raw puts fd in raw mode, keeps the remote terminal's size in step with
// the window through resize (height, width), and returns the function
// that undoes both. A fd that is not a terminal is left as it is; its
// size is still passed on when it has one.
func Raw(ctx context.Context, fd int, resize func(h, w uint) error) func() {
	state, err := term.MakeRaw(fd)
	if err != nil {
		state = nil
	}
	sync1 := func() {
		if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
			_ = resize(uint(h), uint(w))
		}
	}
	// Listen before reading the size: a resize between the two would
	// otherwise be lost (SIGWINCH is ignored until Notify).
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	sync1()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-winch:
				sync1()
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(stop)
		wg.Wait()
		if state != nil {
			_ = term.Restore(fd, state)
		}
	}
}
