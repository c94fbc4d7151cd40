package sandbox

import (
	"context"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/kube"
)

// Engine is everything a sandbox asks of the container engine. It speaks
// only this project's types (container.Spec, State, Streams, …), never an
// engine SDK's, so another backend is one more implementation: a remote
// Docker engine that copies files into volumes instead of bind-mounting
// them, or Kubernetes, where a sandbox is a pod. Errors are reported with
// container.ErrNotFound and container.ErrConflict, whatever the backend.
//
// container.Docker implements it; tests use a fake.
type Engine interface {
	// Create creates the container spec describes and returns its id;
	// a name in use is ErrConflict.
	Create(ctx context.Context, spec *container.Spec) (string, error)
	// Start starts a created or stopped container.
	Start(ctx context.Context, id string) error
	// Stop stops a container, killing it after timeout; a missing one is
	// not an error.
	Stop(ctx context.Context, id string, timeout time.Duration) error
	// Kill sends a signal ("SIGTERM") to the container's main process.
	Kill(ctx context.Context, id, signal string) error
	// Pause freezes every process of a running container (ErrConflict when
	// it does not run or is paused already); Unpause thaws it.
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
	// Remove removes a container whatever its state; a missing one is not
	// an error.
	Remove(ctx context.Context, id string) error
	// Inspect returns a container's state (ErrNotFound when it is gone).
	Inspect(ctx context.Context, id string) (*container.State, error)
	// List returns the managed containers carrying every label (key=value).
	List(ctx context.Context, labels ...string) ([]container.State, error)
	// WaitExit yields the container's exit once it stops.
	WaitExit(ctx context.Context, id string, cond container.WaitCondition) <-chan container.WaitResult
	// Attach connects streams to a container's main process; the returned
	// function waits until its output ends. Call it before Start.
	Attach(ctx context.Context, id string, s container.Streams) (func() error, error)
	// Exec runs a command in a running container and returns its exit
	// code; its stdin and stdout are plain byte streams (copy mode sends
	// packs through them).
	Exec(ctx context.Context, id string, o container.ExecOptions) (int, error)
	// Logs writes what the container printed.
	Logs(ctx context.Context, id string, o container.LogsOptions) error
	// Events streams the state changes of the managed containers carrying
	// every label, until ctx ends.
	Events(ctx context.Context, labels ...string) (<-chan container.Event, <-chan error)

	// Volumes: storage of the engine's own, for backends that cannot
	// bind-mount host directories.
	CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	ListVolumes(ctx context.Context, labels ...string) ([]container.Volume, error)

	// Networks: per-sandbox networks (an internal one has no route out).
	CreateNetwork(ctx context.Context, s container.NetworkSpec) (*container.Network, error)
	ConnectNetwork(ctx context.Context, networkID, containerID string) error
	RemoveNetwork(ctx context.Context, networkID string) error
	ListNetworks(ctx context.Context, labels ...string) ([]container.Network, error)

	// ImageExists reports whether an image is present to the engine.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// ImageAgents lists the agent CLIs an image says it has.
	ImageAgents(ctx context.Context, image string) ([]string, error)
	// Build builds the default image.
	Build(ctx context.Context, o container.BuildOptions) error

	// Close releases the connection.
	Close() error
}

var (
	_ Engine = (*container.Docker)(nil)
	_ Engine = (*kube.Engine)(nil)
)

// connectDocker is the default way an Env reaches its engine.
func connectDocker(ctx context.Context) (Engine, error) {
	d, err := container.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return d, nil
}
