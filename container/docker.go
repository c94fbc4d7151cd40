package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Docker is a connected Docker Engine client.
type Docker struct {
	api *client.Client
}

// Connect opens a client from the environment (DOCKER_HOST and friends),
// negotiates the API version and checks the daemon answers.
func Connect(ctx context.Context) (*Docker, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, errUnreachable(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := api.Ping(pctx)
	if err != nil {
		api.Close()
		return nil, errUnreachable(err)
	}
	api.NegotiateAPIVersionPing(ping)
	return &Docker{api: api}, nil
}

// APIVersion is the negotiated Engine API version.
func (d *Docker) APIVersion() string { return d.api.ClientVersion() }

// ServerVersion returns the engine's version string.
func (d *Docker) ServerVersion(ctx context.Context) (string, error) {
	v, err := d.api.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	return v.Version, nil
}

// MemoryBytes is the engine machine's total memory.
func (d *Docker) MemoryBytes(ctx context.Context) (int64, error) {
	info, err := d.api.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("engine info: %w", sdkErr(err))
	}
	return info.MemTotal, nil
}

// Close releases the client.
func (d *Docker) Close() error { return d.api.Close() }

func errUnreachable(err error) error {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = client.DefaultDockerHost
	}
	return usererr.Wrap(err, "cannot reach the Docker daemon at %s", host).
		Hint("start Docker (for example: sudo systemctl start docker), or point DOCKER_HOST at a running daemon").
		Hint("git sandbox doctor checks the whole set-up")
}

// Create creates the container described by spec and returns its id.
func (d *Docker) Create(ctx context.Context, spec *Spec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", fmt.Errorf("container spec: %w", err)
	}
	cfg, hc := spec.Docker()
	asked := time.Now()
	resp, err := d.api.ContainerCreate(ctx, cfg, hc, nil, nil, spec.Name)
	if err != nil && ctx.Err() != nil {
		// A cancel (Ctrl-C) stops the wait for the answer, not the
		// creation: remove what the engine made all the same, and only
		// that (a container of that name made before is left alone).
		d.removeCreatedSince(context.WithoutCancel(ctx), spec.Name, asked)
	}
	if err != nil {
		err = sdkErr(err)
		if IsConflict(err) {
			return "", usererr.Wrap(err, "a container named %s already exists", spec.Name).
				Hint("remove it with docker rm -f %s if it is left over", spec.Name)
		}
		if IsNotFound(err) {
			// The engine says "not found" for a missing image, network
			// or volume alike: name the image only when it is the one.
			if _, ok, ierr := d.InspectImage(context.WithoutCancel(ctx), spec.Image); ierr == nil && !ok {
				return "", errImageMissing(spec.Image, false)
			}
			return "", usererr.Wrap(err, "create container %s: %v", spec.Name, err).
				Hint("a network or volume it needs is gone; git sandbox stop and start again re-creates the sandbox's own")
		}
		return "", fmt.Errorf("create container: %w", err)
	}
	return resp.ID, nil
}

// removeCreatedSince removes the container called name if the engine
// made it at or after since.
func (d *Docker) removeCreatedSince(ctx context.Context, name string, since time.Time) {
	info, err := d.api.ContainerInspect(ctx, name)
	if err != nil {
		return
	}
	created, err := time.Parse(time.RFC3339Nano, info.Created)
	// Clocks: the engine's and ours may differ by a little.
	if err != nil || created.Before(since.Add(-2*time.Second)) {
		return
	}
	_ = d.Remove(ctx, info.ID)
}

// Start starts a created or stopped container.
func (d *Docker) Start(ctx context.Context, id string) error {
	if err := d.api.ContainerStart(ctx, id, dcontainer.StartOptions{}); err != nil {
		return fmt.Errorf("start container: %w", sdkErr(err))
	}
	return nil
}

// Stop stops a container, killing it after timeout.
func (d *Docker) Stop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int(timeout.Seconds())
	if err := sdkErr(d.api.ContainerStop(ctx, id, dcontainer.StopOptions{Timeout: &secs})); err != nil && !IsNotFound(err) {
		return fmt.Errorf("stop container: %w", err)
	}
	return nil
}

// Kill sends a signal to the container's main process.
func (d *Docker) Kill(ctx context.Context, id, signal string) error {
	if err := d.api.ContainerKill(ctx, id, signal); err != nil {
		return fmt.Errorf("kill container: %w", sdkErr(err))
	}
	return nil
}

// Pause freezes every process of a container (cgroup freezer).
func (d *Docker) Pause(ctx context.Context, id string) error {
	if err := d.api.ContainerPause(ctx, id); err != nil {
		return fmt.Errorf("pause container: %w", sdkErr(err))
	}
	return nil
}

// Unpause thaws a paused container.
func (d *Docker) Unpause(ctx context.Context, id string) error {
	if err := d.api.ContainerUnpause(ctx, id); err != nil {
		return fmt.Errorf("unpause container: %w", sdkErr(err))
	}
	return nil
}

// Remove force-removes a container; a missing one is not an error.
func (d *Docker) Remove(ctx context.Context, id string) error {
	err := sdkErr(d.api.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true}))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}

// StatusLost is the Status of a container an engine lost while it ran
// (a Kubernetes Pod deleted or evicted, or its node gone): its exit code
// and output went with it.
const StatusLost = "lost"

// State is a container's state as ps shows it.
type State struct {
	ID       string
	Name     string
	Status   string // created, running, exited, paused, restarting, dead, lost
	Running  bool
	Paused   bool
	ExitCode int
	// ExitCode of a listed container that has exited (List only; Inspect
	// fills ExitCode).
	ListExitCode *int
	Started      time.Time
	Finished     time.Time
	Labels       map[string]string
	Image        string
	// TTY and OpenStdin are how the container was created, and Mounts
	// (destination -> source) its bind mounts (Inspect only).
	TTY, OpenStdin bool
	Mounts         map[string]string
}

// Inspect returns a container's state, or an error satisfying IsNotFound.
func (d *Docker) Inspect(ctx context.Context, id string) (*State, error) {
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil {
		return nil, sdkErr(err)
	}
	st := &State{ID: info.ID, Name: strings.TrimPrefix(info.Name, "/")}
	if info.State != nil {
		st.Status = string(info.State.Status)
		st.Running = info.State.Running
		st.Paused = info.State.Paused
		st.ExitCode = info.State.ExitCode
		st.Started, _ = time.Parse(time.RFC3339Nano, info.State.StartedAt)
		st.Finished, _ = time.Parse(time.RFC3339Nano, info.State.FinishedAt)
	}
	if info.Config != nil {
		st.Labels = info.Config.Labels
		st.Image = info.Config.Image
		st.TTY = info.Config.Tty
		st.OpenStdin = info.Config.OpenStdin
	}
	st.Mounts = map[string]string{}
	for _, m := range info.Mounts {
		// Bind mounts only: a volume's source is the engine's, not a path
		// of the user's that could be swapped.
		if m.Source != "" && (m.Type == "" || m.Type == mount.TypeBind) {
			st.Mounts[m.Destination] = m.Source
		}
	}
	return st, nil
}

// List returns the containers carrying every given label (key=value).
func (d *Docker) List(ctx context.Context, labels ...string) ([]State, error) {
	list, err := d.api.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: managedFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", sdkErr(err))
	}
	out := make([]State, 0, len(list))
	for _, c := range list {
		st := State{ID: c.ID, Status: string(c.State), Running: c.State == "running", Labels: c.Labels, Image: c.Image}
		if code, ok := exitCodeOf(c.Status); ok {
			st.ListExitCode = &code
		}
		if len(c.Names) > 0 {
			st.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, st)
	}
	return out, nil
}

// exitCodeOf reads the exit code out of a listed container's status line,
// "Exited (137) 2 minutes ago", so ps needs no inspect per container.
func exitCodeOf(status string) (int, bool) {
	rest, ok := strings.CutPrefix(status, "Exited (")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, ")")
	if !ok {
		return 0, false
	}
	code, err := strconv.Atoi(n)
	return code, err == nil
}

// WaitCondition says which exit WaitExit waits for.
type WaitCondition string

// Wait conditions.
const (
	// WaitNextExit waits for the next time the container stops; call
	// WaitExit before Start so a fast exit is not missed.
	WaitNextExit WaitCondition = "next-exit"
	// WaitNotRunning returns at once for a container that is not running.
	WaitNotRunning WaitCondition = "not-running"
)

// WaitExit returns a channel that yields the container's exit code once it
// stops. Call it before Start to never miss a fast exit.
func (d *Docker) WaitExit(ctx context.Context, id string, cond WaitCondition) <-chan WaitResult {
	out := make(chan WaitResult, 1)
	dcond := dcontainer.WaitConditionNotRunning
	if cond == WaitNextExit {
		dcond = dcontainer.WaitConditionNextExit
	}
	respC, errC := d.api.ContainerWait(ctx, id, dcond)
	go func() {
		select {
		case r := <-respC:
			if r.Error != nil && r.Error.Message != "" {
				out <- WaitResult{Code: int(r.StatusCode), Err: errors.New(r.Error.Message)}
				return
			}
			out <- WaitResult{Code: int(r.StatusCode)}
		case err := <-errC:
			out <- WaitResult{Code: -1, Err: sdkErr(err)}
		}
	}()
	return out
}

// WaitResult is a container's exit.
type WaitResult struct {
	Code int
	Err  error
}

// LogsOptions select a container's output.
type LogsOptions struct {
	// Follow keeps streaming until the container stops or ctx ends.
	Follow bool
	// Tail is how many lines from the end: "all" or a number.
	Tail string
	// Stdout and Stderr receive the output (a container with a terminal
	// has one stream, written to Stdout).
	Stdout, Stderr io.Writer
}

// Logs writes the container's output.
func (d *Docker) Logs(ctx context.Context, id string, o LogsOptions) error {
	// The stream is multiplexed unless the container has a terminal.
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("container logs: %w", sdkErr(err))
	}
	tail := o.Tail
	if tail == "" {
		tail = "all"
	}
	rc, err := d.api.ContainerLogs(ctx, id, dcontainer.LogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: o.Follow, Tail: tail,
	})
	if err != nil {
		return fmt.Errorf("container logs: %w", sdkErr(err))
	}
	defer rc.Close()
	stdout, stderr := o.Stdout, o.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if info.Config != nil && info.Config.Tty {
		_, err = io.Copy(stdout, rc)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, rc)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("container logs: %w", err)
	}
	return nil
}
