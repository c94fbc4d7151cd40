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
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
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
	got, err := Budget(net, target, sb.Record, sb.NetLog(), Change{})
	if err != nil || got != "a: unmetered (the agent holds its own model key)" {
		t.Errorf("Budget = %q, %v", got, err)
	}
}

// meteredAs makes sandbox branch's record that of a sandbox whose model
// key is a broker secret (copy: in copy mode as well).
func meteredAs(t *testing.T, env *sandbox.Env, branch string, copyMode bool) *sandbox.Sandbox {
	t.Helper()
	sb, err := env.Find(branch)
	if err != nil {
		t.Fatal(err)
	}
	err = sb.Update(func(r *record.Record) error {
		r.Egress = &record.Egress{Secrets: []record.Secret{{Name: "API_KEY", Hosts: []string{"api.anthropic.com"}}}, Budget: meter.Budget{USD: 5}}
		if copyMode {
			r.Copy, r.Engine = &record.Copy{Helper: "h"}, "two"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb, err = env.Find(branch); err != nil {
		t.Fatal(err)
	}
	return sb
}

// budget changes the token budget as the dollar one, each leaving the
// other as it is, in the record and in the proxy's settings at once.
func TestBudgetChangesDollarsAndTokens(t *testing.T) {
	env := newEnv(t)
	sb := meteredAs(t, env, "a", false)
	writeUsage(t, env, "a", meter.Record{Time: time.Now(), Model: "m", CostUSD: 1, Usage: meter.Usage{Input: 300_000, Output: 100_000}})
	net, target := sb.Live()
	settings := func() meter.Budget {
		var s meter.Settings
		b, err := os.ReadFile(filepath.Join(env.Layout.ProxyDir("a"), "meter.json"))
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err != nil {
			t.Fatal(err)
		}
		return s.Budget
	}
	for _, step := range []struct {
		c    Change
		line string
		want meter.Budget
	}{
		{Change{Tokens: "2M"}, "a: spent $1.00 of $5.00 and 2.0M tokens", meter.Budget{USD: 5, Tokens: 2_000_000}},
		{Change{Tokens: "+500k"}, "a: spent $1.00 of $5.00 and 2.5M tokens", meter.Budget{USD: 5, Tokens: 2_500_000}},
		{Change{Dollars: "+1.50"}, "a: spent $1.00 of $6.50 and 2.5M tokens", meter.Budget{USD: 6.5, Tokens: 2_500_000}},
		{Change{Dollars: "0", Tokens: "300k"}, "a: spent $1.00 of 300k tokens: the broker refuses its model calls", meter.Budget{Tokens: 300_000}},
	} {
		got, err := Budget(net, target, sb.Record, sb.NetLog(), step.c)
		if err != nil || !strings.HasPrefix(got, step.line) {
			t.Errorf("%+v: %q, %v; want %q", step.c, got, err, step.line)
		}
		if s := settings(); s != step.want || sb.Egress.Budget != step.want {
			t.Errorf("%+v: proxy's budget %+v, record's %+v; want %+v", step.c, s, sb.Egress.Budget, step.want)
		}
	}
	// A change that does not parse changes nothing.
	if _, err := Budget(net, target, sb.Record, sb.NetLog(), Change{Dollars: "+1", Tokens: "lots"}); err == nil || !strings.Contains(err.Error(), "not a number of tokens") {
		t.Errorf("--tokens lots: %v", err)
	}
	if s := settings(); s != (meter.Budget{Tokens: 300_000}) {
		t.Errorf("a refused change reached the proxy: %+v", s)
	}
}

// A copy-mode sandbox is unmetered, and says why: its engine takes no
// broker secret, so no usage log of it exists to read.
func TestBudgetOfACopyModeSandbox(t *testing.T) {
	env := newEnv(t)
	sb := meteredAs(t, env, "b", true)
	net, target := sb.Live()
	got, err := Budget(net, target, sb.Record, sb.NetLog(), Change{})
	if err != nil || !strings.HasPrefix(got, "b: unmetered (copy mode: engine two takes no [[secret]]") {
		t.Errorf("Budget = %q, %v", got, err)
	}
	_, err = Budget(net, target, sb.Record, sb.NetLog(), Change{Tokens: "1M"})
	if ue, ok := usererr.As(err); !ok || !strings.Contains(err.Error(), "not metered (copy mode") || !strings.Contains(strings.Join(ue.Hints, "\n"), "local engine") {
		t.Errorf("a budget for a copy-mode sandbox: %v", err)
	}
	if col := network.SpendOf(sb.Record, sb.NetLog()).Column(); col != "unmetered" {
		t.Errorf("ps's SPEND of a copy-mode sandbox = %q", col)
	}
	res, err := Collect(env, fleet.NewStore(env.Layout.FleetDir()), Query{})
	if err != nil || strings.Join(res.Unmetered, ",") != "a" || strings.Join(res.UnmeteredCopy, ",") != "b" {
		t.Fatalf("Collect: %+v, %v", res, err)
	}
	if notes := strings.Join(res.Notes(), "\n"); !strings.Contains(notes, "not metered (copy mode: its engine takes no [[secret]], so no credential broker sees its model calls): b") {
		t.Errorf("notes: %s", notes)
	}
}
