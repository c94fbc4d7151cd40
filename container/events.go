package container

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// EventAction is a change of a container's state.
type EventAction string

// The state changes Events reports. Other engine events (exec, attach,
// resize, …) are not state changes and are left out.
const (
	EventCreate  EventAction = "create"
	EventStart   EventAction = "start"
	EventDie     EventAction = "die" // the main process exited (stop and kill end in one)
	EventPause   EventAction = "pause"
	EventUnpause EventAction = "unpause"
	EventDestroy EventAction = "destroy"
)

// eventActions is what Events asks the engine for.
var eventActions = []EventAction{EventCreate, EventStart, EventDie, EventPause, EventUnpause, EventDestroy}

// Event is one state change of a managed container.
type Event struct {
	ID     string
	Name   string
	Action EventAction
	// ExitCode is set on EventDie.
	ExitCode *int
	// Labels are the container's labels.
	Labels map[string]string
	Time   time.Time
}

// Events streams the state changes of managed containers carrying every
// given label (key=value or key) from now on, until ctx ends. The error
// channel yields one error if the stream breaks; when ctx ends, both
// channels close without one.
func (d *Docker) Events(ctx context.Context, labels ...string) (<-chan Event, <-chan error) {
	f := managedFilter(labels)
	f.Add("type", string(events.ContainerEventType))
	for _, a := range eventActions {
		f.Add("event", string(a))
	}
	msgs, errs := d.api.Events(ctx, events.ListOptions{Filters: f})
	out := make(chan Event)
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
func eventOf(m events.Message) Event {
	ev := Event{ID: m.Actor.ID, Action: EventAction(m.Action), Labels: map[string]string{}, Time: time.Unix(0, m.TimeNano)}
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

// managedFilter selects objects created by git sandbox that carry every
// given label.
func managedFilter(labels []string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", LabelManaged))
	for _, l := range labels {
		f.Add("label", l)
	}
	return f
}
