package container

import "time"

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
