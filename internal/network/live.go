package network

// Live changes to a sandbox's allow list (git sandbox net allow, deny):
// kept in its record, so every new proxy of the sandbox gets them, and
// written beside the running proxy's configuration, which it reads again
// at its next connection. A live entry is an --allow entry: parsed the
// same way, and vetted by the proxy like every other (IP literals, local
// and private addresses, the broker's hosts stay as they are).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// EntryStrings are entries as written.
func EntryStrings(entries []egress.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.String()
	}
	return out
}

// ChangeLive allows (or, with deny, denies) entries, parsed as --allow
// takes them, in a sandbox's record (called under the record's lock) and
// returns those that changed something. A sandbox without a proxy is
// refused.
func ChangeLive(r *record.Record, deny bool, entries []string) ([]egress.Entry, error) {
	if r.Egress == nil {
		mode := r.Network()
		if mode == "" {
			mode = container.NetworkOpen
		}
		return nil, usererr.New("sandbox %s has no egress proxy: its network is %s", termsafe.String(r.Branch), mode).
			Hint("an allow list is kept by allowlist mode's proxy, the default for new sandboxes")
	}
	var parsed []egress.Entry
	parse := egress.ParseAllowEntry
	if deny {
		parse = egress.ParseEntry // a denial names hosts only
	}
	for _, s := range entries {
		e, err := parse(s, egress.FromLive)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, e)
	}
	if r.Egress.Live == nil {
		r.Egress.Live = &egress.LivePolicy{}
	}
	return r.Egress.Live.Change(deny, parsed), nil
}

// LiveTarget is the sandbox a live change is made to.
type LiveTarget struct {
	// Branch names it.
	Branch string
	// Update changes its record under the record's lock.
	Update func(fn func(*record.Record) error) error
	// Remote says its files are on the engine (copy mode); Engine reaches
	// that engine.
	Remote bool
	Engine func(context.Context) (Engine, error)
}

// ChangeEgress allows (or, with deny, denies) entries on a sandbox's proxy
// at once and on every later start; it returns the entries that changed.
func (e *Env) ChangeEgress(ctx context.Context, t LiveTarget, deny bool, entries []string) ([]string, error) {
	kind := "allow"
	if deny {
		kind = "deny"
	}
	changed, err := e.changeLive(ctx, t, kind, func(r *record.Record) ([]egress.Entry, error) {
		return ChangeLive(r, deny, entries)
	})
	return EntryStrings(changed), err
}

// changeLive makes a live change to a sandbox: change edits its record,
// and the live file the proxy reads is written under the record's lock,
// so two changes at once both reach it (written after the lock, the
// older could land last). A copy-mode proxy's volume is loaded again
// under the lock too. The entries that changed are logged as kind.
func (e *Env) changeLive(ctx context.Context, t LiveTarget, kind string, change func(*record.Record) ([]egress.Entry, error)) ([]egress.Entry, error) {
	var d Engine
	if t.Remote {
		var err error
		if d, err = t.Engine(ctx); err != nil {
			return nil, err
		}
	}
	var changed []egress.Entry
	var branch string
	err := t.Update(func(r *record.Record) (err error) {
		if changed, err = change(r); err != nil {
			return err
		}
		branch = r.Branch
		return e.PushLive(ctx, d, r, t.Remote)
	})
	if err != nil || len(changed) == 0 {
		return changed, err
	}
	return changed, egress.LogPolicyChange(e.NetLog(branch), kind, changed)
}

// PushLive gives a sandbox's proxy its live changes now (called under the
// record's lock). Bind mode: the file beside the proxy's configuration,
// which the proxy reads again at its next connection. Copy mode
// (onEngine): the configuration loaded again into the proxy's volume when
// the proxy runs; a stopped one gets it at start.
func (e *Env) PushLive(ctx context.Context, d Engine, r *record.Record, onEngine bool) error {
	if r.Egress == nil {
		return nil
	}
	dir, logDir := e.Layout.ProxyDir(r.Branch), e.Layout.NetLogDir(r.Branch)
	for _, d := range []string{dir, logDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
	}
	if r.Egress.Live != nil {
		r.Egress.Live.PruneOnce(time.Now())
	}
	if err := egress.WriteLive(filepath.Join(dir, egress.LiveFile), r.Egress.Live); err != nil {
		return err
	}
	if onEngine {
		return e.reloadProxyVolumes(ctx, d, r)
	}
	return nil
}

// reloadProxyVolumes loads the configuration directory into a running
// copy-mode proxy's volume again.
func (e *Env) reloadProxyVolumes(ctx context.Context, d Engine, r *record.Record) error {
	st, err := d.Inspect(ctx, r.Egress.Proxy)
	if container.IsNotFound(err) || (err == nil && !st.Running) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	p, err := e.PlanEgress(EgressInput{Name: r.Container, Branch: r.Branch, Runtime: e.Config.Runtime, Agent: r.Agent})
	if err != nil {
		return err
	}
	if err := ProxyOnVolumes(p); err != nil {
		return err
	}
	if _, err := EnsureProxyImage(ctx, d, p.binary, e.UI); err != nil {
		return err
	}
	var keep undoList // the volumes are the proxy's: never removed here
	return e.loadProxyVolumes(ctx, d, r.Branch, p, &keep)
}

// PolicyEntry is one entry of a sandbox's effective allow list, for git
// sandbox net --policy.
type PolicyEntry struct {
	Entry  string        `json:"entry"`
	Source egress.Source `json:"source"`
	// Deny marks a removal (a deny list's entry, or a live denial).
	Deny bool `json:"deny,omitempty"`
	// RemovedBy names the removal that covers every destination the entry
	// allows ("" when none does).
	RemovedBy string `json:"removed_by,omitempty"`
}

// EffectivePolicy is a sandbox's allow list as its proxy applies it: the
// entries of its start with their sources, then its live changes.
func EffectivePolicy(r *record.Record) ([]PolicyEntry, error) {
	if r.Egress == nil {
		return nil, nil
	}
	var cfg egress.ProxyConfig
	cfg.Allow, cfg.Remove = r.Egress.Allow, r.Egress.Remove
	o, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	pol, err := o.Policy.With(r.Egress.Live)
	if err != nil {
		return nil, err
	}
	var out []PolicyEntry
	for _, a := range pol.Allow {
		pe := PolicyEntry{Entry: a.String(), Source: a.Source}
		if rm, ok := pol.Removed(a); ok {
			pe.RemovedBy = fmt.Sprintf("%s (%s)", rm, rm.Source)
		}
		out = append(out, pe)
	}
	for _, rm := range pol.Remove {
		out = append(out, PolicyEntry{Entry: rm.String(), Source: rm.Source, Deny: true})
	}
	return out, nil
}
