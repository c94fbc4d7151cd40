package agentspec

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
)

func TestRebuild(t *testing.T) {
	in := planInput(t)
	in.Prompt, in.TTY = "first task", true
	spec, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TERM", "screen")
	err = Rebuild(spec, Again{
		Argv: []string{"sh", "-c", "follow"}, OpenStdin: true,
		Prompt: "second task", Memory: "2g", CPUs: 0.5, Pids: 50, Verify: "make check",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Argv, []string{"sh", "-c", "follow"}) || spec.TTY || !spec.OpenStdin || !spec.StdinOnce {
		t.Errorf("command and terminal: %q tty=%v stdin=%v once=%v", spec.Argv, spec.TTY, spec.OpenStdin, spec.StdinOnce)
	}
	env := strings.Join(spec.Env, "\n")
	if strings.Contains(env, "TERM=") || strings.Contains(env, "first task") || !strings.Contains(env, "GIT_SANDBOX_PROMPT=second task") {
		t.Errorf("environment: %q", spec.Env)
	}
	if spec.Labels[container.LabelPrompt] != "second task" || spec.Labels[container.LabelVerify] != "make check" {
		t.Errorf("labels: %v", spec.Labels)
	}
	if spec.Limits.MemoryBytes != 2<<30 || spec.Limits.CPUs != 0.5 || spec.Limits.Pids != 50 {
		t.Errorf("limits: %+v", spec.Limits)
	}

	// A terminal again: the user's TERM, one of it; limits not given stay.
	if err := Rebuild(spec, Again{Argv: []string{"x"}, TTY: true, OpenStdin: true}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(spec.Env, "\n"), "TERM="); n != 1 || !slices.Contains(spec.Env, "TERM=screen") || spec.StdinOnce {
		t.Errorf("terminal: %q once=%v", spec.Env, spec.StdinOnce)
	}
	if spec.Limits.MemoryBytes != 2<<30 {
		t.Errorf("memory changed without --memory: %d", spec.Limits.MemoryBytes)
	}
	if err := Rebuild(spec, Again{Argv: []string{"x"}, Memory: "lots"}); err == nil || !strings.Contains(err.Error(), "--memory") {
		t.Errorf("a bad --memory: %v", err)
	}

	// A sandbox directory replaced since by a symlink to your home is
	// refused.
	home := mountOf(t, in, "the sandbox's own home")
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Getenv("HOME"), home); err != nil {
		t.Fatal(err)
	}
	if err := Rebuild(spec, Again{Argv: []string{"x"}}); err == nil || !strings.Contains(err.Error(), "home directory") {
		t.Errorf("a mount source now resolving to your home: %v", err)
	}
}
