package main

// Output rules, for every command:
//
//   - Results go to stdout; progress, warnings and errors go to stderr.
//   - Messages are prefixed "git sandbox: ", lowercase, with no trailing
//     period. A failure ends with "git sandbox: error: …" followed by
//     "hint: …" lines that say what to do next.
//   - Hints name commands as the user types them: git sandbox land, never
//     git-sandbox land.
//   - Anything the agent could have chosen (branch names, file names, commit
//     messages, prompts) is printed through termsafe, so escape sequences
//     show as text instead of acting on the terminal.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

const prefix = "git sandbox: "

func printError(w io.Writer, err error) {
	var es usererr.ExitStatus
	if errors.As(err, &es) {
		return
	}
	if ue, ok := usererr.As(err); ok {
		fmt.Fprintf(w, "%serror: %s\n", prefix, termsafe.Text(ue.Msg))
		for _, h := range ue.Hints {
			fmt.Fprintf(w, "hint: %s\n", termsafe.Text(h))
		}
		return
	}
	fmt.Fprintf(w, "%serror: %s\n", prefix, termsafe.Text(err.Error()))
}

func warnf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, prefix+"warning: "+format+"\n", args...)
}

func infof(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, prefix+format+"\n", args...)
}

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

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
