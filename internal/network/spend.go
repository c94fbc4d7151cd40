package network

// Spend: the credential broker meters the model calls it passes on
// (internal/meter). The host gives the proxy its prices and the sandbox's
// budget in a file beside its configuration, written again when the user
// changes the budget (git sandbox budget), which the proxy reads at its
// next model call. The proxy appends the usage log beside its decision
// log; rm keeps it (ArchiveUsage), as it keeps the snapshots.

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
)

// MeterSettingsFile is the meter's prices and budget in the proxy's
// configuration directory.
const MeterSettingsFile = "meter.json"

// budget is what a new sandbox may spend: asked (--budget), else the
// user's budget.model and budget.model_tokens.
func (e *Env) budget(asked string) (meter.Budget, error) {
	b, err := e.Config.ModelBudget()
	if err != nil || asked == "" {
		return b, err
	}
	usd, err := meter.ParseDollars(asked)
	if err != nil {
		return b, usererr.New("--budget: %v", err).Hint("give dollars, such as --budget 5.00")
	}
	b.USD = usd
	return b, nil
}

// CheckBudget refuses --budget for a sandbox whose spend cannot be metered:
// no allowlist proxy, or no secret for it to broker.
func CheckBudget(asked string, allowlist bool, secrets int) error {
	if asked == "" || (allowlist && secrets > 0) {
		return nil
	}
	return usererr.New("--budget needs the credential broker: the agent's model key must be a [[secret]] of your config, in allowlist mode").
		Hint("with the key in the agent's environment nothing on this machine sees the calls it makes, so no budget could hold").
		Hint("on an engine in copy mode (a remote engine, Kubernetes) no budget holds either: it takes no [[secret]]")
}

// meterSettings are the proxy's prices and budget b.
func (e *Env) meterSettings(b meter.Budget) *meter.Settings {
	return &meter.Settings{Prices: meter.WithBuiltin(e.Config.Prices), Budget: b}
}

// meterConfig writes the meter's settings into the proxy's configuration
// directory dir and points cfg at them and at the usage log.
func (e *Env) meterConfig(cfg *egress.ProxyConfig, dir string, b meter.Budget) error {
	if err := meter.WriteSettings(filepath.Join(dir, MeterSettingsFile), e.meterSettings(b)); err != nil {
		return err
	}
	cfg.Meter = &meter.Files{Usage: ProxyLogDir + "/" + meter.UsageFile, Settings: ProxyConfigDir + "/" + MeterSettingsFile}
	return nil
}

// UsageLog is a sandbox's usage log on this machine.
func (e *Env) UsageLog(branch string) string {
	return filepath.Join(e.Layout.NetLogDir(branch), meter.UsageFile)
}

// Metered reports whether the broker meters r's model calls: allowlist
// mode with a secret, on an engine that sees this machine's files. A
// copy-mode sandbox has no broker (its start refuses [[secret]] entries),
// so nothing meters it and no usage log of it exists.
func Metered(r *record.Record) bool {
	return !workspace.OnEngine(r) && r.Egress != nil && len(r.Egress.Secrets) > 0
}

// WhyUnmetered says why r's model calls are not metered ("" when they are).
func WhyUnmetered(r *record.Record) string {
	switch {
	case Metered(r):
		return ""
	case workspace.OnEngine(r):
		return "copy mode: engine " + termsafe.String(r.Engine) + " takes no [[secret]], so no credential broker sees its model calls"
	}
	return "the agent holds its own model key"
}

// CheckBudgetChange refuses a budget change (dollars, tokens: see
// meter.Budget.Change) that cannot hold for r or does not parse, before
// anything changes.
func CheckBudgetChange(r *record.Record, dollars, tokens string) error {
	if !Metered(r) {
		err := usererr.New("sandbox %s is not metered (%s): no budget can hold for it", termsafe.String(r.Branch), WhyUnmetered(r))
		if workspace.OnEngine(r) {
			return err.Hint("metering needs a sandbox on a local engine, in allowlist mode, with the agent's model key as a [[secret]] of your config")
		}
		return err.Hint("a budget holds for a sandbox started in allowlist mode with the agent's model key as a [[secret]] of your config")
	}
	if _, err := r.Egress.Budget.Change(dollars, tokens); err != nil {
		return usererr.New("%v", err).Hint("git sandbox budget BRANCH +2.00 raises it by $2; git sandbox budget BRANCH 10.00 sets it; --tokens 2M or --tokens +500k for tokens")
	}
	return nil
}

// ChangeBudget changes a sandbox's budget (dollars, tokens: "+X" raises
// that bound, "X" sets it; see meter.Budget.Change) in its record and, at
// once, in its running proxy's settings, which the proxy reads again at
// its next model call.
func (e *Env) ChangeBudget(t LiveTarget, dollars, tokens string) (meter.Budget, error) {
	var rec *record.Record
	var b meter.Budget
	err := t.Update(func(r *record.Record) error {
		rec = r
		if err := CheckBudgetChange(r, dollars, tokens); err != nil {
			return err
		}
		b, _ = r.Egress.Budget.Change(dollars, tokens)
		r.Egress.Budget = b
		return nil
	})
	if err != nil {
		return b, err
	}
	dir := e.Layout.ProxyDir(rec.Branch)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return b, err
	}
	return b, meter.WriteSettings(filepath.Join(dir, MeterSettingsFile), e.meterSettings(b))
}

// ArchiveUsage moves a removed sandbox's usage log to the repository's
// usage archive, where git sandbox usage still reads it; a sandbox without
// one has nothing to keep.
func (e *Env) ArchiveUsage(branch, started string) error {
	src := e.UsageLog(branch)
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	dir := e.Layout.UsageArchive()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name := strings.ReplaceAll(branch, "/", "%2F") + "@" + started + ".jsonl"
	return os.Rename(src, filepath.Join(dir, name))
}

// SpendOf is r's spend for ps: its usage log (beside netLog, the
// decision log) against its budget; unmetered without a broker secret.
func SpendOf(r *record.Record, netLog string) *meter.Status {
	if !Metered(r) {
		return &meter.Status{}
	}
	return meter.StatusOf(filepath.Join(filepath.Dir(netLog), meter.UsageFile), r.Egress.Budget)
}

// SpendAlert is what r's usage log at path says of its budget (see
// meter.Alert); "" for a sandbox without a budget or not metered.
func SpendAlert(r *record.Record, path string) string {
	if !Metered(r) || r.Egress.Budget.IsZero() {
		return ""
	}
	return meter.Alert(path, r.Egress.Budget)
}

// CheckFollowUpBudget refuses a --budget that cannot hold for an existing
// sandbox before anything changes: the dollars a new sandbox's --budget
// takes, for a sandbox the broker meters.
func CheckFollowUpBudget(r *record.Record, asked string) error {
	if asked == "" {
		return nil
	}
	if strings.HasPrefix(strings.TrimSpace(asked), "+") {
		return usererr.New("--budget %s: start's --budget sets a budget, it does not raise one", asked).
			Hint("raise it with git sandbox budget %s %s, or give the new budget: --budget 5.00", termsafe.String(r.Branch), asked)
	}
	if _, err := meter.ParseDollars(asked); err != nil {
		return usererr.New("--budget: %v", err).
			Hint("give dollars, such as --budget 5.00; git sandbox budget %s +2.00 raises it by $2", termsafe.String(r.Branch))
	}
	return CheckBudgetChange(r, asked, "")
}
