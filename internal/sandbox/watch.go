package sandbox

import (
	"context"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// watchSettle is how long Changes waits for more events before it reports:
// one stop is several events (kill, die, stop), reported once. The daemon
// sends "die" before its container list shows the exit, so every burst is
// reported again watchConfirm later.
const (
	watchSettle  = 100 * time.Millisecond
	watchConfirm = time.Second
)

// Changes reports when any container of this repository's sandboxes
// changes state (created, started, exited, paused, removed — the agent's,
// its verify's, its proxy's), from the engine's event stream: nothing is
// polled. Bursts are reported once. The channel closes when ctx ends or
// the stream breaks, and the error channel then says why.
func (e *Env) Changes(ctx context.Context) (<-chan struct{}, <-chan error) {
	out := make(chan struct{}, 1)
	errc := make(chan error, 1)
	d, err := e.Engine(ctx)
	if err != nil {
		errc <- err
		close(out)
		close(errc)
		return out, errc
	}
	events, evErr := d.Events(ctx, container.LabelRepo+"="+e.Repo.ID)
	go func() {
		defer close(errc)
		defer close(out)
		var settle, confirm <-chan time.Time
		report := func() {
			select {
			case out <- struct{}{}:
			default: // one pending report covers this one
			}
		}
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					if err, ok := <-evErr; ok && err != nil {
						errc <- err
					}
					return
				}
				e.UI.Tracef("event %s %s", ev.Action, ev.Name)
				if settle == nil {
					settle = time.After(watchSettle)
				}
				confirm = time.After(watchConfirm)
			case <-settle:
				settle = nil
				report()
			case <-confirm:
				confirm = nil
				report()
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errc
}
