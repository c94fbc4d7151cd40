// Package ui owns what git sandbox says to the person at the terminal, and
// how. Every package that has something to say takes a *Printer; none
// writes messages to a stream of its own.
//
// The rules, for every command:
//
//   - Results go to stdout; progress, warnings and errors go to the
//     printer's stream (stderr).
//   - Messages are prefixed "git sandbox: ", lowercase, with no trailing
//     period. A failure ends with "git sandbox: error: …" followed by
//     "hint: …" lines that say what to do next.
//   - Hints name commands as the user types them: git sandbox land, never
//     git-sandbox land.
//   - Anything the agent or a repository could have chosen (branch names,
//     file names, commit messages, prompts, commands from .sandbox.toml) is
//     passed through termsafe.String by the caller, so it stays on one line;
//     the printer passes every message through termsafe.Text as well, so no
//     escape sequence in a message ever reaches the terminal.
//   - Colour only on a terminal, and never when NO_COLOR is set
//     (https://no-color.org).
//   - GIT_SANDBOX_TRACE turns on trace lines ("trace: …"): the git commands
//     run and a Kubernetes engine's API requests, and how long they took;
//     the steps of a start; the pauses of an agent during snapshots.
//
// The environment is read once, by FromEnv.
package ui

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Prefix starts every message line.
const Prefix = "git sandbox: "

// Options configure a Printer.
type Options struct {
	// NoColor turns colour off even on a terminal.
	NoColor bool
	// Trace turns trace lines on.
	Trace bool
}

// Printer writes messages to one stream. It is safe for concurrent use:
// each message is written whole.
type Printer struct {
	mu   sync.Mutex
	w    io.Writer
	opts Options
}

// New returns a printer that writes to w.
func New(w io.Writer, o Options) *Printer {
	if w == nil {
		w = io.Discard
	}
	return &Printer{w: w, opts: o}
}

// FromEnv returns a printer that writes to w, configured from the
// environment: NO_COLOR (set, even empty, turns colour off) and
// GIT_SANDBOX_TRACE (non-empty turns trace lines on).
func FromEnv(w io.Writer) *Printer {
	_, noColor := os.LookupEnv("NO_COLOR")
	return New(w, Options{NoColor: noColor, Trace: os.Getenv("GIT_SANDBOX_TRACE") != ""})
}

// Discard returns a printer that prints nothing.
func Discard() *Printer { return New(io.Discard, Options{NoColor: true}) }

func (p *Printer) line(prefix, format string, args []any) {
	msg := termsafe.Text(fmt.Sprintf(format, args...))
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s%s\n", prefix, strings.TrimRight(msg, "\n"))
}

// Infof prints a message: what happened, or what is happening now.
func (p *Printer) Infof(format string, args ...any) { p.line(Prefix, format, args) }

// Warnf prints a warning: something went wrong or was ignored, and the
// command goes on.
func (p *Printer) Warnf(format string, args ...any) { p.line(Prefix+"warning: ", format, args) }

// Hintf prints a hint line: what to do next.
func (p *Printer) Hintf(format string, args ...any) { p.line("hint: ", format, args) }

// Error prints the error a command ends with: "git sandbox: error: …" and,
// for a user error, its hints. An error that carries only an exit status
// (usererr.ExitStatus) prints nothing: the command said everything.
func (p *Printer) Error(err error) {
	var es usererr.ExitStatus
	if errors.As(err, &es) {
		return
	}
	if ue, ok := usererr.As(err); ok {
		p.line(Prefix+"error: ", "%s", []any{ue.Msg})
		for _, h := range ue.Hints {
			p.Hintf("%s", h)
		}
		return
	}
	p.line(Prefix+"error: ", "%s", []any{err.Error()})
}

// Tracing reports whether trace lines are on.
func (p *Printer) Tracing() bool { return p.opts.Trace }

// Tracef prints a trace line when tracing is on.
func (p *Printer) Tracef(format string, args ...any) {
	if p.opts.Trace {
		p.line("trace: ", format, args)
	}
}

// Writer is the printer's stream, for output that is passed through as it
// comes (an image build's progress, the output of setup and verify
// commands). Whoever writes agent-chosen bytes to it escapes them first or
// says why not.
func (p *Printer) Writer() io.Writer { return lockedWriter{p} }

type lockedWriter struct{ p *Printer }

func (l lockedWriter) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.p.w.Write(b)
}

// File returns the printer's stream as a file when it is one (to redraw
// progress lines on a terminal), else nil.
func (p *Printer) File() *os.File {
	f, _ := p.w.(*os.File)
	return f
}

// Color reports whether output written to w may use colour: only when w is
// a terminal and NO_COLOR is not set.
func (p *Printer) Color(w io.Writer) bool {
	return !p.opts.NoColor && IsTerminal(w)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// TerminalFd returns w's file descriptor when w is a terminal, for output
// that redraws progress in place (image builds); ok is false otherwise,
// and such output is then kept to one line per step.
func TerminalFd(w io.Writer) (fd uintptr, ok bool) {
	if f, isFile := w.(*os.File); isFile && IsTerminal(f) {
		return f.Fd(), true
	}
	return 0, false
}
