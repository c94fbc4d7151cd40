package e2e

import (
	"strings"
	"testing"
)

// TestAttachAndFollowLogs: attach streams a running agent's output until it
// exits; logs -f follows to the end.
func TestAttachAndFollowLogs(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	script := `while [ ! -e /workspace/go ]; do sleep 0.1; done; for i in 1 2 3 4 5 6 7 8 9 10; do echo "tick $i"; sleep 0.3; done`
	e.MustSandbox("start", "att", "-d", "--agent", "shell", "--", "sh", "-c", script)
	attach := make(chan Result, 1)
	follow := make(chan Result, 1)
	go func() { attach <- e.Sandbox("attach", "att") }()
	go func() { follow <- e.Sandbox("logs", "-f", "att") }()
	runOK(t, "", nil, "touch", e.Worktree("att")+"/go")
	// logs -f has everything from the start; attach what came after it
	// connected, which is at least the end.
	if r := <-follow; r.Code != 0 || !strings.Contains(r.Stdout, "tick 1\n") || !strings.Contains(r.Stdout, "tick 10\n") {
		t.Errorf("logs -f: %s", r)
	}
	if r := <-attach; r.Code != 0 || !strings.Contains(r.Stdout, "tick 10\n") {
		t.Errorf("attach: %s", r)
	}
	if r := e.Sandbox("attach", "att"); r.Code == 0 || !strings.Contains(r.Stderr, "not running") {
		t.Errorf("attach to an exited sandbox: %s", r)
	}
}
