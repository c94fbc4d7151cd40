package dash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
)

// selfEnv makes the test binary, run as the dashboard's own command
// (proc.Self), print where it ran and what it was given instead of
// running the tests.
const selfEnv = "GIT_SANDBOX_DASH_TEST_SELF"

func TestMain(m *testing.M) {
	if mode := os.Getenv(selfEnv); mode != "" {
		wd, _ := os.Getwd()
		fmt.Printf("ran in %s with %s\n", wd, strings.Join(os.Args[1:], " "))
		if mode == "fail" {
			fmt.Println("git sandbox: error: refused")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCmd runs a command and returns its message.
func runCmd(t *testing.T, cmd tea.Cmd) tea.Msg {
	t.Helper()
	if cmd == nil {
		t.Fatal("no command")
	}
	return cmd()
}

// TestRunSelfRunsTheToolsOwnCommandLine: an action is this binary run
// with -C and the repository, in the repository, its output captured.
func TestRunSelfRunsTheToolsOwnCommandLine(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(context.Background(), Options{Backend: &fakeBackend{}, Dir: dir})
	t.Setenv(selfEnv, "ok")
	d, ok := runCmd(t, m.runSelf([]string{"stop", "--", "b1"}, false)).(doneMsg)
	if !ok || d.err != nil || d.output != "ran in "+dir+" with -C "+dir+" stop -- b1\n" {
		t.Fatalf("runSelf = %+v", d)
	}
	m.finish(d)
	if m.status != "stop b1: ran in "+dir+" with -C "+dir+" stop -- b1" {
		t.Errorf("status %q", m.status)
	}
	t.Setenv(selfEnv, "fail")
	d = runCmd(t, m.runSelf([]string{"land", "--", "b1"}, false)).(doneMsg)
	if d.err == nil || !strings.Contains(d.output, "error: refused") {
		t.Fatalf("a failing action = %+v", d)
	}
	if cmd := m.runSelf([]string{"attach", "--", "b1"}, true); cmd == nil {
		t.Error("an interactive action gave no command")
	}
	if !m.execing.Load() {
		t.Error("an interactive action does not mark the terminal as taken")
	}
}

func TestRunPage(t *testing.T) {
	m, _ := testModel(t, true)
	var err error
	m.run = func(args []string, interactive bool) tea.Cmd {
		return func() tea.Msg { return doneMsg{args: args, output: "list", err: err} }
	}
	if d := runCmd(t, m.runPage([]string{"rescue", "list"})).(doneMsg); !d.page {
		t.Errorf("a command that worked is not shown as a page: %+v", d)
	}
	err = errors.New("failed")
	if d := runCmd(t, m.runPage([]string{"rescue", "list"})).(doneMsg); d.page {
		t.Errorf("a failure is shown as a page: %+v", d)
	}
	// r runs rescue list of the selected sandbox as a page.
	m.run = func(args []string, interactive bool) tea.Cmd {
		return func() tea.Msg { return doneMsg{args: args, output: strings.Join(args, " ")} }
	}
	_, cmd := m.Update(key("r"))
	m.Update(runCmd(t, cmd))
	if m.mode != modeText || m.text[0] != "rescue list -- alpha" {
		t.Errorf("r showed %q", m.text)
	}
}

// changingBackend counts the loads and hands out a change stream the test
// drives.
type changingBackend struct {
	list    []sandbox.Status
	err     error
	loads   int
	changes chan struct{}
	errc    chan error
}

func (b *changingBackend) Statuses(context.Context) ([]sandbox.Status, error) {
	b.loads++
	return b.list, b.err
}

func (b *changingBackend) Changes(context.Context) (<-chan struct{}, <-chan error) {
	return b.changes, b.errc
}

// TestRefreshFollowsChanges: a change loads the list again, a change
// during a load asks for one more load after it, and a stream that ends
// says so and leaves the ticks to refresh.
func TestRefreshFollowsChanges(t *testing.T) {
	b := &changingBackend{list: []sandbox.Status{{Branch: "a"}, {Branch: "b"}}, changes: make(chan struct{}, 1), errc: make(chan error, 1)}
	m := newModel(context.Background(), Options{Backend: b, Tick: time.Hour})
	if m.Init() == nil || !m.loading {
		t.Fatal("Init starts no load")
	}
	msg := runCmd(t, m.load())
	if lm, ok := msg.(listMsg); !ok || len(lm.list) != 2 {
		t.Fatalf("load = %#v", msg)
	}
	m.cursor = 5
	m.Update(msg)
	if m.loading || m.cursor != 1 {
		t.Errorf("after the list: loading %v cursor %d (want the last row)", m.loading, m.cursor)
	}

	b.changes <- struct{}{}
	if _, ok := runCmd(t, m.waitChange()).(changedMsg); !ok {
		t.Fatal("a change gave no changedMsg")
	}
	if _, cmd := m.Update(changedMsg{}); cmd == nil || !m.loading {
		t.Fatal("a change does not load the list")
	}
	// A second change while loading: one more load once this one ends.
	m.Update(changedMsg{})
	if !m.again {
		t.Fatal("a change during a load was dropped")
	}
	_, cmd := m.Update(listMsg{list: b.list})
	if cmd == nil || !m.loading || m.again {
		t.Fatalf("the load asked for during a load did not start: loading %v again %v", m.loading, m.again)
	}
	if _, cmd := m.Update(tickMsg{}); cmd == nil {
		t.Error("a tick schedules nothing")
	}

	close(b.changes)
	b.errc <- errors.New("events: connection reset\x1b[2J")
	end := runCmd(t, m.waitChange())
	m.Update(end)
	if !strings.Contains(m.status, `live updates stopped (events: connection reset\x1b[2J); refreshing every 1h0m0s`) {
		t.Errorf("status %q", m.status)
	}
	m.status = ""
	m.Update(streamEndMsg{})
	if m.status != "" {
		t.Errorf("a stream that ended without an error set the status %q", m.status)
	}
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	if m.width != 120 || m.height != 40 {
		t.Errorf("size %dx%d", m.width, m.height)
	}
	b.err = errors.New("engine gone")
	m.Update(runCmd(t, m.load()))
	if m.err == nil || !strings.Contains(m.View(), "engine gone") {
		t.Errorf("a failed load is not shown:\n%s", m.View())
	}
}

func TestDoneRefreshes(t *testing.T) {
	m, _ := testModel(t, true)
	if _, cmd := m.Update(doneMsg{args: []string{"stop", "--", "alpha"}}); cmd == nil || m.status != "stop alpha: done" {
		t.Errorf("an action's end: status %q, refresh %v", m.status, cmd != nil)
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	var tb tailBuffer
	tb.Write([]byte(strings.Repeat("a", 20<<10)))
	tb.Write([]byte("the end"))
	if s := tb.String(); len(s) != 16<<10 || !strings.HasSuffix(s, "athe end") {
		t.Errorf("kept %d bytes ending %q", len(s), s[len(s)-10:])
	}
}

func TestColour(t *testing.T) {
	one, zero := 1, 0
	tests := []struct {
		name string
		s    sandbox.Status
		sgr  string
	}{
		{"failed verify", sandbox.Status{State: sandbox.StateExited, Verdict: "failed"}, red},
		{"non-zero exit", sandbox.Status{State: sandbox.StateExited, ExitCode: &one}, red},
		{"running", sandbox.Status{State: sandbox.StateRunning}, green},
		{"passed", sandbox.Status{State: sandbox.StateExited, ExitCode: &zero, Verdict: "passed"}, green},
		{"stopped", sandbox.Status{State: sandbox.StateExited, ExitCode: &zero}, ""},
	}
	for _, tt := range tests {
		m := newModel(context.Background(), Options{Backend: &fakeBackend{}})
		got := m.colour(tt.s, "row")
		want := "row"
		if tt.sgr != "" {
			want = "\x1b[" + tt.sgr + "mrow\x1b[0m"
		}
		if got != want {
			t.Errorf("%s: %q, want %q", tt.name, got, want)
		}
		m.o.NoColor = true
		if got := m.colour(tt.s, "row"); got != "row" {
			t.Errorf("%s under NO_COLOR: %q", tt.name, got)
		}
	}
	t.Setenv("NO_COLOR", "1")
	if !NoColor() {
		t.Error("NO_COLOR=1 is not no colour")
	}
	t.Setenv("NO_COLOR", "")
	if NoColor() {
		t.Error("an empty NO_COLOR is no colour")
	}
}
