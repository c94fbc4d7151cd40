package e2e

import (
	"strings"
	"testing"
)

// TestAttackForecastPaths: file names the agents choose reach the conflict
// forecast's output; a control sequence in one is printed as text by
// conflicts and ps, never sent to the terminal.
func TestAttackForecastPaths(t *testing.T) {
	e := NewEnv(t)
	evil := `printf "$1" > "$(printf 'x\033]0;pwned\007\033[2J.txt')"`
	e.MustSandbox("start", "ea", "--agent", "shell", "--", "sh", "-c", evil, "sh", "A\n")
	e.MustSandbox("start", "eb", "--agent", "shell", "--", "sh", "-c", evil, "sh", "B\n")
	for _, args := range [][]string{{"conflicts"}, {"ps"}} {
		r := e.MustSandbox(args...)
		out := r.Stdout + r.Stderr
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s printed a raw control character: %q", args[0], out)
		}
		if args[0] == "conflicts" && !strings.Contains(out, `x\x1b]0;pwned\x07\x1b[2J.txt`) {
			t.Errorf("conflicts does not name the escaped path: %q", out)
		}
		if args[0] == "ps" && !strings.Contains(out, "eb") {
			t.Errorf("ps: %q", out)
		}
	}
}
