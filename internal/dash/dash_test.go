package dash

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
)

type fakeBackend struct{ list []sandbox.Status }

func (f *fakeBackend) Statuses(context.Context) ([]sandbox.Status, error) { return f.list, nil }
func (f *fakeBackend) Changes(context.Context) (<-chan struct{}, <-chan error) {
	return make(chan struct{}), make(chan error)
}

func testModel(t *testing.T, noColor bool) (*model, *[][]string) {
	code := 0
	list := []sandbox.Status{
		{Branch: "alpha", State: sandbox.StateExited, ExitCode: &code, Agent: "shell", Base: "main", Created: time.Now().Add(-time.Hour),
			Changes: 3, Usage: &agent.Usage{InputTokens: 12, OutputTokens: 250, CostUSD: 0.0421}, SnapshotTime: time.Now().Add(-2 * time.Minute), SnapshotTree: strings.Repeat("a", 40), Verdict: "passed",
			Forecast: &forecast.Result{With: map[string][]string{"beta": {"f"}}}},
		{Branch: "beta\x1b]0;pwn\x07", State: sandbox.StateRunning, Agent: "claude", Base: "main", Created: time.Now(), Network: "allowlist", Denied: 2,
			Forecast: &forecast.Result{Base: []string{"f"}}},
	}
	m := newModel(context.Background(), Options{Backend: &fakeBackend{list: list}, Dir: "/repo", NoColor: noColor})
	var ran [][]string
	m.run = func(args []string, interactive bool) tea.Cmd {
		mark := ""
		if interactive {
			mark = "i"
		}
		ran = append(ran, append([]string{mark}, args...))
		return nil
	}
	m.Update(listMsg{list: list})
	return m, &ran
}

func key(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func TestViewFits80x24AndEscapes(t *testing.T) {
	m, _ := testModel(t, true)
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) > 24 {
		t.Errorf("%d lines, want at most 24", len(lines))
	}
	for _, l := range lines {
		plain := strings.ReplaceAll(strings.ReplaceAll(l, "\x1b[7m", ""), "\x1b[0m", "")
		if n := len([]rune(plain)); n > 80 {
			t.Errorf("line of %d columns: %q", n, plain)
		}
		if strings.ContainsAny(plain, "\x1b\x07") {
			t.Errorf("raw control character: %q", l)
		}
	}
	if len(lines) != 24 {
		t.Errorf("%d lines, want the whole 24", len(lines))
	}
	for _, want := range []string{"alpha", `beta\x1b]0;pwn\x07`, "exited(0)", "passed", "base", "2m", "usage $0.0421, 12 in / 250 out tokens"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "\x1b[3") || strings.Contains(v, "\x1b[1m") {
		t.Errorf("NO_COLOR view has colour or bold: %q", v)
	}
	// With colour, the selection and states are styled.
	c, _ := testModel(t, false)
	if !strings.Contains(c.View(), "\x1b[3") {
		t.Error("coloured view has no colour")
	}
}

func TestLandAsksAndPassesTheTreeShown(t *testing.T) {
	m, ran := testModel(t, true)
	m.Update(key("l"))
	if m.mode != modeConfirm || !strings.Contains(m.View(), "land alpha onto main") {
		t.Fatalf("l did not ask:\n%s", m.View())
	}
	m.Update(key("n"))
	if len(*ran) != 0 || m.mode != modeList {
		t.Fatalf("n did not cancel: %v", *ran)
	}
	m.Update(key("l"))
	m.Update(key("y"))
	want := [][]string{{"", "land", "--expect", strings.Repeat("a", 40), "--", "alpha"}}
	if !reflect.DeepEqual(*ran, want) {
		t.Errorf("ran %q, want %q", *ran, want)
	}
}

func TestKeys(t *testing.T) {
	m, ran := testModel(t, true)
	for _, k := range []string{"j", "enter", "d", "e", "s", "u", "c", "x", "y"} {
		m.Update(key(k))
	}
	b := "beta\x1b]0;pwn\x07"
	want := [][]string{
		{"i", "attach", "--", b}, {"i", "diff", "--", b}, {"i", "exec", "--", b},
		{"", "stop", "--", b}, {"", "update", "--", b}, {"", "rescue", "snapshot", "--", b}, {"", "rm", "--", b},
	}
	if !reflect.DeepEqual(*ran, want) {
		t.Errorf("ran %q, want %q", *ran, want)
	}
	*ran = nil
	m.Update(key("n"))
	for _, k := range []string{"f", "i", "x", "enter", "s", "h", "e", "l", "l", "enter", "g", "o", "enter"} {
		m.Update(key(k))
	}
	want = [][]string{{"", "start", "-d", "--agent", "shell", "-p", "go", "--", "fix"}}
	if !reflect.DeepEqual(*ran, want) {
		t.Errorf("new sandbox ran %q, want %q", *ran, want)
	}
	m.Update(key("?"))
	if !strings.Contains(m.View(), "rescue list") {
		t.Errorf("? shows no help:\n%s", m.View())
	}
	m.Update(key("q"))
	if m.mode != modeList {
		t.Error("a key did not close the help")
	}
	if _, cmd := m.Update(key("q")); cmd == nil {
		t.Error("q does not quit")
	}
}
