package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/term"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/rawterm"
)

// Attach connects streams to a container. It returns once the container's
// output ends; call it before Start so no output is missed.
func (d *Engine) Attach(ctx context.Context, id string, s container.Streams) (func() error, error) {
	resp, err := d.api.ContainerAttach(ctx, id, dcontainer.AttachOptions{
		Stream: true, Stdin: s.Stdin != nil, Stdout: true, Stderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("attach: %w", sdkErr(err))
	}
	if s.TTY {
		// The container's terminal has no size until a resize reaches it,
		// and the engine takes one only once the container runs: set it
		// the moment Start is done, not when the caller gets to waiting
		// (an agent that reads its size at once would see 0 0).
		go d.earlySize(ctx, id, s.TerminalFd)
	}
	return d.pump(ctx, resp, s, func(h, w uint) error {
		return d.api.ContainerResize(ctx, id, dcontainer.ResizeOptions{Height: h, Width: w})
	}), nil
}

// earlySize sets the container's terminal to the window's size as soon as
// the container runs (a resize before that fails), trying every 5 ms for a
// minute (a loaded engine can take that long to start a container; an
// agent that reads its size at once must not win the race). An engine of
// API 1.42 or later could take the size at create instead; 1.41 cannot.
func (d *Engine) earlySize(ctx context.Context, id string, fd int) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		w, h, err := term.GetSize(fd)
		if err != nil || w <= 0 || h <= 0 {
			return
		}
		if d.api.ContainerResize(ctx, id, dcontainer.ResizeOptions{Height: uint(h), Width: uint(w)}) == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pump copies between a hijacked connection and local streams, handling raw
// mode and window resizes. The returned function waits for output to end.
func (d *Engine) pump(ctx context.Context, resp types.HijackedResponse, s container.Streams, resize func(h, w uint) error) func() error {
	done := make(chan error, 1)
	go func() {
		var err error
		if s.TTY {
			_, err = io.Copy(s.Stdout, resp.Reader)
		} else {
			_, err = stdcopy.StdCopy(s.Stdout, s.Stderr, resp.Reader)
		}
		done <- err
	}()
	if s.Stdin != nil {
		go func() {
			_, _ = io.Copy(resp.Conn, s.Stdin)
			_ = resp.CloseWrite()
		}()
	}
	return func() error {
		var restore func()
		if s.TTY {
			restore = rawterm.Raw(ctx, s.TerminalFd, resize)
		}
		// The caller's context ends the wait too (attach on SIGTERM or
		// SIGHUP): closing the connection leaves the container running.
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if restore != nil {
			restore()
		}
		resp.Close()
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("attach: %w", err)
		}
		return nil
	}
}

// waitExecStarted waits, for a few seconds at most, until the daemon
// reports the exec's process as started.
func (d *Engine) waitExecStarted(ctx context.Context, execID string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := d.api.ContainerExecInspect(ctx, execID)
		// Running is set before the runtime is asked to start the
		// process, so it proves nothing; the pid is set once it has.
		if err != nil || info.Pid != 0 || info.ExitCode != 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Exec runs a command in a running container and returns its exit code.
func (d *Engine) Exec(ctx context.Context, id string, o container.ExecOptions) (int, error) {
	var once sync.Once
	started := func() {
		if o.Started != nil {
			once.Do(o.Started)
		}
	}
	defer started()
	created, err := d.api.ContainerExecCreate(ctx, id, dcontainer.ExecOptions{
		Cmd: o.Argv, User: o.User, WorkingDir: o.WorkDir, Env: o.Env,
		Tty: o.Streams.TTY, AttachStdin: o.Streams.Stdin != nil, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, fmt.Errorf("exec: %w", sdkErr(err))
	}
	resp, err := d.api.ContainerExecAttach(ctx, created.ID, dcontainer.ExecAttachOptions{Tty: o.Streams.TTY})
	if err != nil {
		return -1, fmt.Errorf("exec: %w", sdkErr(err))
	}
	if o.Started != nil {
		// The daemon answers the attach before it starts the process.
		d.waitExecStarted(ctx, created.ID)
		started()
	}
	wait := d.pump(ctx, resp, o.Streams, func(h, w uint) error {
		return d.api.ContainerExecResize(ctx, created.ID, dcontainer.ResizeOptions{Height: h, Width: w})
	})
	if err := wait(); err != nil {
		return -1, err
	}
	info, err := d.api.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return -1, fmt.Errorf("exec: %w", sdkErr(err))
	}
	return info.ExitCode, nil
}
