package e2e

import (
	"strings"
	"testing"
)

// TestAgentHomePersistsPerAgent: what an agent keeps in its home (its
// login) is there in its next sandbox, and only for that agent.
func TestAgentHomePersistsPerAgent(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "h1", "--agent", "shell", "--", "sh", "-c", "mkdir -p ~/.config && echo logged-in > ~/.config/token && echo $HOME")
	r := e.MustSandbox("start", "h2", "--agent", "shell", "--", "sh", "-c", "cat ~/.config/token")
	if !strings.Contains(r.Stdout, "logged-in") {
		t.Errorf("the shell agent's home did not persist: %s", r)
	}
	// Each agent has a home of its own; only the shell agent has run here.
	entries := e.Run(e.Repo, nil, "ls", e.State+"/agents").Stdout
	if strings.TrimSpace(entries) != "shell" {
		t.Errorf("agent homes = %q", entries)
	}
}
