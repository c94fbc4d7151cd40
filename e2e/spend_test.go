package e2e

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/meter"
)

// spendReport is what the tests read of git sandbox usage --json.
type spendReport struct {
	Total     spendRow   `json:"total"`
	Sandboxes []spendRow `json:"sandboxes"`
	Models    []spendRow `json:"models"`
}

type spendRow struct {
	Name     string  `json:"name"`
	Removed  bool    `json:"removed"`
	CostUSD  float64 `json:"cost_usd"`
	Requests int     `json:"requests"`
	Unknown  int     `json:"unknown"`
	Refused  int     `json:"refused"`
	Usage    struct {
		Input      int64 `json:"input_tokens"`
		Output     int64 `json:"output_tokens"`
		CacheWrite int64 `json:"cache_write_tokens"`
		CacheRead  int64 `json:"cache_read_tokens"`
		Reasoning  int64 `json:"reasoning_tokens"`
	} `json:"usage"`
}

func (e *Env) usage(args ...string) spendReport {
	e.t.Helper()
	r := e.MustSandbox(append([]string{"usage", "--json"}, args...)...)
	var rep spendReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		e.t.Fatalf("usage --json: %v\n%s", err, r)
	}
	return rep
}

func (rep spendReport) model(name string) spendRow {
	for _, m := range rep.Models {
		if m.Name == name {
			return m
		}
	}
	return spendRow{}
}

// TestModelSpendMeteredAtTheBroker: an agent whose model key is a secret
// calls a fake model API (a TLS upstream with the test CA) that answers
// JSON and event streams with known usage, a stream cut short and an
// answer without usage. The usage log and usage --json hold exactly the
// fake's numbers, priced by the built-in table; past the budget the
// broker answers with the API's own 429 (the stream before it delivered
// whole), ps says budget; budget +X lets the next call through without a
// restart; a repository cannot set a budget or a price; land's trailer
// carries the metered figures, and usage still counts the removed
// sandbox.
func TestModelSpendMeteredAtTheBroker(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	dir := filepath.Join(e.Root, "spend")
	tls := filepath.Join(dir, "tls")
	testTLS(t, tls, "api.model.test")
	must(t, os.WriteFile(filepath.Join(dir, "key"), []byte("sk-ant-api03-REALspendKEY0123456789\n"), 0o600))
	e.WriteConfig(`egress_network = %q
base_image = %q
upstream_ca = %q
[budget]
model = "0.018"
[[secret]]
name = "API_KEY"
hosts = ["api.model.test:8443"]
from_file = %q
[[mount]]
source = %q
target = %q
readonly = true
`, e.egressNetwork(), baseImage, filepath.Join(tls, "ca.pem"), filepath.Join(dir, "key"), filepath.Join(binDir, "test-upstream"), brokerClient)

	// A repository's .sandbox.toml can neither budget nor price.
	for _, repo := range []string{"[budget]\nmodel = \"1000.00\"\n", "[[price]]\nmodel = \"claude-*\"\ninput = 0.0\noutput = 0.0\n"} {
		e.WriteFile(".sandbox.toml", repo)
		if r := e.Sandbox("start", "spend", "--dry-run", "--agent", "shell", "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "may not ask for") {
			t.Errorf("a repository set %q:\n%s", repo, r)
		}
	}
	must(t, os.Remove(filepath.Join(e.Repo, ".sandbox.toml")))

	e.MustSandbox("start", "spend", "-d", "--agent", "shell", "--", "sleep", "600")
	startUpstreamWith(t, e.egressNetwork(), []string{"-v", tls + ":/tls:ro", "-e", "UPSTREAM_TLS_CERT=/tls/cert.pem", "-e", "UPSTREAM_TLS_KEY=/tls/key.pem"}, "api.model.test")
	call := func(shape, path string) string {
		t.Helper()
		r := e.MustSandbox("exec", "spend", "--", "sh", "-c", `CLIENT_METHOD=POST `+brokerClient+` client https://api.model.test:8443/model/`+shape+path+` "x-api-key: $API_KEY"`)
		return r.Stdout
	}
	if out := call("json", "/v1/messages"); !strings.HasPrefix(out, "status 200") {
		t.Fatalf("the JSON call:\n%s", out)
	}
	if out := call("sse", "/v1/messages"); !strings.HasPrefix(out, "status 200") || !strings.Contains(out, `"message_stop"`) || strings.Count(out, strings.Repeat("z", 1000)) != 50 {
		t.Errorf("the stream was not delivered whole:\n%.300s", out)
	}
	call("responses", "/v1/responses")
	call("cut", "/v1/messages")
	call("nousage", "/v1/messages")

	rep := e.usage("spend")
	// json: 1000*3 + 200*15 + 100*3.75 + 2000*0.30 = $0.006975
	// sse: 500*1 + 300*5 + 1000*0.10 = $0.0021
	// responses: 1500*1.25 + 400*10 + 500*0.125 = $0.0059375
	// cut: 700*3 + 1*15 = $0.002115 (what was read before the cut)
	want := 0.006975 + 0.0021 + 0.0059375 + 0.002115
	if rep.Total.Requests != 5 || rep.Total.Unknown != 2 || math.Abs(rep.Total.CostUSD-want) > 1e-9 {
		t.Errorf("total: %+v, want 5 requests, 2 unknown, $%.7f", rep.Total, want)
	}
	if m := rep.model("claude-sonnet-4-5"); m.Requests != 2 || m.Usage.Input != 1700 || m.Usage.Output != 201 || m.Usage.CacheWrite != 100 || m.Usage.CacheRead != 2000 {
		t.Errorf("claude-sonnet-4-5: %+v", m)
	}
	if m := rep.model("claude-haiku-4-5"); m.Usage.Input != 500 || m.Usage.Output != 300 || m.Usage.CacheRead != 1000 {
		t.Errorf("claude-haiku-4-5: %+v", m)
	}
	if m := rep.model("gpt-5"); m.Usage.Input != 1500 || m.Usage.CacheRead != 500 || m.Usage.Output != 400 || m.Usage.Reasoning != 100 {
		t.Errorf("gpt-5: %+v", m)
	}
	if m := rep.model("(unknown)"); m.Requests != 1 || m.Unknown != 1 {
		t.Errorf("the answer without usage: %+v", m)
	}

	// $0.0171 of $0.018: the next call goes through whole and passes the
	// budget; the one after is refused as the API would refuse it.
	if out := call("sse", "/v1/messages"); !strings.Contains(out, `"message_stop"`) {
		t.Errorf("the call that passes the budget was cut:\n%.300s", out)
	}
	out := call("json", "/v1/messages")
	if !strings.HasPrefix(out, "status 429") || !strings.Contains(out, `"type":"rate_limit_error"`) || !strings.Contains(out, "budget of $0.02 is spent") {
		t.Errorf("past the budget:\n%s", out)
	}
	if p := e.PsOf("spend"); p.State != "running" {
		t.Errorf("ps --json state %q", p.State)
	}
	if ps := e.MustSandbox("ps"); !strings.Contains(ps.Stdout, " budget ") || !strings.Contains(ps.Stdout, "/$0.02") {
		t.Errorf("ps does not show the spent budget:\n%s", ps.Stdout)
	}
	if rep := e.usage("spend"); rep.Total.Refused != 1 {
		t.Errorf("the refusal is not logged: %+v", rep.Total)
	}

	// Raised without a restart: the next call goes through.
	e.MustSandbox("budget", "spend", "+1.00")
	if out := call("json", "/v1/messages"); !strings.HasPrefix(out, "status 200") {
		t.Errorf("after budget +1.00:\n%s", out)
	}
	if ps := e.MustSandbox("ps"); !strings.Contains(ps.Stdout, "/$1.02") {
		t.Errorf("ps after the raise:\n%s", ps.Stdout)
	}

	// A token budget, set live beside the dollar one: below what was
	// spent, the next call is refused, naming --tokens; taken away, the
	// next goes through.
	if r := e.MustSandbox("budget", "spend", "--tokens", "10k"); !strings.Contains(r.Stdout, "of $1.02 and 10k tokens: the broker refuses its model calls") {
		t.Errorf("budget --tokens 10k:\n%s", r)
	}
	if out := call("json", "/v1/messages"); !strings.HasPrefix(out, "status 429") || !strings.Contains(out, "budget of 10k tokens is spent") || !strings.Contains(out, "--tokens +TOKENS") {
		t.Errorf("past the token budget:\n%s", out)
	}
	if p := e.PsOf("spend"); p.Spend == nil || !p.Spend.Over || p.Spend.Budget == nil || p.Spend.Budget.Tokens != 10_000 || math.Abs(p.Spend.Budget.USD-1.018) > 1e-9 {
		t.Errorf("ps --json past the token budget: %+v", p.Spend)
	}
	e.MustSandbox("budget", "spend", "--tokens", "0")
	if out := call("json", "/v1/messages"); !strings.HasPrefix(out, "status 200") {
		t.Errorf("after budget --tokens 0:\n%s", out)
	}

	// A follow-up start's --budget sets the budget of the proxy made for it.
	e.MustSandbox("exec", "spend", "--", "sh", "-c", "echo done > result.txt")
	e.MustSandbox("stop", "spend")
	if r := e.MustSandbox("start", "spend", "-d", "--budget", "2.00", "--", "sleep", "600"); !strings.Contains(r.Stderr, "budget for spend is now $2.00") {
		t.Errorf("the follow-up's --budget:\n%s", r)
	}
	if p := e.PsOf("spend"); p.Spend == nil || p.Spend.Budget == nil || p.Spend.Budget.USD != 2 || p.Spend.Budget.Tokens != 0 || p.Spend.Over {
		t.Errorf("ps --json after the follow-up's --budget: %+v", p.Spend)
	}
	if out := call("json", "/v1/messages"); !strings.HasPrefix(out, "status 200") {
		t.Errorf("a call after the follow-up:\n%s", out)
	}

	// Land: the trailer carries the metered figures.
	rep = e.usage("spend")
	e.MustSandbox("stop", "spend")
	e.MustSandbox("land", "spend")
	msg := e.Git("log", "-1", "--format=%B")
	u := rep.Total.Usage
	if !strings.Contains(msg, "Sandbox-Usage: "+meter.Short(u.Input+u.CacheRead+u.CacheWrite)+" in, "+meter.Short(u.Output)+" out, $") {
		t.Errorf("land's trailer (usage %+v):\n%s", rep.Total, msg)
	}
	after := e.usage()
	if len(after.Sandboxes) != 1 || !after.Sandboxes[0].Removed || after.Sandboxes[0].Requests != rep.Total.Requests {
		t.Errorf("usage after land: %+v", after.Sandboxes)
	}
}

// TestFleetBudgetStopsTheRunner: a fleet's budget is shared: the first
// task's model call spends it, and the runner does not start the second,
// which fleet ps shows as budget, and why.
func TestFleetBudgetStopsTheRunner(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	dir := filepath.Join(e.Root, "spend")
	tls := filepath.Join(dir, "tls")
	testTLS(t, tls, "api.model.test")
	must(t, os.WriteFile(filepath.Join(dir, "key"), []byte("sk-ant-api03-REALfleetKEY0123456789\n"), 0o600))
	e.WriteConfig(`egress_network = %q
base_image = %q
upstream_ca = %q
[[secret]]
name = "API_KEY"
hosts = ["api.model.test:8443"]
from_file = %q
[[mount]]
source = %q
target = %q
readonly = true
`, e.egressNetwork(), baseImage, filepath.Join(tls, "ca.pem"), filepath.Join(dir, "key"), filepath.Join(binDir, "test-upstream"), brokerClient)
	// A sandbox of its own first: its start makes the egress network the
	// fake model API joins.
	e.MustSandbox("start", "first", "-d", "--agent", "shell", "--", "true")
	startUpstreamWith(t, e.egressNetwork(), []string{"-v", tls + ":/tls:ro", "-e", "UPSTREAM_TLS_CERT=/tls/cert.pem", "-e", "UPSTREAM_TLS_KEY=/tls/key.pem"}, "api.model.test")

	task := `command = ["sh", "-c", "CLIENT_METHOD=POST ` + brokerClient + ` client https://api.model.test:8443/model/json/v1/messages \"x-api-key: $API_KEY\" > call.txt"]`
	tasks := e.writeTasks("tasks.toml", "max_parallel = 1\nbudget = \"0.005\"\n\n[[task]]\nbranch = \"a\"\n"+task+"\n\n[[task]]\nbranch = \"b\"\n"+task+"\n")
	e.MustSandbox("fleet", "start", tasks)
	if r := e.Sandbox("fleet", "wait", "--timeout", "4m"); r.Code == 124 {
		t.Fatalf("fleet wait: %s", r)
	}
	if got := readFile(filepath.Join(e.Worktree("a"), "call.txt")); !strings.HasPrefix(got, "status 200") {
		t.Errorf("task a's call: %q", got)
	}
	reps := e.fleetPs(t)
	if len(reps) != 1 || len(reps[0].Tasks) != 2 || reps[0].Tasks[0].Status != "exited" || reps[0].Tasks[1].Status != "budget" {
		t.Fatalf("fleet ps: %+v", reps)
	}
	if e.hasSandbox("b") {
		t.Error("task b was started past the fleet's budget")
	}
	if r := e.MustSandbox("fleet", "ps"); !strings.Contains(r.Stdout, "not started: the fleet's budget of $0.01 is spent ($0.01)") {
		t.Errorf("fleet ps does not say why b did not start:\n%s", r.Stdout)
	}
	if rep := e.usage("--fleet", "tasks"); rep.Total.Requests != 1 || math.Abs(rep.Total.CostUSD-0.006975) > 1e-9 {
		t.Errorf("usage --fleet: %+v", rep.Total)
	}
}

// TestCopyModeSpendUnmetered: copy mode (the second engine) takes no
// [[secret]], so no broker meters it: a start that would need one is
// refused naming a local engine; a sandbox there is "unmetered" in ps and
// ps --json, usage names it apart with why, and budget (dollars or
// tokens) and a follow-up's --budget are refused, nothing changed.
func TestCopyModeSpendUnmetered(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	must(t, os.WriteFile(filepath.Join(e.Root, "key"), []byte("sk-ant-api03-REALspendKEY0123456789\n"), 0o600))
	e.WriteConfig("base_image = %q\n[budget]\nmodel = \"5.00\"\n[[secret]]\nname = \"API_KEY\"\nhosts = [\"api.model.test\"]\nfrom_file = %q\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n",
		baseImage, filepath.Join(e.Root, "key"), host)
	r := e.Sandbox("start", "cu", "-d", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "allowlist", "--", "sleep", "600")
	if r.Code == 0 || !strings.Contains(r.Stderr, "cannot take your [[secret]] entries") || !strings.Contains(r.Stderr, "local engine") {
		t.Fatalf("a copy-mode start with a secret under the allowlist:\n%s", r)
	}
	e.MustSandbox("start", "cu", "-d", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "600")

	if p := e.PsOf("cu"); p.Engine != "two" || p.Spend == nil || p.Spend.Metered || p.Spend.Spent != nil {
		t.Errorf("ps --json of the copy-mode sandbox: engine %q, spend %+v", p.Engine, p.Spend)
	}
	// With no sandbox metered, ps leaves SPEND out rather than show a
	// zero (the unit tests show "unmetered" beside a metered one).
	if ps := e.MustSandbox("ps"); strings.Contains(ps.Stdout, "SPEND") || strings.Contains(ps.Stdout, "$0") || !strings.Contains(ps.Stdout, "cu ") {
		t.Errorf("ps of the copy-mode sandbox alone:\n%s", ps.Stdout)
	}
	rep := e.usage()
	u := e.MustSandbox("usage")
	if rep.Total.Requests != 0 || len(rep.Sandboxes) != 0 || !strings.Contains(u.Stderr, "not metered (copy mode: its engine takes no [[secret]], so no credential broker sees its model calls): cu") {
		t.Errorf("usage of the copy-mode sandbox: %+v\n%s", rep, u)
	}
	for _, args := range [][]string{{"budget", "cu", "+1.00"}, {"budget", "cu", "--tokens", "2M"}} {
		if r := e.Sandbox(args...); r.Code == 0 || !strings.Contains(r.Stderr, "not metered (copy mode: engine two takes no [[secret]]") || !strings.Contains(r.Stderr, "local engine") {
			t.Errorf("%s:\n%s", strings.Join(args, " "), r)
		}
	}
	if r := e.MustSandbox("budget", "cu"); !strings.Contains(r.Stdout, "cu: unmetered (copy mode: engine two") {
		t.Errorf("budget cu:\n%s", r)
	}
	e.MustSandbox("stop", "cu")
	if r := e.Sandbox("start", "cu", "-d", "--budget", "2.00", "--", "sleep", "600"); r.Code == 0 || !strings.Contains(r.Stderr, "not metered (copy mode") {
		t.Errorf("a follow-up's --budget on the copy-mode sandbox:\n%s", r)
	}
	if p := e.PsOf("cu"); p.State == "running" {
		t.Errorf("the refused follow-up started the sandbox: %+v", p)
	}
	e.MustSandbox("rm", "--force", "cu")
	if c := containersOn(t, host, e.RepoID()); len(c) > 0 {
		t.Errorf("containers left on the engine: %q", c)
	}
}
