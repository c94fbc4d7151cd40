package container

import (
	"context"
	"time"
)

// changeSettle is how long Changes waits for more events before it
// reports: one stop is several events (kill, die, stop), reported once. An
// engine may send "die" before its container list shows the exit, so
// every burst is reported again changeConfirm later.
const (
	changeSettle  = 100 * time.Millisecond
	changeConfirm = time.Second
)

// Changes turns an engine's event stream into one report per burst of
// changes (and again a second later), never blocking on a slow reader: a
// pending report covers the next. The channel closes when ctx ends or the
// stream breaks, and the error channel then says why. trace, when set, is
// told every event.
func Changes(ctx context.Context, events <-chan Event, evErr <-chan error, trace func(Event)) (<-chan struct{}, <-chan error) {
	out := make(chan struct{}, 1)
	errc := make(chan error, 1)
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
				if trace != nil {
					trace(ev)
				}
				if settle == nil {
					settle = time.After(changeSettle)
				}
				confirm = time.After(changeConfirm)
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
