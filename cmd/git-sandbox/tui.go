package main

// Output rules, for every command, are those of package ui: results go to
// stdout, and every message, warning, error and hint goes through the
// App's printer (app.UI), which writes them to stderr.

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// terminalIO describes the process's standard streams.
func terminalIO(stdin io.Reader, stdout, stderr io.Writer) sandbox.IO {
	io := sandbox.IO{Stdin: stdin, Stdout: stdout, Stderr: stderr, StdinFd: -1}
	if f, ok := stdin.(*os.File); ok {
		io.StdinFd = int(f.Fd())
		if term.IsTerminal(io.StdinFd) {
			io.StdinIsTerminal = true
		} else if fi, err := f.Stat(); err == nil {
			mode := fi.Mode()
			io.StdinIsPipe = mode&os.ModeNamedPipe != 0 || mode.IsRegular() || mode&os.ModeSocket != 0
		}
	}
	return io
}

// table prints rows with columns padded to their widest cell.
func table(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			if n := len([]rune(c)); n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && ui.IsTerminal(f)
}
