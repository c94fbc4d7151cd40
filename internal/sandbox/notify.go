package sandbox

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/rescue"

	"github.com/git-sandbox/git-sandbox/internal/notify"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// notifiedKept is how many announced events a record remembers.
const notifiedKept = 64

// notify announces an event of sb as the user's config asks, once: key
// names this occurrence (the container run, the tree verified), and the
// record remembers it under its lock before the announcement runs, so a
// second supervisor seeing the same exit stays quiet.
func (e *Env) notify(ctx context.Context, sb *Sandbox, ev notify.Event, code *int, key string) {
	if e.Config == nil || strings.TrimSpace(e.Config.Notify) == "" {
		return
	}
	name := string(ev) + " " + key
	first := false
	err := sb.Update(func(r *record.Record) error {
		if slices.Contains(r.Notified, name) {
			return nil
		}
		first = true
		r.Notified = append(r.Notified, name)
		if n := len(r.Notified); n > notifiedKept {
			r.Notified = r.Notified[n-notifiedKept:]
		}
		return nil
	})
	if err != nil {
		e.UI.Warnf("notify %s: %v", ev, err)
		return
	}
	if !first {
		return
	}
	n := notify.Notification{Sandbox: sb.Branch, Repo: e.Repo.MainWorkTree, Event: ev, ExitCode: code}
	if err := notify.Send(context.WithoutCancel(ctx), e.Config.Notify, n, e.UI.Writer()); err != nil {
		e.UI.Warnf("%v", err)
	}
}

// notifyDenied announces the first egress refusal of a run.
func (e *Env) notifyDenied(ctx context.Context, sb *Sandbox, run string) {
	if sb.Egress == nil || e.Config == nil || e.Config.Notify == "" {
		return
	}
	sum, err := netlog.SummarizeFile(e.network().NetLog(sb.Branch))
	if err != nil || sum.Denied+sum.Leaks == 0 {
		return
	}
	e.notify(ctx, sb, notify.EgressDenied, nil, run)
}

// notifySpend announces a metered sandbox's spend past 80% of its budget,
// and the budget spent, once for each budget it is given.
func (e *Env) notifySpend(ctx context.Context, sb *Sandbox) {
	if ev := network.SpendAlert(sb.Record, e.network().UsageLog(sb.Branch)); ev != "" {
		e.notify(ctx, sb, notify.Event(ev), nil, sb.Egress.Budget.String())
	}
}

// notifyConflict announces that landing sb's newest snapshot now would
// conflict with its base branch (the conflict forecast), once per pair of
// snapshot and base tip.
func (e *Env) notifyConflict(ctx context.Context, sb *Sandbox) {
	if e.Config == nil || e.Config.Notify == "" {
		return
	}
	tips := rescue.ReadTips(ctx, e.Git(), sb.BaseRef)
	fc, err := e.forecast(ctx, []*Sandbox{sb}, tips, true)
	if err != nil {
		e.UI.Warnf("conflict forecast: %v", err)
		return
	}
	r := fc[sb.Branch]
	if r == nil || len(r.Base) == 0 {
		return
	}
	tip, _ := e.Git().RevParse(ctx, sb.BaseRef)
	e.notify(ctx, sb, notify.LandConflict, nil, tips[sb.Refs().Rescue()].Tree+" "+tip.String())
}

// recordUsage reads the usage the agent reported at the end of its output,
// if its adapter knows how, and keeps it in the record under the run.
func (e *Env) recordUsage(ctx context.Context, sb *Sandbox, run string) {
	if !agent.Reports(sb.Agent) {
		return
	}
	d, err := e.Engine(ctx)
	if err != nil {
		return
	}
	u, ok, err := agent.Reported(sb.Agent, func(w io.Writer) error {
		return d.Logs(ctx, sb.Container, container.LogsOptions{Tail: agent.ReportedTailLines, Stdout: w, Stderr: io.Discard})
	})
	if err != nil {
		e.UI.Warnf("read the agent's usage: %v", err)
		return
	}
	if !ok {
		return
	}
	if err := sb.Update(func(r *record.Record) error {
		if r.Usage == nil {
			r.Usage = map[string]agent.Usage{}
		}
		r.Usage[run] = u
		return nil
	}); err != nil {
		e.UI.Warnf("record the agent's usage: %v", err)
		return
	}
	e.UI.Infof("%s agent reported %s", time.Now().Format(time.RFC3339), u)
}
