package container

import (
	"context"
	"io"
	"net/netip"
	"time"
)

// Engine is everything git sandbox asks of a container engine. It speaks
// only this package's types (Spec, State, Streams, …), never an engine
// SDK's, so each backend is one implementation of it: a Docker engine
// (container/docker, the local daemon or a remote one in copy mode), a
// Kubernetes cluster where a container is a Pod (container/kube), and the
// in-memory fake the unit tests use (container/fake). Errors are reported
// with ErrNotFound, ErrConflict and ErrNotSupported, whatever the backend.
//
// What differs between backends is declared, never found out by a type
// assertion: Abilities says what the engine can do beyond this contract,
// an operation it cannot do returns an error satisfying ErrNotSupported,
// and container/enginetest is the contract every backend passes.
type Engine interface {
	// Create creates the container spec describes and returns its id;
	// a name in use is ErrConflict.
	Create(ctx context.Context, spec *Spec) (string, error)
	// Start starts a created or stopped container.
	Start(ctx context.Context, id string) error
	// Stop stops a container, killing it after timeout; a missing one is
	// not an error.
	Stop(ctx context.Context, id string, timeout time.Duration) error
	// Kill sends a signal ("SIGTERM") to the container's main process
	// (ErrConflict when it does not run, ErrNotFound when it is gone).
	Kill(ctx context.Context, id, signal string) error
	// Pause freezes every process of a running container (ErrConflict when
	// it does not run or is paused already).
	Pause(ctx context.Context, id string) error
	// Unpause thaws a paused container; one that is not paused is an error
	// (ErrConflict, except on Docker, whose error has no kind).
	Unpause(ctx context.Context, id string) error
	// Remove removes a container whatever its state; a missing one is not
	// an error.
	Remove(ctx context.Context, id string) error
	// Inspect returns a container's state (ErrNotFound when it is gone).
	Inspect(ctx context.Context, id string) (*State, error)
	// List returns the managed containers carrying every label (key=value,
	// or key alone).
	List(ctx context.Context, labels ...string) ([]State, error)
	// WaitExit yields the container's exit once it stops. Call it before
	// Start so a fast exit is not missed.
	WaitExit(ctx context.Context, id string, cond WaitCondition) <-chan WaitResult
	// Attach connects streams to a container's main process; the returned
	// function waits until its output ends. Call it before Start.
	Attach(ctx context.Context, id string, s Streams) (func() error, error)
	// Exec runs a command in a running container and returns its exit
	// code (ErrConflict when the container does not run); its stdin and
	// stdout are plain byte streams (copy mode sends packs through them).
	Exec(ctx context.Context, id string, o ExecOptions) (int, error)
	// Logs writes what the container printed.
	Logs(ctx context.Context, id string, o LogsOptions) error
	// Events streams the state changes of the managed containers carrying
	// every label, until ctx ends.
	Events(ctx context.Context, labels ...string) (<-chan Event, <-chan error)

	// CreateVolume makes a volume: storage of the engine's own, for
	// backends that cannot bind-mount host directories. One of that name
	// already there is returned as it is.
	CreateVolume(ctx context.Context, s VolumeSpec) (*Volume, error)
	// RemoveVolume removes a volume; a missing one is not an error, one
	// in use is ErrConflict.
	RemoveVolume(ctx context.Context, name string) error
	// ListVolumes returns the managed volumes carrying every label.
	ListVolumes(ctx context.Context, labels ...string) ([]Volume, error)

	// CreateNetwork makes a per-sandbox network (an internal one has no
	// route out).
	CreateNetwork(ctx context.Context, s NetworkSpec) (*Network, error)
	// ConnectNetwork makes a container a member of a network (ErrNotFound
	// when the container is missing; a missing network is ErrNotFound too,
	// except that Docker 20.10 takes it for a container that does not run,
	// whose start then fails). A valid addr is the member's address there,
	// outside the network's MemberRange (Abilities.FixedAddresses; an
	// address taken is ErrAddressInUse); the zero Addr is the engine's
	// choice.
	ConnectNetwork(ctx context.Context, networkID, containerID string, addr netip.Addr) error
	// RemoveNetwork removes a network; a missing one is not an error.
	RemoveNetwork(ctx context.Context, networkID string) error
	// ListNetworks returns the managed networks carrying every label.
	ListNetworks(ctx context.Context, labels ...string) ([]Network, error)

	// Abilities says what the engine can do beyond this contract. It asks
	// the engine nothing (no round trip): callers may ask it on every use.
	Abilities() Abilities
	// Check asks the engine whether it can hold sandboxes and returns one
	// line describing it for doctor ("engine 27.3.1, API 1.47";
	// "kubernetes v1.31.0, namespace agents").
	Check(ctx context.Context) (string, error)
	// MemoryBytes is the memory the engine has for containers (the
	// machine's, or a cluster's ready nodes'); ErrNotSupported when it
	// cannot tell.
	MemoryBytes(ctx context.Context) (int64, error)
	// Images reaches the engine's images.
	Images() Images

	// Close releases the connection.
	Close() error
}

// Kinds of engine, in Abilities.Kind.
const (
	KindDocker     = "docker"
	KindKubernetes = "kubernetes"
	KindFake       = "fake"
)

// Abilities are what an engine can do beyond the common contract, declared
// by the engine itself (restic's HasAtomicReplace is the model): callers
// choose their path from them up front, where trying and failing would
// leave something half done.
type Abilities struct {
	// Kind names the backend (KindDocker, KindKubernetes, KindFake), for
	// messages.
	Kind string
	// BindMounts: the engine can mount directories of its own machine
	// into a container. Whether that machine is this one, so that a
	// sandbox's files can be bind-mounted rather than copied, is the
	// user's config's to say (config.Engine.CopyMode); without this, every
	// sandbox on the engine is in copy mode.
	BindMounts bool
	// VolumesWritable: a new volume is writable by a sandbox's non-root
	// user as it comes (a Kubernetes claim's group is the Pods'), so no
	// container of root's need open it first.
	VolumesWritable bool
	// CommitImages: Images().Commit and Images().Inspect work, so setup's
	// result can be kept as an image (warm starts).
	CommitImages bool
	// BuildImages: Images().BuildContext, Inspect and ProbeAgents work, so
	// a repository's devcontainer image can be built here.
	BuildImages bool
	// MoveImages: Images().Save and Images().Load work, so an image can be
	// copied from one engine to another.
	MoveImages bool
	// FixedAddresses: ConnectNetwork gives a member the address asked
	// for, and a Spec's Hosts are written into its container's hosts
	// file, so a container reaches another by an address that stays
	// across restarts, without asking a name server each time.
	FixedAddresses bool
}

// Images are an engine's image operations. An engine that cannot do one
// returns an error satisfying ErrNotSupported (with a hint for the user)
// instead of trying.
type Images interface {
	// Exists reports whether an image is present to the engine (an engine
	// that cannot tell, a cluster, says true: a missing image shows when
	// a container starts).
	Exists(ctx context.Context, ref string) (bool, error)
	// Agents lists the agent CLIs an image says it has (LabelAgents, or
	// the list its build wrote).
	Agents(ctx context.Context, image string) ([]string, error)
	// ProbeAgents reads the list of agent CLIs the build wrote into the
	// image, whatever labels it inherited.
	ProbeAgents(ctx context.Context, image string) ([]string, error)
	// Inspect returns an image's id, labels, environment and command; ok
	// is false when no image has that reference.
	Inspect(ctx context.Context, ref string) (info ImageInfo, ok bool, err error)
	// Build builds the default image from the embedded Dockerfile.
	Build(ctx context.Context, o BuildOptions) error
	// BuildContext builds an image from a context the caller made and
	// returns its id.
	BuildContext(ctx context.Context, o ContextBuild) (string, error)
	// Commit makes an image of a (stopped) container's file system and
	// returns the image's id.
	Commit(ctx context.Context, containerID string, o CommitOptions) (string, error)
	// Save streams an image as `docker save` writes it; the caller closes
	// the stream.
	Save(ctx context.Context, ref string) (io.ReadCloser, error)
	// Load loads an image stream Save wrote.
	Load(ctx context.Context, r io.Reader) error
	// List returns the images carrying every label (key=value).
	List(ctx context.Context, labels ...string) ([]Image, error)
	// Remove removes a tag (or an image by id) and the untagged parents
	// only it had; an image a container uses is ErrConflict, a missing one
	// is not an error.
	Remove(ctx context.Context, ref string) error
	// Push gives the image source the name ref and pushes ref to its
	// registry, saying how it goes on progress (one line per layer and
	// step).
	Push(ctx context.Context, source, ref string, progress io.Writer) error
}
