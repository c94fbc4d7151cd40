package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSetupRunsOnceAndIsNotTheAgentsWork: what setup writes belongs to the
// baseline; installed state outside /workspace survives a resume, and setup
// does not run again.
func TestSetupRunsOnceAndIsNotTheAgentsWork(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".sandbox.toml", "setup = \"echo generated > generated.txt; echo tool > /var/tmp/tool; echo setup-ran\"\n")
	e.Git("add", ".sandbox.toml")
	e.Git("commit", "-qm", "setup")
	r := e.MustSandbox("start", "s1", "--agent", "shell", "--", "sh", "-c", "cat generated.txt /var/tmp/tool; echo agent > agent.txt")
	if strings.Count(r.Stdout+r.Stderr, "setup-ran") != 1 || !strings.Contains(r.Stdout, "generated\ntool\n") {
		t.Errorf("first start: %s", r)
	}
	p := e.PsOf("s1")
	if p.Changes != 1 {
		t.Errorf("setup output counted as the agent's work: %d changes", p.Changes)
	}
	if names := e.MustSandbox("diff", "s1", "--name-only").Stdout; strings.TrimSpace(names) != "agent.txt" {
		t.Errorf("diff --name-only = %q", names)
	}
	r = e.MustSandbox("start", "s1", "--rerun")
	if strings.Contains(r.Stdout+r.Stderr, "setup-ran") || !strings.Contains(r.Stdout, "tool") {
		t.Errorf("resume ran setup again or lost its state: %s", r)
	}
	// A follow-up task runs in a new container of the sandbox's warm
	// image, which holds setup's result: setup does not run again.
	r = e.MustSandbox("start", "s1", "-p", "follow up", "--", "sh", "-c", "cat /var/tmp/tool; echo follow-up-ran")
	if strings.Contains(r.Stdout+r.Stderr, "setup-ran") || !strings.Contains(r.Stdout, "tool\nfollow-up-ran") {
		t.Errorf("follow-up with a setup: %s", r)
	}
}

func TestFailedSetupLeavesNothing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".sandbox.toml", "setup = \"echo broken >&2; exit 3\"\n")
	before := e.HostState()
	r := e.Sandbox("start", "s2", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "setup failed with exit code 3") || !strings.Contains(r.Stderr, "hint:") {
		t.Fatalf("start with a failing setup: %s", r)
	}
	e.AssertSameHostState(before)
	if b := e.Git("branch", "--list", "s2"); b != "" {
		t.Errorf("branch left: %q", b)
	}
	if refs := e.Git("for-each-ref", "refs/sandbox/"); refs != "" {
		t.Errorf("refs left: %s", refs)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("container left: %s", out)
	}
	if out, _ := exec.Command("docker", "network", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("network left: %s", out)
	}
	if wl := e.Git("worktree", "list"); strings.Count(wl, "\n") > 0 {
		t.Errorf("worktree left:\n%s", wl)
	}
	if l := e.Ps(); len(l) != 0 {
		t.Errorf("ps lists %+v", l)
	}
}
