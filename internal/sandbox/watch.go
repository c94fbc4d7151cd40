package sandbox

import (
	"context"

	"github.com/git-sandbox/git-sandbox/container"
)

// Changes reports when any container of this repository's sandboxes
// changes state (created, started, exited, paused, removed — the agent's,
// its verify's, its proxy's), from the engine's event stream, a burst
// once (container.Changes). The channel closes when ctx ends or the
// stream breaks, and the error channel then says why.
func (e *Env) Changes(ctx context.Context) (<-chan struct{}, <-chan error) {
	d, err := e.Engine(ctx)
	if err != nil {
		out, errc := make(chan struct{}), make(chan error, 1)
		errc <- err
		close(out)
		close(errc)
		return out, errc
	}
	events, evErr := d.Events(ctx, container.LabelRepo+"="+e.Repo.ID)
	return container.Changes(ctx, events, evErr, func(ev container.Event) { e.UI.Tracef("event %s %s", ev.Action, ev.Name) })
}
