package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyOutput collects what a pseudo-terminal prints.
type ptyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (p *ptyOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *ptyOutput) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// TestAttachedStartIsARealTerminal runs start from a pseudo-terminal: the
// agent gets a TTY of the window's size, follows a resize, and Ctrl-C
// typed on the keyboard reaches the agent (which exits with its own code).
func TestAttachedStartIsARealTerminal(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	script := `trap 'echo "agent got SIGINT"; exit 5' INT
echo "tty=$(tty)"
echo "size=$(stty size)"
echo ready
while [ "$(stty size)" = "30 100" ]; do sleep 0.1; done
echo "resized=$(stty size)"
while true; do sleep 0.1; done`
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "start", "tty", "--agent", "shell", "--", "sh", "-c", script)
	cmd.Dir = e.Repo
	cmd.Env = append(e.vars, "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	must(t, err)
	defer ptmx.Close()
	out := &ptyOutput{}
	go func() { _, _ = io.Copy(out, ptmx) }()
	Eventually(t, 60*time.Second, "the agent to start", func() bool { return strings.Contains(out.String(), "ready") })
	if s := out.String(); !strings.Contains(s, "tty=/dev/pts/") || !strings.Contains(s, "size=30 100") {
		t.Errorf("the agent has no terminal of the window's size:\n%s", s)
	}
	must(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}))
	Eventually(t, 30*time.Second, "the resize to reach the agent", func() bool { return strings.Contains(out.String(), "resized=40 120") })
	_, err = ptmx.Write([]byte{3}) // Ctrl-C
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
			t.Errorf("start exited with %v, want the agent's code 5\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("Ctrl-C did not end the agent:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "agent got SIGINT") {
		t.Errorf("the agent did not see SIGINT:\n%s", out.String())
	}
}

// TestAttachedStartPassesPipedStdin: input piped into start reaches the
// agent, and its end closes the agent's stdin.
func TestAttachedStartPassesPipedStdin(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "start", "pipe", "--agent", "shell", "--", "sh", "-c", "tr a-z A-Z > upper.txt; echo done")
	cmd.Dir = e.Repo
	cmd.Env = e.vars
	cmd.Stdin = strings.NewReader("hello from a pipe\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(e.Worktree("pipe"), "upper.txt"))
	if err != nil || string(b) != "HELLO FROM A PIPE\n" {
		t.Errorf("upper.txt = %q, %v\n%s", b, err, out)
	}
}
