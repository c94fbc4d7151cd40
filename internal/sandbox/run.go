package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// resume starts an existing sandbox's container again. Its container keeps
// what was installed outside /workspace; a container that is gone is an
// error that says how to recover the work.
func (e *Env) resume(ctx context.Context, sb *Sandbox, o StartOptions) (*StartResult, error) {
	d, err := e.Engine(ctx)
	if err != nil {
		return nil, err
	}
	st, err := sb.ContainerState(ctx)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, usererr.New("sandbox %s has no container any more", sb.Display()).
			Hint("its work is safe: git sandbox rescue list %s shows the snapshots", sb.Display()).
			Hint("git sandbox rm %s removes the rest, then start it again", sb.Display())
	}
	if st.Running {
		return nil, usererr.New("sandbox %s is already running", sb.Display()).
			Hint("git sandbox attach %s connects to it; git sandbox logs %s shows its output", sb.Display(), sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	// Docker mounts a bind source by path when the container starts again:
	// a source swapped for a symlink since creation would be followed.
	for dest, src := range st.Mounts {
		resolved, err := container.RefuseUnsafeHostPath("mount "+dest, src)
		if err != nil {
			return nil, err
		}
		if resolved != src {
			return nil, usererr.New("the mount source %s of sandbox %s now resolves to %s", src, sb.Display(), resolved).
				Hint("something replaced a sandbox directory with a symlink; check it, then git sandbox rm %s", sb.Display())
		}
	}
	if sb.Stopped {
		if err := sb.Update(func(r *record.Record) error { r.Stopped = false; return nil }); err != nil {
			return nil, err
		}
	}
	if len(o.Args) > 0 || o.Prompt != "" || o.Agent != "" || o.Verify != "" || o.Base != "" || o.Carry {
		e.UI.Warnf("%s exists, so it resumes with the agent and command it started with; the new ones are ignored", sb.Display())
		e.UI.Hintf("git sandbox exec %s -- CMD runs another command in it; start a new sandbox for a new task", sb.Display())
	}
	e.UI.Infof("resuming %s", sb.Display())
	code, err := e.run(ctx, d, sb, o.Detach, o.IO)
	return &StartResult{Sandbox: sb, Resumed: true, ExitCode: code}, err
}

// run starts the sandbox's container. Detached, it returns at once;
// attached, it streams the agent until it exits and returns its exit code.
// Either way a supervisor process takes periodic snapshots, so work is
// saved even if this process is killed.
func (e *Env) run(ctx context.Context, d Engine, sb *Sandbox, detach bool, io IO) (int, error) {
	st, err := d.Inspect(ctx, sb.Container)
	if err != nil {
		return -1, fmt.Errorf("inspect container: %w", err)
	}
	tty, openStdin := st.TTY, st.OpenStdin
	if detach {
		if err := e.startLocked(ctx, d, sb); err != nil {
			return -1, err
		}
		if err := e.superviseInBackground(sb.Branch); err != nil {
			e.UI.Warnf("no supervisor, so no periodic snapshots: %v", err)
		}
		return 0, nil
	}
	if tty && !io.StdinIsTerminal {
		return -1, usererr.New("sandbox %s has a terminal and this command has none", sb.Display()).
			Hint("run it from a terminal, or with -d and follow it with git sandbox logs -f %s", sb.Display())
	}
	streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: tty, TerminalFd: io.StdinFd}
	if openStdin && (io.StdinIsTerminal || io.StdinIsPipe) {
		streams.Stdin = io.Stdin
	}
	waitC := d.WaitExit(ctx, sb.Container, container.WaitNextExit)
	pump, err := d.Attach(ctx, sb.Container, streams)
	if err != nil {
		return -1, err
	}
	if err := e.startLocked(ctx, d, sb); err != nil {
		return -1, err
	}
	if err := e.superviseInBackground(sb.Branch); err != nil {
		e.UI.Warnf("no supervisor, so no periodic snapshots: %v", err)
	}
	stopSignals := forwardSignals(ctx, d, sb.Container, tty)
	_ = pump()
	res := <-waitC
	stopSignals()
	if res.Err != nil {
		return -1, fmt.Errorf("wait for the agent: %w", res.Err)
	}
	if _, err := sb.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonExit); err != nil {
		e.UI.Warnf("final snapshot failed: %v", err)
	}
	return res.Code, nil
}

// startLocked starts the container under the sandbox's snapshot lock: a
// snapshot that found the container stopped (and so did not pause it) is
// done reading before the agent runs again.
func (e *Env) startLocked(ctx context.Context, d Engine, sb *Sandbox) error {
	unlock, err := record.Lock(e.Layout.Lock(sb.Branch))
	if err != nil {
		return err
	}
	defer unlock()
	return d.Start(ctx, sb.Container)
}

// forwardSignals passes Ctrl-C and termination to the agent while no
// terminal carries them (with a terminal, Ctrl-C is a keystroke the agent
// receives itself). The agent decides what they mean; this process waits
// for it to exit and takes the exit snapshot as usual.
func forwardSignals(ctx context.Context, d Engine, id string, tty bool) func() {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}
	if tty {
		sigs = sigs[1:]
	}
	return sigstack.Push(func(s os.Signal) {
		name := "SIGTERM"
		if s == os.Interrupt {
			name = "SIGINT"
		}
		_ = d.Kill(context.WithoutCancel(ctx), id, name)
	}, sigs...)
}

// SupervisorCommand is the hidden command name that runs Supervise.
const SupervisorCommand = "__supervise"

// superviseInBackground starts the supervisor of a sandbox whose agent was
// just started.
func (e *Env) superviseInBackground(branch string) error {
	if e.spawn != nil {
		return e.spawn(branch)
	}
	return e.spawnSupervisor(branch)
}

// spawnSupervisor starts the supervisor as its own session, detached from
// this process and its terminal, so it outlives an attached start that is
// killed.
func (e *Env) spawnSupervisor(branch string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := e.Layout.SupervisorLog(branch)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	return proc.SpawnDetached(proc.SpawnOptions{
		Path:   exe,
		Args:   []string{"git-sandbox", SupervisorCommand, "--interval", e.Config.Rescue.Interval.String(), "--", branch},
		Dir:    e.Repo.MainWorkTree,
		Env:    append(os.Environ(), "GIT_SANDBOX_STATE_DIR="+e.Layout.Root),
		Output: logf,
	})
}

// Supervise takes a snapshot every interval while the sandbox's agent runs
// and a last one when it exits. Only one supervisor runs per sandbox; a
// second one waits for the first to finish.
func (e *Env) Supervise(ctx context.Context, branch string, interval time.Duration) error {
	unlock, err := record.Lock(e.Layout.SupervisorLock(branch))
	if err != nil {
		return err
	}
	defer unlock()
	sb, err := e.Find(branch)
	if err != nil {
		return err
	}
	d, err := e.Engine(ctx)
	if err != nil {
		return err
	}
	if interval <= 0 {
		interval = 2 * time.Minute
	}
	snap := sb.Snapshotter()
	st, err := sb.ContainerState(ctx)
	if err != nil || st == nil || !st.Running {
		_, serr := snap.Take(ctx, rescue.ReasonExit)
		return errors.Join(err, serr)
	}
	waitC := d.WaitExit(ctx, sb.Container, container.WaitNotRunning)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if t, err := snap.Take(ctx, rescue.ReasonInterval); err != nil {
				e.UI.Warnf("%s snapshot failed: %v", time.Now().Format(time.RFC3339), err)
			} else if t.New {
				e.UI.Infof("%s snapshot %s (%d changes)", time.Now().Format(time.RFC3339), shortID(t.ID), t.Changes)
			}
		case res := <-waitC:
			t, err := snap.Take(context.WithoutCancel(ctx), rescue.ReasonExit)
			if err == nil && !t.New && t.Reason != rescue.ReasonExit {
				// An interval snapshot taken after the agent died already
				// holds these files: the exit is still recorded as such.
				t, err = snap.Restamp(context.WithoutCancel(ctx), rescue.ReasonExit)
			}
			if err != nil {
				return fmt.Errorf("final snapshot: %w", err)
			}
			e.UI.Infof("%s agent exited with code %d; snapshot %s", time.Now().Format(time.RFC3339), res.Code, shortID(t.ID))
			if sb.Verify != "" {
				v, err := sb.RunVerify(context.WithoutCancel(ctx), t, IO{Stdout: e.UI.Writer(), Stderr: e.UI.Writer()})
				if err != nil {
					return fmt.Errorf("verify: %w", err)
				}
				e.UI.Infof("%s verify on tree %s: ok=%v exit code %d", time.Now().Format(time.RFC3339), shortID(t.Tree), v.OK, v.ExitCode)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
