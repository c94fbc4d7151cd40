package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
)

// TestPsTableFits100Columns: ps's table of sandboxes with everyday names
// fits 100 columns, published ports included (PORTS: host port -> the
// agent's); the worktree path is left to --wide and --json. SPEND shows
// only when the broker meters a sandbox; CONFLICTS names the first and
// counts the rest.
func TestPsTableFits100Columns(t *testing.T) {
	code := 130
	busy := sandbox.Status{
		Branch: "fix-login-redirect", State: sandbox.StateExited, ExitCode: &code, Agent: "claude", Base: "main",
		Created: time.Now().Add(-47 * time.Hour), Changes: 128, SnapshotTime: time.Now().Add(-59 * time.Minute),
		Network: "allowlist", Denied: 12, Worktree: "/home/someone/.local/state/git-sandbox/project-0123456789ab/fix-login-redirect/worktree",
		Forecast: &forecast.Result{Base: []string{"a"}, With: map[string][]string{"api-pagination": {"a"}}},
		Ports:    []container.Port{{Port: 3000, HostPort: 41234}},
	}
	other := sandbox.Status{Branch: "api-pagination", State: sandbox.StateRunning, Agent: "codex", Base: "main", Created: time.Now(), Network: "none"}
	list := []sandbox.Status{busy, other}
	var out strings.Builder
	psTable(&out, list, nil, false, false)
	fits(t, out.String())
	for _, want := range []string{" PORTS\n", "41234->3000\n", " base+1 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ps has no %q:\n%s", want, out.String())
		}
	}
	for _, not := range []string{"WORKTREE", "/home/someone", "SPEND", "unmetered"} {
		if strings.Contains(out.String(), not) {
			t.Errorf("ps shows %q:\n%s", not, out.String())
		}
	}
	out.Reset()
	psTable(&out, list, nil, false, true)
	if !strings.Contains(out.String(), " WORKTREE\n") || !strings.Contains(out.String(), "/home/someone/") {
		t.Errorf("ps --wide shows no worktree:\n%s", out.String())
	}

	// Metered, with a budget, and no port: still within 100.
	busy.Ports = nil
	busy.Spend = &meter.Status{Metered: true, Spent: &meter.Spent{USD: 12.34}, Budget: &meter.Budget{USD: 20}}
	out.Reset()
	psTable(&out, []sandbox.Status{busy, other}, nil, false, false)
	fits(t, out.String())
	if !strings.Contains(out.String(), " SPEND ") || !strings.Contains(out.String(), " $12.34/$20.00 ") || !regexp.MustCompile(`\n\S+ +running .* unmetered +\?\n`).MatchString(out.String()) {
		t.Errorf("ps's SPEND:\n%s", out.String())
	}
}

// fits fails unless every line of a table is at most 100 columns.
func fits(t *testing.T, table string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("a line of %d columns:\n%s", n, table)
		}
	}
}
