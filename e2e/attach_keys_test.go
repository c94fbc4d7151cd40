package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyAttach runs git sandbox attach BRANCH on a pseudo-terminal of its own
// (its controlling terminal, as a user's shell gives it one).
type ptyAttach struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	out  *ptyOutput
	done chan error
}

func (e *Env) attachOnPty(t *testing.T, branch string) *ptyAttach {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "attach", branch)
	cmd.Dir = e.Repo
	cmd.Env = append(e.vars, "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	must(t, err)
	a := &ptyAttach{t: t, cmd: cmd, ptmx: ptmx, out: &ptyOutput{}, done: make(chan error, 1)}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.MultiWriter(a.out, answering{ptmx}), ptmx)
		close(copied)
	}()
	go func() {
		err := cmd.Wait()
		// All it printed is read before the end is reported (the pty
		// reads EIO once its last holder has closed it).
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
		}
		a.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		ptmx.Close()
	})
	return a
}

// answering stands for a terminal emulator in front of the pty: it
// answers the queries a program writes to learn about the terminal (the
// background colour, OSC 11; the cursor's place, DSR), as xterm does. A
// query nobody answers makes the asker wait and read the keys typed
// meanwhile as the answer.
type answering struct{ pty *os.File }

func (a answering) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("\x1b]11;?")) {
		_, _ = a.pty.Write([]byte("\x1b]11;rgb:0000/0000/0000\x1b\\"))
	}
	if bytes.Contains(b, []byte("\x1b[6n")) {
		_, _ = a.pty.Write([]byte("\x1b[1;1R"))
	}
	return len(b), nil
}

// typeKeys writes keys to the terminal.
func (a *ptyAttach) typeKeys(keys string) {
	a.t.Helper()
	_, err := a.ptmx.Write([]byte(keys))
	must(a.t, err)
}

// waitOutput waits until the terminal has shown s.
func (a *ptyAttach) waitOutput(what, s string) {
	a.t.Helper()
	EventuallyOr(a.t, 60*time.Second, what, func() bool { return strings.Contains(a.out.String(), s) }, a.out.String)
}

// exited waits for attach to end and returns its exit code (-1: it did
// not end within the timeout).
func (a *ptyAttach) exited(timeout time.Duration) int {
	select {
	case err := <-a.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			a.t.Fatalf("attach: %v", err)
		}
		return 0
	case <-time.After(timeout):
		return -1
	}
}

// TestAttachDetachKeys: attached from a terminal to an agent with one,
// Ctrl-P Ctrl-Q ends attach with status 0 and says so; the agent runs on
// (ps), and attach connects to it again.
func TestAttachDetachKeys(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// The shell agent with nothing to run is an interactive shell: with
	// -d it gets a terminal.
	e.MustSandbox("start", "keys", "-d", "--agent", "shell", "--network", "none")
	for round := 1; round <= 2; round++ {
		a := e.attachOnPty(t, "keys")
		// What is typed reaches the shell once attach is connected.
		EventuallyOr(t, 60*time.Second, "the shell to answer", func() bool {
			a.typeKeys(fmt.Sprintf("echo round-$((40+%d))\r", round))
			time.Sleep(500 * time.Millisecond)
			return strings.Contains(a.out.String(), fmt.Sprintf("round-%d", 40+round))
		}, a.out.String)
		a.typeKeys("\x10\x11") // Ctrl-P Ctrl-Q
		if code := a.exited(30 * time.Second); code != 0 {
			t.Fatalf("attach after Ctrl-P Ctrl-Q: exit %d\n%s", code, a.out.String())
		}
		if s := a.out.String(); !strings.Contains(s, "detached from keys; it runs on") {
			t.Errorf("attach did not say it detached:\n%s", s)
		}
		// Paused is running too: a snapshot reads its files this instant.
		if st := e.PsOf("keys").State; st != "running" && st != "paused" {
			t.Fatalf("after Ctrl-P Ctrl-Q the sandbox is %s, want running", st)
		}
	}
	e.MustSandbox("rm", "--force", "keys")
}

// TestAttachCtrlC: Ctrl-C typed while attached to an agent with a
// terminal reaches the agent's terminal (its foreground program gets
// SIGINT) and attach stays; attached to an agent without one, Ctrl-C ends
// attach with status 0, sends the agent nothing, and it runs on.
func TestAttachCtrlC(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "tty", "-d", "--agent", "shell", "--network", "none")
	a := e.attachOnPty(t, "tty")
	EventuallyOr(t, 60*time.Second, "the shell to answer", func() bool {
		a.typeKeys("echo ready-$((6*7))\r")
		time.Sleep(500 * time.Millisecond)
		return strings.Contains(a.out.String(), "ready-42")
	}, a.out.String)
	a.typeKeys(`sh -c 'trap "echo sigint-$((2*3)); exit 3" INT; echo wait-$((1+1)); while :; do sleep 0.1; done'; echo "status $?"` + "\r")
	a.waitOutput("the program to run", "wait-2")
	a.typeKeys("\x03") // Ctrl-C
	a.waitOutput("the program to get SIGINT", "sigint-6")
	a.waitOutput("the shell to go on", "status 3")
	if code := a.exited(2 * time.Second); code != -1 {
		t.Fatalf("attach ended (exit %d) on Ctrl-C to an agent with a terminal:\n%s", code, a.out.String())
	}
	if st := e.PsOf("tty").State; st != "running" {
		t.Errorf("after Ctrl-C the agent with a terminal is %s, want running", st)
	}
	a.typeKeys("\x10\x11")
	if code := a.exited(30 * time.Second); code != 0 {
		t.Errorf("attach after Ctrl-P Ctrl-Q: exit %d", code)
	}

	// Without a terminal: the agent traps SIGINT, which must not come.
	script := `trap 'echo "agent got SIGINT"; exit 3' INT; while :; do echo tick; sleep 0.2; done`
	e.MustSandbox("start", "notty", "-d", "--agent", "shell", "--network", "none", "--", "sh", "-c", script)
	b := e.attachOnPty(t, "notty")
	b.waitOutput("the agent's output", "tick")
	b.typeKeys("\x03")
	if code := b.exited(30 * time.Second); code != 0 {
		t.Fatalf("attach on Ctrl-C to an agent without a terminal: exit %d\n%s", code, b.out.String())
	}
	time.Sleep(time.Second)
	if st := e.PsOf("notty").State; st != "running" {
		t.Errorf("after Ctrl-C the agent without a terminal is %s, want running", st)
	}
	if logs := e.MustSandbox("logs", "notty"); strings.Contains(logs.Stdout, "SIGINT") {
		t.Errorf("Ctrl-C reached the agent without a terminal:\n%s", logs)
	}
	e.MustSandbox("rm", "--force", "tty")
	e.MustSandbox("rm", "--force", "notty")
}
