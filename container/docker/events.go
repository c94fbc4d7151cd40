package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"

	"github.com/git-sandbox/git-sandbox/container"
)

// eventActions is what Events asks the engine for.
var eventActions = []container.EventAction{container.EventCreate, container.EventStart, container.EventDie, container.EventPause, container.EventUnpause, container.EventDestroy}

// Events streams the state changes of managed containers carrying every
// given label (key=value or key) from now on, until ctx ends. The error
// channel yields one error if the stream breaks; when ctx ends, both
// channels close without one.
func (d *Engine) Events(ctx context.Context, labels ...string) (<-chan container.Event, <-chan error) {
	f := managedFilter(labels)
	f.Add("type", string(events.ContainerEventType))
	for _, a := range eventActions {
		f.Add("event", string(a))
	}
	msgs, errs := d.api.Events(ctx, events.ListOptions{Filters: f})
	out := make(chan container.Event)
	outErr := make(chan error, 1)
	go func() {
		defer close(out)
		defer close(outErr)
		for {
			select {
			case m := <-msgs:
				select {
				case out <- eventOf(m):
				case <-ctx.Done():
					return
				}
			case err := <-errs:
				if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
					outErr <- fmt.Errorf("container events: %w", sdkErr(err))
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, outErr
}

// eventOf converts a Docker event. Its attributes are the container's
// labels plus a few facts of the event, which are taken out.
func eventOf(m events.Message) container.Event {
	ev := container.Event{ID: m.Actor.ID, Action: container.EventAction(m.Action), Labels: map[string]string{}, Time: time.Unix(0, m.TimeNano)}
	for k, v := range m.Actor.Attributes {
		switch k {
		case "name":
			ev.Name = v
		case "exitCode":
			if code, err := strconv.Atoi(v); err == nil {
				ev.ExitCode = &code
			}
		case "image", "signal", "execDuration":
		default:
			ev.Labels[k] = v
		}
	}
	return ev
}
