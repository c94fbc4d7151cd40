package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tmux drives a terminal program the way a person would: a private tmux
// server, 80×24, keys in, screen out.
type tmux struct {
	t    *testing.T
	e    *Env
	sock string
}

func newTmux(t *testing.T, e *Env) *tmux {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux is needed to drive the dashboard: %v", err)
	}
	x := &tmux{t: t, e: e, sock: filepath.Join(e.Root, "tmux.sock")}
	x.run("-f", "/dev/null", "new-session", "-d", "-s", "dash", "-x", "80", "-y", "24", "-c", e.Repo, "sh")
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", x.sock, "kill-server").Run() })
	return x
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", x.sock}, args...)...)
	cmd.Env = append(append([]string{}, x.e.vars...), "TERM=xterm-256color", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (x *tmux) keys(keys ...string) { x.run(append([]string{"send-keys", "-t", "dash"}, keys...)...) }
func (x *tmux) screen() string      { return x.run("capture-pane", "-p", "-t", "dash") }

func (x *tmux) waitScreen(timeout time.Duration, what string, ok func(string) bool) string {
	x.t.Helper()
	var s string
	deadline := time.Now().Add(timeout)
	for {
		s = x.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("timed out after %s waiting for %s; screen:\n%s", timeout, what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// row is the screen line of a branch.
func row(screen, branch string) string {
	for _, l := range strings.Split(screen, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == branch {
			return l
		}
	}
	return ""
}

// TestDashboard: the dashboard lists three sandboxes in an 80×24 terminal,
// shows an agent's exit within 2 s, lands one with l and y, and leaves the
// terminal as it found it when q quits.
func TestDashboard(t *testing.T) {
	e := NewEnv(t)
	e.MustSandbox("start", "d1", "--agent", "shell", "--", "sh", "-c", "echo one > one.txt")
	for _, b := range []string{"d2", "d3"} {
		e.MustSandbox("start", b, "-d", "--agent", "shell", "--", "sh", "-c", `while [ ! -f stop ]; do sleep 0.2; done`)
	}
	x := newTmux(t, e)
	x.keys("git sandbox dash", "Enter")
	s := x.waitScreen(30*time.Second, "three sandboxes", func(s string) bool {
		return row(s, "d1") != "" && strings.Contains(row(s, "d2"), "running") && strings.Contains(row(s, "d3"), "running")
	})
	for _, l := range strings.Split(s, "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("line wider than 80 columns: %q", l)
		}
	}
	// NO_COLOR: the selection in reverse video, no colours.
	// (tmux writes 39 and 49, the default colours, when a style ends.)
	if esc := x.run("capture-pane", "-p", "-e", "-t", "dash"); regexp.MustCompile(`\x1b\[([0-9;]*;)?(3[0-7]|4[0-7]|9[0-7]|38|48)[m;]`).MatchString(esc) || !strings.Contains(esc, "\x1b[7m") {
		t.Errorf("under NO_COLOR the screen has colours or no selection: %q", esc)
	}
	if !strings.Contains(row(s, "d1"), "exited(0)") {
		t.Errorf("d1 row: %q", row(s, "d1"))
	}

	// An exit shows within 2 s of the daemon reporting it.
	must(t, os.WriteFile(filepath.Join(e.Worktree("d2"), "stop"), nil, 0o644))
	if out, err := exec.Command("docker", "wait", e.PsOf("d2").Container).CombinedOutput(); err != nil {
		t.Fatalf("docker wait: %v %s", err, out)
	}
	x.waitScreen(2*time.Second, "d2's exit", func(s string) bool { return strings.Contains(row(s, "d2"), "exited(0)") })

	// Land d1 (the first row): l asks, y lands the tree shown.
	x.keys("l")
	x.waitScreen(5*time.Second, "the land question", func(s string) bool { return strings.Contains(s, "land d1 onto main") })
	x.keys("y")
	x.waitScreen(60*time.Second, "d1 to be landed and gone", func(s string) bool { return row(s, "d1") == "" && row(s, "d2") != "" })
	if log := e.Git("log", "-1", "--format=%B", "main"); !strings.Contains(log, "Sandbox: d1") {
		t.Errorf("main's newest commit is not d1's land:\n%s", log)
	}
	if got := e.Git("show", "main:one.txt"); got != "one" {
		t.Errorf("one.txt on main = %q", got)
	}

	// q quits: the shell's screen is back, out of the alternate screen,
	// and the terminal is in its normal (cooked, echoing) mode.
	x.keys("q")
	x.waitScreen(10*time.Second, "the dashboard to quit", func(string) bool {
		return strings.TrimSpace(x.run("display-message", "-p", "-t", "dash", "#{alternate_on} #{pane_current_command}")) == "0 sh"
	})
	stty := filepath.Join(e.Root, "stty.txt")
	x.keys("stty -a > "+stty, "Enter")
	Eventually(t, 10*time.Second, "stty to run", func() bool {
		b, err := os.ReadFile(stty)
		return err == nil && strings.Contains(string(b), "icanon")
	})
	modes := " " + strings.Join(strings.Fields(readFile(stty)), " ") + " "
	for _, want := range []string{" icanon ", " echo ", " icrnl ", " opost "} {
		if !strings.Contains(modes, want) {
			t.Errorf("terminal left without %s after quitting:\n%s", want, readFile(stty))
		}
	}
}
