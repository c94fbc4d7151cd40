package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPsWatch: ps --watch prints the table again when a sandbox's agent
// exits, from Docker's events, and ends on SIGINT.
func TestPsWatch(t *testing.T) {
	e := NewEnv(t)
	e.MustSandbox("start", "w1", "-d", "--agent", "shell", "--", "sh", "-c", `while [ ! -f stop ]; do sleep 0.2; done`)
	// The binary itself: git, running it as a subcommand, dies of the
	// SIGINT the test sends whatever its child does.
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "ps", "--watch")
	cmd.Dir = e.Repo
	cmd.Env = e.vars
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	Eventually(t, 30*time.Second, "ps --watch to print the running sandbox", func() bool {
		return strings.Contains(out.String(), "w1") && strings.Contains(out.String(), "running")
	})
	if strings.Contains(out.String(), "exited") {
		t.Fatalf("exited before the agent was told to stop:\n%s", out)
	}
	must(t, os.WriteFile(filepath.Join(e.Worktree("w1"), "stop"), nil, 0o644))
	defer func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
		}
	}()
	Eventually(t, 30*time.Second, "ps --watch to print the exit", func() bool {
		return strings.Contains(out.String(), "exited (0)")
	})
	// Each table is a block after a "# TIME" line: the first showed it
	// running, a later one exited.
	if n := strings.Count(out.String(), "\n# "); n < 1 || !strings.HasPrefix(out.String(), "# ") {
		t.Errorf("not one block per change:\n%s", out)
	}
	must(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ps --watch after SIGINT: %v\n%s", err, errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ps --watch still runs 10s after SIGINT")
	}
}
