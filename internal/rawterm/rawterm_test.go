package rawterm

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/creack/pty"
)

// termios reads fd's terminal settings.
func termios(t *testing.T, fd uintptr) syscall.Termios {
	t.Helper()
	var tio syscall.Termios
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&tio))); errno != 0 {
		t.Fatalf("TCGETS: %v", errno)
	}
	return tio
}

func cooked(tio syscall.Termios) bool {
	return tio.Lflag&syscall.ECHO != 0 && tio.Lflag&syscall.ICANON != 0
}

type size struct{ h, w uint }

// TestRawFollowsTheWindow: on a terminal, Raw turns echo and line editing
// off, passes the window's size on at once and again on every SIGWINCH,
// and its undo puts the terminal back as it was.
func TestRawFollowsTheWindow(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	if !cooked(termios(t, tty.Fd())) {
		t.Fatal("a new terminal is not in cooked mode")
	}
	sizes := make(chan size, 8)
	undo := Raw(context.Background(), int(tty.Fd()), func(h, w uint) error {
		sizes <- size{h, w}
		return nil
	})
	if tio := termios(t, tty.Fd()); tio.Lflag&(syscall.ECHO|syscall.ICANON) != 0 {
		t.Errorf("Raw left echo or line editing on: lflag %#x", tio.Lflag)
	}
	if got := next(t, sizes); got != (size{30, 100}) {
		t.Errorf("first size %v, want 30x100", got)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	if got := next(t, sizes); got != (size{40, 120}) {
		t.Errorf("size after SIGWINCH %v, want 40x120", got)
	}
	undo()
	if !cooked(termios(t, tty.Fd())) {
		t.Error("the undo did not restore the terminal")
	}
	// After the undo the window is no longer followed.
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-sizes:
		t.Errorf("a size was passed on after the undo: %v", s)
	case <-time.After(100 * time.Millisecond):
	}
}

func next(t *testing.T, sizes <-chan size) size {
	t.Helper()
	select {
	case s := <-sizes:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no size was passed on")
	}
	return size{}
}

// TestRawOnAPipe: a file that is not a terminal is left alone and has no
// size to pass on; the undo still works, also after the context ended.
func TestRawOnAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	called := false
	undo := Raw(ctx, int(r.Fd()), func(h, w uint) error {
		called = true
		return nil
	})
	cancel()
	undo()
	if called {
		t.Error("a size was passed on for a pipe")
	}
}
