package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// stopped stops branch's sandbox, as git sandbox stop does.
func (te *testEnv) stopped(branch string) *Sandbox {
	te.t.Helper()
	sb, err := te.env.Find(branch)
	if err == nil {
		_, err = sb.Stop(context.Background(), 0)
	}
	if err != nil {
		te.t.Fatal(err)
	}
	return sb
}

// proxyBudget is the budget in branch's proxy's meter settings.
func (te *testEnv) proxyBudget(branch string) meter.Budget {
	te.t.Helper()
	var s meter.Settings
	b, err := os.ReadFile(filepath.Join(te.env.Layout.ProxyDir(branch), network.MeterSettingsFile))
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		te.t.Fatal(err)
	}
	return s.Budget
}

// A follow-up start's --budget sets the sandbox's dollar budget, as git
// sandbox budget does (the token budget stays): in the record and in the
// settings of the proxy made for the follow-up. One that cannot hold or
// does not read as dollars is refused before anything changes.
func TestFollowUpBudget(t *testing.T) {
	te := allowlistEnv(t)
	withSecret(te, testSecretValue)
	te.env.Config.Budget.ModelTokens = 2_000_000
	ctx := context.Background()
	o := detached("t1")
	o.Budget = "5.00"
	if _, err := te.env.Start(ctx, o); err != nil {
		t.Fatal(err)
	}
	te.stopped("t1")

	for _, bad := range []struct{ budget, says, hint string }{
		{"lots", `"lots" is not an amount of dollars`, "--budget 5.00"},
		{"+1", "does not raise one", "git sandbox budget t1 +1"},
	} {
		o = detached("t1", "echo", "next")
		o.Budget = bad.budget
		_, err := te.env.Start(ctx, o)
		ue, ok := usererr.As(err)
		if !ok || !strings.Contains(err.Error(), bad.says) || !strings.Contains(strings.Join(ue.Hints, "\n"), bad.hint) {
			t.Errorf("--budget %s: %v", bad.budget, err)
		}
	}
	if sb, _ := te.env.Find("t1"); sb.Egress.Budget != (meter.Budget{USD: 5, Tokens: 2_000_000}) || !sb.Stopped {
		t.Fatalf("a refused follow-up changed the sandbox: budget %+v, stopped %v", sb.Egress.Budget, sb.Stopped)
	}

	o = detached("t1", "echo", "next")
	o.Budget = "8"
	if _, err := te.env.Start(ctx, o); err != nil {
		t.Fatal(err)
	}
	want := meter.Budget{USD: 8, Tokens: 2_000_000}
	sb, _ := te.env.Find("t1")
	if sb.Egress.Budget != want || te.proxyBudget("t1") != want {
		t.Errorf("after --budget 8: record %+v, proxy %+v", sb.Egress.Budget, te.proxyBudget("t1"))
	}
	if p := te.role("t1", container.RoleProxy); len(p) != 1 {
		t.Errorf("proxies after the follow-up: %+v", p)
	}
	if !strings.Contains(te.err.String(), "budget for t1 is now $8.00 and 2.0M tokens") {
		t.Errorf("the follow-up did not say the new budget:\n%s", te.err.String())
	}
}

// A follow-up's --budget for a sandbox nothing meters is refused, saying
// why: the agent holds its own key, or copy mode, whose engine takes no
// broker secret (and whose SPEND in ps is "unmetered").
func TestFollowUpBudgetUnmetered(t *testing.T) {
	te := newTestEnv(t)
	ctx := context.Background()
	te.start("own")
	te.start("far")
	if err := te.stopped("far").Update(func(r *record.Record) error {
		r.Copy, r.Engine = &record.Copy{Helper: r.Container}, "far"
		r.Egress = &record.Egress{Secrets: []record.Secret{{Name: "API_KEY"}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	te.stopped("own")
	for branch, want := range map[string]string{
		"own": "not metered (the agent holds its own model key)",
		"far": "not metered (copy mode: engine far takes no [[secret]]",
	} {
		o := detached(branch, "echo", "next")
		o.Budget = "3"
		if _, err := te.env.Start(ctx, o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: --budget 3 = %v", branch, err)
		}
		sb, _ := te.env.Find(branch)
		if !sb.Stopped || sb.Argv != nil && sb.Argv[0] == "echo" {
			t.Errorf("%s: the refused follow-up ran: %+v", branch, sb.Record)
		}
		if col := network.SpendOf(sb.Record, sb.NetLog()).Column(); col != "unmetered" {
			t.Errorf("%s: SPEND = %q", branch, col)
		}
	}
}
