package egress

// Prompting (network_prompt): a connection to a host no entry names waits
// in a held.Room for the user's answer instead of being refused at once.
// The answer comes as a live change (an allow, a denial, an entry allowed
// once), so a released connection goes on exactly as one the policy
// allowed from the start, checked again at its dial.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress/held"
)

// hold waits for the user's answer to a connection the policy refused
// with err, when prompting is on and no entry names the destination (a
// removal, an IP literal, a bad name are refused at once). It returns the
// policy's decision once the destination is allowed, or the refusal, and
// notes the wait in rec.
func (p *Proxy) hold(ctx context.Context, rec *Record, t Target, kind Kind, err error) (Decision, error) {
	var d *DeniedError
	if p.room == nil || !errors.As(err, &d) || !d.unlisted || t.Addr.IsValid() {
		return Decision{}, err
	}
	start := time.Now()
	var dec Decision
	last := err
	v := p.room.Wait(ctx, t.Host, t.Port, kind.String(), held.Entry(t.Host, t.Port, kind.DefaultPort()), func() held.Verdict {
		dec, last = p.policy.get().Check(t, kind)
		if last == nil {
			return held.Allowed
		}
		if errors.As(last, &d) && !d.unlisted {
			return held.Denied
		}
		return held.Pending
	})
	if v != held.Full {
		rec.Held = float64(time.Since(start).Microseconds()) / 1000
	}
	switch v {
	case held.Allowed:
		return dec, nil
	case held.Denied:
		return Decision{}, last
	case held.Full:
		return Decision{}, &DeniedError{Target: t, Reason: fmt.Sprintf("not in the allow list (%d connections wait for an answer already)", held.MaxHeld)}
	}
	return Decision{}, &DeniedError{Target: t, Reason: fmt.Sprintf("not in the allow list (held %s for an answer; none came)", p.room.Timeout())}
}
