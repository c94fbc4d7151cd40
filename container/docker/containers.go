package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Create creates the container described by spec and returns its id.
func (d *Engine) Create(ctx context.Context, spec *container.Spec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", fmt.Errorf("container spec: %w", err)
	}
	cfg, hc := createArgs(spec)
	asked := time.Now()
	resp, err := d.api.ContainerCreate(ctx, cfg, hc, networkingConfig(spec), nil, spec.Name)
	if err != nil && ctx.Err() != nil {
		// A cancel (Ctrl-C) stops the wait for the answer, not the
		// creation: remove what the engine made all the same, and only
		// that (a container of that name made before is left alone).
		d.removeCreatedSince(context.WithoutCancel(ctx), spec.Name, asked)
	}
	if err != nil {
		err = sdkErr(err)
		if container.IsConflict(err) {
			return "", usererr.Wrap(err, "a container named %s already exists", spec.Name).
				Hint("remove it with docker rm -f %s if it is left over", spec.Name)
		}
		if container.IsNotFound(err) {
			// The engine says "not found" for a missing image, network
			// or volume alike: name the image only when it is the one.
			if _, ok, ierr := d.inspectImage(context.WithoutCancel(ctx), spec.Image); ierr == nil && !ok {
				return "", container.ErrImageMissing(spec.Image, false)
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
func (d *Engine) removeCreatedSince(ctx context.Context, name string, since time.Time) {
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
func (d *Engine) Start(ctx context.Context, id string) error {
	err := d.api.ContainerStart(ctx, id, dcontainer.StartOptions{})
	if network, ok := staleEndpoint(err); ok {
		// A daemon that restarted can keep a stopped container's endpoint
		// in its network store, and then refuses every start of it: the
		// endpoint is the container's own, so it goes, once.
		if derr := d.api.NetworkDisconnect(ctx, network, id, true); derr == nil {
			err = d.api.ContainerStart(ctx, id, dcontainer.StartOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("start container: %w", sdkErr(err))
	}
	return nil
}

// staleEndpoint reports whether err is the daemon's refusal to start a
// container whose endpoint it still holds (in a network it names).
func staleEndpoint(err error) (network string, ok bool) {
	if err == nil {
		return "", false
	}
	const marker = " already exists in network "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 || !strings.Contains(msg[:i], "endpoint with name ") {
		return "", false
	}
	network = strings.TrimSpace(msg[i+len(marker):])
	if network == "" || strings.ContainsAny(network, " \n") {
		return "", false
	}
	return network, true
}

// Stop stops a container, killing it after timeout.
func (d *Engine) Stop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int(timeout.Seconds())
	if err := sdkErr(d.api.ContainerStop(ctx, id, dcontainer.StopOptions{Timeout: &secs})); err != nil && !container.IsNotFound(err) {
		return fmt.Errorf("stop container: %w", err)
	}
	return nil
}

// Kill sends a signal to the container's main process.
func (d *Engine) Kill(ctx context.Context, id, signal string) error {
	if err := d.api.ContainerKill(ctx, id, signal); err != nil {
		return fmt.Errorf("kill container: %w", sdkErr(err))
	}
	return nil
}

// Pause freezes every process of a container (cgroup freezer).
func (d *Engine) Pause(ctx context.Context, id string) error {
	if err := d.api.ContainerPause(ctx, id); err != nil {
		return fmt.Errorf("pause container: %w", sdkErr(err))
	}
	return nil
}

// Unpause thaws a paused container.
func (d *Engine) Unpause(ctx context.Context, id string) error {
	if err := d.api.ContainerUnpause(ctx, id); err != nil {
		return fmt.Errorf("unpause container: %w", sdkErr(err))
	}
	return nil
}

// Remove force-removes a container; a missing one is not an error.
func (d *Engine) Remove(ctx context.Context, id string) error {
	err := sdkErr(d.api.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true}))
	if err != nil && !container.IsNotFound(err) {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}

// Inspect returns a container's state, or an error satisfying IsNotFound.
func (d *Engine) Inspect(ctx context.Context, id string) (*container.State, error) {
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil {
		return nil, sdkErr(err)
	}
	st := &container.State{ID: info.ID, Name: strings.TrimPrefix(info.Name, "/")}
	if info.State != nil {
		st.Status = string(info.State.Status)
		st.Running = info.State.Running
		st.Paused = info.State.Paused
		st.ExitCode = info.State.ExitCode
		st.OOMKilled = info.State.OOMKilled
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
func (d *Engine) List(ctx context.Context, labels ...string) ([]container.State, error) {
	list, err := d.api.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: managedFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", sdkErr(err))
	}
	out := make([]container.State, 0, len(list))
	for _, c := range list {
		st := container.State{ID: c.ID, Status: string(c.State), Running: c.State == "running", Labels: c.Labels, Image: c.Image}
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

// WaitExit returns a channel that yields the container's exit code once it
// stops. Call it before Start to never miss a fast exit.
func (d *Engine) WaitExit(ctx context.Context, id string, cond container.WaitCondition) <-chan container.WaitResult {
	out := make(chan container.WaitResult, 1)
	dcond := dcontainer.WaitConditionNotRunning
	if cond == container.WaitNextExit {
		dcond = dcontainer.WaitConditionNextExit
	}
	respC, errC := d.api.ContainerWait(ctx, id, dcond)
	go func() {
		select {
		case r := <-respC:
			if r.Error != nil && r.Error.Message != "" {
				out <- container.WaitResult{Code: int(r.StatusCode), Err: errors.New(r.Error.Message)}
				return
			}
			out <- container.WaitResult{Code: int(r.StatusCode)}
		case err := <-errC:
			out <- container.WaitResult{Code: -1, Err: sdkErr(err)}
		}
	}()
	return out
}

// Logs writes the container's output.
func (d *Engine) Logs(ctx context.Context, id string, o container.LogsOptions) error {
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
