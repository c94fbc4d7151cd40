package network

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Networks are a sandbox's networks to make: allowlist mode's plan, or
// open mode's network of its own.
type Networks struct {
	Branch      string
	Egress      *EgressPlan
	OpenNetwork string
}

// Make makes the sandbox's networks, with its egress proxy started
// (allowlist mode: the CA's files written first when it has secrets or
// hosts to inspect).
// What it makes is added to u.
func (e *Env) Make(ctx context.Context, d Engine, n Networks, u Undo) error {
	if eg := n.Egress; eg != nil {
		if eg.Terminates() {
			if err := writeTrust(eg.configDir, e.Layout.TrustDir(n.Branch), eg.caHosts()); err != nil {
				return err
			}
		}
		if err := e.createEgress(ctx, d, n.Branch, eg, u); err != nil {
			return err
		}
	}
	if n.OpenNetwork != "" {
		return e.createOpenNetwork(ctx, d, n.Branch, n.OpenNetwork, u)
	}
	return nil
}

// Denied is a destination the proxy refused.
type Denied struct {
	Host   string
	Port   uint16
	Reason string
}

// Entry is what --allow takes for it: the host, with the port when it is
// not 443 or 80.
func (h Denied) Entry() string {
	if h.Port != 0 && h.Port != 443 && h.Port != 80 {
		return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
	}
	return h.Host
}

// DeniedSince reads the plan's decision log (allowlist mode on this
// machine; a copy-mode log is on the engine) for the destinations denied
// from since on, each once, in the order first denied.
func (p *EgressPlan) DeniedSince(since time.Time) []Denied {
	if p == nil || p.volumes != nil {
		return nil
	}
	since = since.Add(-time.Second) // the proxy's clock is this machine's; a log's times are rounded
	var out []Denied
	seen := map[string]bool{}
	for _, path := range []string{egress.PreviousGeneration(p.Log), p.Log} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		_ = egress.ScanLog(f, func(r egress.Record) error {
			key := r.Host + ":" + strconv.Itoa(int(r.Port))
			if r.Decision == egress.Denied && !r.Time.Before(since) && !seen[key] {
				seen[key] = true
				out = append(out, Denied{Host: r.Host, Port: r.Port, Reason: r.Reason})
			}
			return nil
		})
		f.Close()
	}
	return out
}

// BuildDenied is a failed build on a sandbox's network, with the
// destinations the sandbox's proxy denied meanwhile (the likely cause) and
// how to allow them, or, with no network, that the build had none.
func BuildDenied(err error, mode container.NetworkMode, denied []Denied) error {
	if mode == container.NetworkNone {
		return withHints(err, "", "the build ran with no network, as the sandbox does (network = none); a step that downloads needs network = \"allowlist\" and its hosts allowed")
	}
	if len(denied) == 0 {
		return err
	}
	var names, entries []string
	for _, h := range denied {
		names = append(names, termsafe.String(net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))))+" ("+termsafe.String(h.Reason)+")")
		entries = append(entries, termsafe.String(h.Entry()))
	}
	return withHints(err, "; the sandbox's network policy denied the build "+strings.Join(names, ", "),
		DeniedHint(entries))
}

// DeniedHint says how to allow the hosts a build was denied.
func DeniedHint(entries []string) string {
	flags := make([]string, len(entries))
	quoted := make([]string, len(entries))
	for i, e := range entries {
		flags[i] = "--allow " + e
		quoted[i] = strconv.Quote(e)
	}
	return "if the build needs them, start with " + strings.Join(flags, " ") +
		" (or allow = [" + strings.Join(quoted, ", ") + "] in " + config.UserPath() + "); a host a deny list removed stays denied"
}

// withHints adds to err's message (a user error's, or a new one) and
// hints.
func withHints(err error, more string, hints ...string) error {
	ue, ok := usererr.As(err)
	if !ok {
		ue = usererr.Wrap(err, "%v", err)
	}
	out := usererr.Wrap(err, "%s%s", ue.Msg, more)
	out.Hints = append(append(out.Hints, ue.Hints...), hints...)
	out.Code = ue.Code
	return out
}
