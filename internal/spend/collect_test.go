package spend

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/fleet"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// noBackground starts no supervisor and purges the trash in place.
type noBackground struct{}

func (noBackground) Supervise(string) error   { return nil }
func (noBackground) Purge(trash string) error { return workspace.Purge(trash) }

// newEnv is a repository with one commit and sandboxes a and b on the
// fake engine (no network: not metered).
func newEnv(t *testing.T) *sandbox.Env {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "repo")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "commit", "-q", "--allow-empty", "-m", "initial"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	r, err := worktree.Open(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.Agent, cfg.Network = "shell", container.NetworkNone
	env := sandbox.NewEnv(r, cfg, filepath.Join(root, "state"), ui.New(&bytes.Buffer{}, ui.Options{NoColor: true}))
	fake := enginefake.New(config.DefaultImage())
	env.Engines = sandbox.ConnectorFunc(func(context.Context, string) (sandbox.Engine, error) { return fake, nil })
	env.Background = noBackground{}
	for _, b := range []string{"a", "b"} {
		o := sandbox.StartOptions{Branch: b, Detach: true, Args: []string{"sleep", "infinity"},
			IO: sandbox.IO{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}}
		if _, err := env.Start(context.Background(), o); err != nil {
			t.Fatalf("start %s: %v", b, err)
		}
	}
	return env
}

// writeUsage writes a usage log for branch as the broker would.
func writeUsage(t *testing.T, env *sandbox.Env, branch string, recs ...meter.Record) {
	t.Helper()
	dir := env.Layout.NetLogDir(branch)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, r := range recs {
		line, _ := json.Marshal(r)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, meter.UsageFile), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Collect totals the logs the question covers, names the sandboxes it
// cannot meter, and refuses a --since it cannot read.
func TestCollect(t *testing.T) {
	env := newEnv(t)
	store := fleet.NewStore(env.Layout.FleetDir())
	now := time.Now().UTC()
	writeUsage(t, env, "a",
		meter.Record{Time: now.Add(-48 * time.Hour), Host: "api.anthropic.com", Model: "m", CostUSD: 0.5},
		meter.Record{Time: now, Host: "api.anthropic.com", Model: "m", CostUSD: 0.25})

	all, err := Collect(env, store, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Report.Total.Requests != 2 || all.Report.Total.USD != 0.75 || strings.Join(all.Unmetered, ",") != "a,b" {
		t.Errorf("everything: %+v, unmetered %v", all.Report.Total, all.Unmetered)
	}
	recent, err := Collect(env, store, Query{Since: "1d"})
	if err != nil || recent.Report.Total.Requests != 1 || recent.Report.Total.USD != 0.25 {
		t.Errorf("since a day: %+v, %v", recent, err)
	}
	onlyB, err := Collect(env, store, Query{Branches: []string{"b"}})
	if err != nil || onlyB.Report.Total.Requests != 0 || strings.Join(onlyB.Unmetered, ",") != "b" {
		t.Errorf("b only: %+v, %v", onlyB, err)
	}
	if _, err := Collect(env, store, Query{Since: "yesterday"}); err == nil {
		t.Error("a --since it cannot read: no error")
	}
	if _, err := Collect(env, store, Query{Fleet: "none"}); err == nil {
		t.Error("a fleet that does not exist: no error")
	}
}

// Budget says an unmetered sandbox is unmetered rather than showing it as
// having spent nothing.
func TestBudgetOfAnUnmeteredSandbox(t *testing.T) {
	env := newEnv(t)
	sb, err := env.Find("a")
	if err != nil {
		t.Fatal(err)
	}
	net, target := sb.Live()
	got, err := Budget(context.Background(), net, target, sb.Record, sb.NetLog(), "")
	if err != nil || got != "a: unmetered (the agent holds its own model key)" {
		t.Errorf("Budget = %q, %v", got, err)
	}
}
