package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/agent"
)

// TestHelpNamesTheRegisteredAgents: the agents help offers are those the
// registry has, so adding an adapter updates the help without a copy to
// keep in step.
func TestHelpNamesTheRegisteredAgents(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"start", "--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("start --help: exit %d\n%s", code, stderr.String())
	}
	help := strings.Join(strings.Fields(stdout.String()), " ")
	if want := "Agent: " + orList(agent.Names()) + " "; !strings.Contains(help, want) {
		t.Errorf("start --help lacks %q:\n%s", want, stdout.String())
	}
	stdout.Reset()
	if code := Main([]string{"image", "build", "--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("image build --help: exit %d\n%s", code, stderr.String())
	}
	help = strings.Join(strings.Fields(stdout.String()), " ")
	if want := "install the " + andList(agent.Installable()) + " CLIs"; !strings.Contains(help, want) {
		t.Errorf("image build --help lacks %q:\n%s", want, stdout.String())
	}
}

func TestJoinLast(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"shell"}, "shell"},
		{[]string{"claude", "shell"}, "claude or shell"},
		{[]string{"claude", "codex", "shell"}, "claude, codex or shell"},
	} {
		if got := orList(tc.in); got != tc.want {
			t.Errorf("orList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
