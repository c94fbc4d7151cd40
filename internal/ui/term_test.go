package ui

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// terminal is a pseudo-terminal: tty is what a printer writes to, and
// everything written there is collected from its other side.
type terminal struct {
	tty  *os.File
	mu   sync.Mutex
	seen bytes.Buffer
	more chan struct{}
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	term := &terminal{tty: tty, more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			term.mu.Lock()
			term.seen.Write(b[:n])
			term.mu.Unlock()
			select {
			case term.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		ptmx.Close()
		<-done
	})
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.seen.String()
}

// waitFor waits until the terminal has shown s.
func (term *terminal) waitFor(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if out := term.output(); strings.Contains(out, s) {
			return out
		}
		select {
		case <-term.more:
		case <-deadline:
			t.Fatalf("the terminal never showed %q; it showed %q", s, term.output())
		}
	}
}

// On a terminal a step is one line redrawn in place with the time taken
// and the bytes counted, cleared when the step ends.
func TestStepOnATerminal(t *testing.T) {
	term := newTerminal(t)
	p := New(term.tty, Options{})
	s := p.Step("copying %s", "img\x1b[2J")
	term.waitFor(t, "\r\x1b[Kgit sandbox: copying img\\x1b[2J … 0.")
	s.Add(1500)
	s.Add(500)
	if s.Bytes() != 2000 {
		t.Errorf("Bytes = %d, want 2000", s.Bytes())
	}
	// The next redraw (every second) shows the bytes beside the time.
	term.waitFor(t, "git sandbox: copying img\\x1b[2J … 2kB, 1.")
	s.Done("copied %s", "img")
	out := term.waitFor(t, "git sandbox: copied img (")
	if !strings.Contains(out, "\r\x1b[Kgit sandbox: copied img (") {
		t.Errorf("the step's line was not cleared before the last line: %q", out)
	}
	// Ending twice is harmless; nothing more is drawn.
	s.Fail()
	before := term.output()
	p.Infof("after")
	if out := term.waitFor(t, "after"); strings.Count(out, "copying") != strings.Count(before, "copying") {
		t.Errorf("the step drew again after it ended: %q", out)
	}
}

func TestTerminalDetection(t *testing.T) {
	term := newTerminal(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if fd, ok := TerminalFd(term.tty); !ok || fd != term.tty.Fd() {
		t.Errorf("TerminalFd(tty) = %d, %v", fd, ok)
	}
	for name, w := range map[string]io.Writer{"file": f, "buffer": &buf} {
		if _, ok := TerminalFd(w); ok {
			t.Errorf("TerminalFd(%s) says it is a terminal", name)
		}
	}
	tests := []struct {
		name    string
		noColor bool
		w       *os.File
		want    bool
	}{
		{"a terminal", false, term.tty, true},
		{"a terminal under NO_COLOR", true, term.tty, false},
		{"a file", false, f, false},
	}
	for _, tt := range tests {
		if got := New(nil, Options{NoColor: tt.noColor}).Color(tt.w); got != tt.want {
			t.Errorf("Color(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if New(term.tty, Options{}).File() != term.tty || New(&buf, Options{}).File() != nil {
		t.Error("File is the printer's stream only when it is a file")
	}
	if Discard().Color(term.tty) || Discard().Tracing() {
		t.Error("Discard colours or traces")
	}
}

// TestWriterIsThePrintersStream: bytes written through Writer arrive as
// they are, between whole messages.
func TestWriterIsThePrintersStream(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, Options{NoColor: true})
	p.Infof("building")
	if _, err := p.Writer().Write([]byte("step 1/3\n")); err != nil {
		t.Fatal(err)
	}
	p.Infof("built")
	if want := "git sandbox: building\nstep 1/3\ngit sandbox: built\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	Discard().Infof("nothing")
	Discard().Writer().Write([]byte("nothing"))
}
