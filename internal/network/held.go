package network

// Held connections (network_prompt): the proxy writes the questions
// waiting to held.json in the sandbox's log directory; the answers are
// live changes. "Allow once" is an entry allowed for OnceWindow: the held
// connections go through, and a question is asked again after.

import (
	"context"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// OnceWindow is how long an entry allowed once stays allowed: long enough
// for the held connections to see it, short enough to be once.
const OnceWindow = 10 * time.Second

// Held returns the questions a sandbox's proxy holds now.
func (e *Env) Held(branch string) ([]held.Request, error) {
	return held.Read(filepath.Join(e.Layout.NetLogDir(branch), held.File), time.Now())
}

// AllowOnce answers the questions held for entries (a question's entry or
// host) with "allow once"; a name no question holds is refused, nothing
// changed. It returns the entries allowed.
func (e *Env) AllowOnce(ctx context.Context, t LiveTarget, entries []string) ([]string, error) {
	qs, err := e.Held(t.Branch)
	if err != nil {
		return nil, err
	}
	var allow []string
	for _, want := range entries {
		found := false
		for _, q := range qs {
			if q.Entry == want || q.Host == want {
				found = true
				allow = append(allow, q.Entry)
			}
		}
		if !found {
			return nil, usererr.New("sandbox %s holds no connection to %s", termsafe.String(t.Branch), termsafe.String(want)).
				Hint("git sandbox net pending %s lists what it holds; git sandbox net allow %s %s allows it for the sandbox", termsafe.String(t.Branch), termsafe.String(t.Branch), termsafe.String(want))
		}
	}
	changed, err := e.changeLive(ctx, t, "allow once", func(r *record.Record) ([]egress.Entry, error) {
		if r.Egress == nil {
			return nil, usererr.New("sandbox %s has no egress proxy", termsafe.String(r.Branch))
		}
		if r.Egress.Live == nil {
			r.Egress.Live = &egress.LivePolicy{}
		}
		var out []egress.Entry
		now := time.Now()
		for _, s := range allow {
			en, err := egress.ParseEntry(s, egress.FromOnce)
			if err != nil {
				return nil, err
			}
			r.Egress.Live.AllowOnce(s, now.Add(OnceWindow), now)
			out = append(out, en)
		}
		return out, nil
	})
	return EntryStrings(changed), err
}

// WatchHeld calls each once for every new question the sandbox's proxy
// holds, looking every second until ctx ends.
func (e *Env) WatchHeld(ctx context.Context, branch string, each func(held.Request)) {
	seen := map[string]bool{}
	for {
		qs, _ := e.Held(branch) // a file being replaced is read next time
		for _, q := range qs {
			if !seen[q.ID] {
				seen[q.ID] = true
				each(q)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
