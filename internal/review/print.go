package review

import (
	"fmt"
	"io"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// WriteFlags lists the paths to look at twice, in bold yellow with color,
// then a blank line; nothing when there are none.
func WriteFlags(w io.Writer, flags []Flag, color bool) {
	if len(flags) == 0 {
		return
	}
	on, off := "", ""
	if color {
		on, off = "\x1b[1;33m", "\x1b[0m"
	}
	fmt.Fprintf(w, "%slook at these twice:%s\n", on, off)
	for _, f := range flags {
		fmt.Fprintf(w, "  %s! %s%s: %s\n", on, termsafe.String(f.Path), off, termsafe.String(f.Reason))
	}
	fmt.Fprintln(w)
}

// WriteCommits lists the agent's commits (total of them, the first
// len(commits) named): land --merge keeps each of them, with every file
// it ever held, not only the change the diff shows.
func WriteCommits(w io.Writer, commits []Commit, total int) {
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "land --merge would also add the agent's %d commit(s):\n", total)
	for _, c := range commits {
		fmt.Fprintf(w, "  %s %s\n", termsafe.String(c.ID), termsafe.String(c.Subject))
	}
	if total > len(commits) {
		fmt.Fprintf(w, "  … and %d more\n", total-len(commits))
	}
	fmt.Fprintln(w)
}
