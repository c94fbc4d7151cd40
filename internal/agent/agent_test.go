package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestArgv(t *testing.T) {
	tests := []struct {
		agent       string
		task        Task
		want        []string
		interactive bool
	}{
		{"claude", Task{Prompt: "fix the login"}, []string{"claude", "--dangerously-skip-permissions", "-p", "fix the login", "--output-format", "json"}, false},
		{"claude", Task{Terminal: true}, []string{"claude", "--dangerously-skip-permissions"}, true},
		{"claude", Task{Prompt: "p", Args: []string{"--model", "opus"}}, []string{"claude", "--dangerously-skip-permissions", "-p", "p", "--output-format", "json", "--model", "opus"}, false},
		{"claude", Task{Prompt: "p", Args: []string{"--output-format=stream-json", "--verbose"}}, []string{"claude", "--dangerously-skip-permissions", "-p", "p", "--output-format=stream-json", "--verbose"}, false},
		{"codex", Task{Prompt: "fix it"}, []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "fix it"}, false},
		{"codex", Task{Terminal: true}, []string{"codex", "--dangerously-bypass-approvals-and-sandbox"}, true},
		{"codex", Task{Prompt: "p", Args: []string{"-m", "o3"}}, []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "-m", "o3", "p"}, false},
		{"shell", Task{Args: []string{"sh", "-c", "make test > out.txt"}}, []string{"sh", "-c", "make test > out.txt"}, false},
		{"shell", Task{Terminal: true}, []string{"/bin/bash", "-l"}, true},
		// Follow-up tasks continue the agent's conversation.
		{"claude", Task{Prompt: "two", Continue: true}, []string{"claude", "--dangerously-skip-permissions", "--continue", "-p", "two", "--output-format", "json"}, false},
		{"claude", Task{Terminal: true, Continue: true}, []string{"claude", "--dangerously-skip-permissions", "--continue"}, true},
		{"codex", Task{Prompt: "two", Continue: true}, []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "resume", "--last", "two"}, false},
		{"codex", Task{Terminal: true, Continue: true}, []string{"codex", "resume", "--last", "--dangerously-bypass-approvals-and-sandbox"}, true},
		{"shell", Task{Prompt: "two", Args: []string{"sh", "-c", "x"}, Continue: true}, []string{"sh", "-c", "x"}, false},
	}
	for _, tt := range tests {
		a, err := Get(tt.agent)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Argv(tt.task)
		if err != nil {
			t.Errorf("%s %+v: %v", tt.agent, tt.task, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s %+v: argv = %q, want %q", tt.agent, tt.task, got, tt.want)
		}
		if a.Interactive(tt.task) != tt.interactive {
			t.Errorf("%s %+v: interactive = %v", tt.agent, tt.task, !tt.interactive)
		}
	}
}

// TestShellRefusesAPromptAlone: the shell agent given -p and no command
// says it runs a command and how to give one, first task or follow-up,
// instead of running the prompt's text.
func TestShellRefusesAPromptAlone(t *testing.T) {
	a, err := Get("shell")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []Task{{Prompt: "fix the login redirect"}, {Prompt: "now the tests", Continue: true}} {
		argv, err := a.Argv(task)
		ue, ok := usererr.As(err)
		if argv != nil || !ok || ue.Msg != "the shell agent runs a command, not a prompt: -p alone gives it nothing to run" ||
			!strings.Contains(strings.Join(ue.Hints, "\n"), "-p TASK -- sh -c 'SCRIPT'") {
			t.Errorf("%+v: argv %q, %v", task, argv, err)
		}
	}
}

func TestShellPromptDescribesTheCommand(t *testing.T) {
	a, _ := Get("shell")
	got, err := a.Argv(Task{Prompt: "describe", Args: []string{"make", "test"}})
	if err != nil || !slices.Equal(got, []string{"make", "test"}) {
		t.Errorf("shell with a prompt and a command: argv = %q, %v; want the command", got, err)
	}
}

func TestLoginPaths(t *testing.T) {
	tests := map[string][]string{
		"claude": {".claude/.credentials.json", ".claude.json"},
		"codex":  {".codex/auth.json"},
		"shell":  nil,
	}
	for name, want := range tests {
		a, _ := Get(name)
		if got := a.LoginPaths(); !slices.Equal(got, want) {
			t.Errorf("%s login paths = %q, want %q", name, got, want)
		}
	}
	if a, _ := Get("claude"); !slices.Contains(a.Env(), "IS_SANDBOX=1") {
		t.Error("claude must be told it runs in a sandbox")
	}
}

func TestUnknownAgent(t *testing.T) {
	if _, err := Get("gpt"); err == nil {
		t.Error("unknown agent accepted")
	}
	if got := Names(); !slices.Equal(got, []string{"claude", "codex", "shell"}) {
		t.Errorf("Names() = %q", got)
	}
}

func TestInstallable(t *testing.T) {
	if got := Installable(); !slices.Equal(got, []string{"claude", "codex"}) {
		t.Errorf("Installable() = %q", got)
	}
	for _, name := range Installable() {
		a, _ := Get(name)
		if !strings.HasPrefix(a.Package(), "@") {
			t.Errorf("%s package = %q, want a scoped npm package", name, a.Package())
		}
	}
}

func TestNeedsHost(t *testing.T) {
	c, _ := Get("claude")
	s, _ := Get("shell")
	for _, tt := range []struct {
		a    Adapter
		host string
		want bool
	}{
		{c, "api.anthropic.com", true},
		{c, "sentry-proxy.anthropic.com", true},
		{c, "claude.ai", true},
		{c, "evil-anthropic.com", false},
		{c, "github.com", false},
		{s, "api.anthropic.com", false},
	} {
		if got := NeedsHost(tt.a, tt.host); got != tt.want {
			t.Errorf("NeedsHost(%s, %s) = %v", tt.a.Name(), tt.host, got)
		}
	}
}
