package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/notify"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// resume starts an existing sandbox's container again. Its container keeps
// what was installed outside /workspace; a container that is gone is an
// error that says how to recover the work.
func (e *Env) resume(ctx context.Context, sb *Sandbox, o StartOptions) (*StartResult, error) {
	d, err := sb.engine(ctx)
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
	if err := checkFixedFlags(sb, o); err != nil {
		return nil, err
	}
	adapter, err := agent.Get(sb.Agent)
	if err != nil {
		return nil, err
	}
	newTask := o.Prompt != "" || len(o.Args) > 0
	limits := o.Memory != "" || o.CPUs > 0 || o.Pids > 0
	if o.Rerun && newTask {
		return nil, usererr.New("--rerun runs the sandbox's original task again; it takes no new one").
			Hint("give the follow-up task without --rerun: git sandbox start %s -p TASK", sb.Display())
	}
	if o.Verify != "" && o.Verify != sb.Verify {
		if err := sb.Update(func(r *record.Record) error { r.Verify = o.Verify; return nil }); err != nil {
			return nil, err
		}
		e.UI.Infof("verify for %s is now: %s", sb.Display(), termsafe.String(o.Verify))
	}
	fresh := st.Status == "created" // never ran: it starts as planned
	var argv []string
	interactive := false
	switch {
	case o.Rerun || fresh:
		if limits {
			// Limits need a new container.
			if sb.Spec == nil {
				return nil, usererr.New("sandbox %s was made by an older git sandbox that did not record its container: its limits cannot change", sb.Display()).
					Hint("start it without --memory, --cpus and --pids")
			}
			argv = sb.withSetup(sb.agentArgv())
		}
	case newTask:
		task := agent.Task{Prompt: o.Prompt, Args: o.Args, Terminal: o.IO.StdinIsTerminal, Continue: true}
		if argv, err = adapter.Argv(task); err != nil {
			return nil, usererr.Wrap(err, "%v", err)
		}
		interactive = adapter.Interactive(task)
		if interactive && !o.IO.StdinIsTerminal && !o.Detach {
			return nil, agent.NeedTerminal(adapter.Name())
		}
		argv = sb.withSetup(argv)
	default:
		// Nothing new to do: go on with the agent interactively, never run
		// its task again unasked.
		if !o.IO.StdinIsTerminal && !o.Detach {
			return nil, usererr.New("sandbox %s has run its task; without a new one, start goes on with the agent interactively, which needs a terminal", sb.Display()).
				Hint("give it a follow-up task: git sandbox start %s -p TASK", sb.Display()).
				Hint("run its original task again: git sandbox start %s --rerun; run a command in it: git sandbox exec %s -- CMD", sb.Display(), sb.Display()).
				WithCode(usererr.ExitRefused)
		}
		task := agent.Task{Terminal: o.IO.StdinIsTerminal, Continue: true}
		if argv, err = adapter.Argv(task); err != nil {
			return nil, usererr.Wrap(err, "%v", err)
		}
		interactive = true
		argv = sb.withSetup(argv)
	}
	if argv != nil {
		if err := e.recreate(ctx, d, sb, argv, interactive, o); err != nil {
			return nil, err
		}
	}
	if err := e.restartProxy(ctx, d, sb, o.IO); err != nil {
		return nil, err
	}
	if argv != nil && sb.setupPerContainer() {
		// The new container's first start runs setup alone, without the
		// login in the home.
		if err := sb.clearLogin(); err != nil {
			return nil, err
		}
		if err := e.runSetup(ctx, d, sb, o.IO, false); err != nil {
			return nil, err
		}
	}
	if err := sb.loadLogin(); err != nil {
		return nil, err
	}
	if sb.Stopped {
		if err := sb.Update(func(r *record.Record) error { r.Stopped = false; return nil }); err != nil {
			return nil, err
		}
	}
	switch {
	case newTask:
		e.UI.Infof("giving %s a follow-up task", sb.Display())
	case argv != nil && !o.Rerun && !fresh:
		e.UI.Infof("continuing %s interactively", sb.Display())
	default:
		e.UI.Infof("resuming %s", sb.Display())
	}
	code, err := e.run(ctx, d, sb, o.Detach, o.IO)
	return &StartResult{Sandbox: sb, Resumed: true, ExitCode: code}, err
}

// checkFixedFlags refuses the flags that cannot change for an existing
// sandbox, naming them: they decide what the sandbox is, not what it does
// next.
func checkFixedFlags(sb *Sandbox, o StartOptions) error {
	var fixed []string
	add := func(set bool, name string) {
		if set {
			fixed = append(fixed, name)
		}
	}
	add(o.Base != "", "--base")
	add(o.Carry, "--carry")
	add(o.Agent != "" && o.Agent != sb.Agent, "--agent")
	add(o.Image != "", "--image")
	add(o.Network != "", "--network")
	add(o.Runtime != "", "--runtime")
	add(len(o.Allow) > 0, "--allow")
	add(len(o.Env) > 0, "-e")
	add(o.Engine != "" && o.Engine != sb.Record.Engine, "--engine")
	if len(fixed) == 0 {
		return nil
	}
	return usererr.New("sandbox %s exists, and %s cannot change for it", sb.Display(), strings.Join(fixed, ", ")).
		Hint("leave them out to go on in %s (a follow-up task: -p TASK; --verify and limits may change)", sb.Display()).
		Hint("or start a new sandbox with them: git sandbox start NEW-BRANCH …").
		WithCode(usererr.ExitUsage)
}

// agentArgv is the agent's command in the recorded container spec, without
// the setup wrapper.
func (sb *Sandbox) agentArgv() []string {
	argv := sb.Spec.Argv
	if len(argv) >= 4 && argv[0] == "/bin/sh" && argv[1] == "-c" && (argv[2] == setupScript || argv[2] == setupThenRun) {
		return argv[4:]
	}
	return argv
}

// setupPerContainer reports whether each new container of the sandbox runs
// setup first: it has a setup and no warm image holding its result.
func (sb *Sandbox) setupPerContainer() bool { return sb.Setup != "" && sb.WarmImage == "" }

// withSetup puts a sandbox's setup in front of the agent's argv in a new
// container: setup runs once more there (what it installed outside
// /workspace is not in a new container) in a first start of its own
// (resume runs it, with the login out of the home), then the agent.
//
// A sandbox whose container runs its warm image needs none of this: setup's
// result (and its marker) is in the image.
func (sb *Sandbox) withSetup(argv []string) []string {
	if !sb.setupPerContainer() {
		return argv
	}
	return append([]string{"/bin/sh", "-c", setupScript, "git-sandbox-setup"}, argv...)
}

// recreate replaces the sandbox's (stopped) container by a new one from
// its recorded spec (same name, image, mounts, hardening, network) running
// argv, with the limits and terminal of this start. If the new one cannot
// be created, the old spec is created again, so the sandbox always has a
// container.
func (e *Env) recreate(ctx context.Context, d Engine, sb *Sandbox, argv []string, interactive bool, o StartOptions) error {
	if sb.Spec == nil {
		return usererr.New("sandbox %s was made by an older git sandbox that did not record its container, so it cannot take a follow-up task", sb.Display()).
			Hint("run its original task again with git sandbox start %s --rerun, or run a command with git sandbox exec", sb.Display())
	}
	spec := sb.Spec.Clone()
	spec.Argv = argv
	tty := o.IO.StdinIsTerminal && !o.Detach || interactive && o.Detach
	spec.TTY = tty
	spec.OpenStdin = tty || (!o.Detach && o.IO.StdinIsPipe)
	spec.StdinOnce = spec.OpenStdin && !spec.TTY
	var env []string
	for _, kv := range spec.Env {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "GIT_SANDBOX_PROMPT=") {
			env = append(env, kv)
		}
	}
	if tty {
		env = append(env, "TERM="+firstNonEmpty(os.Getenv("TERM"), "xterm-256color"))
	}
	if o.Prompt != "" {
		env = append(env, "GIT_SANDBOX_PROMPT="+o.Prompt)
		spec.Labels[container.LabelPrompt] = o.Prompt
	}
	spec.Env = env
	if o.Memory != "" {
		mem, err := config.MemoryBytes(o.Memory)
		if err != nil {
			return usererr.New("--memory %q: %v", o.Memory, err)
		}
		spec.Limits.MemoryBytes = mem
	}
	if o.CPUs > 0 {
		spec.Limits.CPUs = o.CPUs
	}
	if o.Pids > 0 {
		spec.Limits.Pids = o.Pids
	}
	if o.Verify != "" {
		spec.Labels[container.LabelVerify] = o.Verify
	}
	for i, m := range spec.Mounts {
		if m.Volume {
			continue // the engine's own (caches; copy mode's files)
		}
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return err
		}
		spec.Mounts[i].Source = src
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	unlock, err := record.Lock(e.Layout.Lock(sb.Branch))
	if err != nil {
		return err
	}
	defer unlock()
	if err := d.Remove(ctx, sb.Container); err != nil {
		return fmt.Errorf("replace the container: %w", err)
	}
	if _, err := d.Create(ctx, spec); err != nil {
		if _, rerr := d.Create(context.WithoutCancel(ctx), sb.Spec); rerr != nil {
			e.UI.Warnf("the old container could not be made again either: %v", rerr)
		}
		return fmt.Errorf("create the follow-up container: %w", err)
	}
	return sb.Update(func(r *record.Record) error {
		r.Spec = spec
		if o.Prompt != "" {
			r.Tasks = append(r.Tasks, o.Prompt)
		}
		return nil
	})
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
	if err := sb.saveLogin(); err != nil {
		e.UI.Warnf("%v", err)
	}
	HintCLIDenials(e.UI, sb.CLIDenials())
	sb.quarantineNested(context.WithoutCancel(ctx))
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
	if err := e.restoreNested(sb); err != nil {
		return err
	}
	if err := d.Start(ctx, sb.Container); err != nil {
		// Not running after all: out of the way again.
		sb.quarantineLocked(context.WithoutCancel(ctx))
		return err
	}
	return nil
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
// second one waits for the first to finish. Interval snapshots are
// background work: they give way to any command holding or awaiting the
// sandbox's lock, and back off when they fail (nextSnapshotTry); the exit
// snapshot waits for the lock like any command.
func (e *Env) Supervise(ctx context.Context, branch string, interval time.Duration) error {
	// A second supervisor (of a resumed sandbox) waits for the first to
	// finish its exit snapshot and verify, however long that takes.
	unlock, err := record.LockFor(e.Layout.SupervisorLock(branch), 0)
	if err != nil {
		return err
	}
	defer unlock()
	sb, err := e.Find(branch)
	if err != nil {
		return err
	}
	d, err := sb.engine(ctx)
	if err != nil {
		return err
	}
	if interval <= 0 {
		interval = 2 * time.Minute
	}
	snap := sb.Snapshotter()
	st, err := sb.ContainerState(ctx)
	if err != nil || st == nil {
		_, serr := snap.Take(ctx, rescue.ReasonExit)
		if err == nil {
			sb.quarantineNested(ctx)
		}
		return errors.Join(err, serr)
	}
	// A run of the container is named by when it started: its events
	// fire once per run.
	run := st.Started.UTC().Format(time.RFC3339Nano)
	if !st.Running {
		// The agent exited before this first look (a quick agent, or a
		// slow start of this process): it gets the same exit snapshot and
		// automatic verify as one that exits later.
		return e.supervisedExit(ctx, sb, st.ExitCode, run)
	}
	waitC := d.WaitExit(ctx, sb.Container, container.WaitNotRunning)
	after := e.after
	if after == nil {
		after = time.After
	}
	next := after(interval)
	failed := 0 // interval snapshots that failed in a row
	budgetSaid := false
	for {
		select {
		case <-next:
			busy := false
			var spent *rescue.BudgetSpent
			t, err := snap.Take(ctx, rescue.ReasonInterval)
			switch {
			case errors.Is(err, record.ErrBusy):
				// A command of the user's holds the lock or waits for it:
				// it goes first, and this snapshot is tried again soon.
				busy = true
				e.UI.Tracef("interval snapshot of %s: the sandbox's lock is held or awaited; trying again later", sb.Branch)
			case errors.As(err, &spent):
				failed = 0
				if !budgetSaid {
					budgetSaid = true
					e.UI.Warnf("%s interval snapshots stop: this sandbox's snapshots wrote %s, budget.snapshots is %s; the exit snapshot is still taken", time.Now().Format(time.RFC3339), units.BytesSize(float64(spent.Used)), units.BytesSize(float64(spent.Budget)))
				}
			case err != nil:
				failed++
				e.UI.Warnf("%s snapshot failed (%d in a row; next try in %s): %v", time.Now().Format(time.RFC3339), failed, nextSnapshotTry(interval, failed, false), err)
			default:
				failed = 0
				if t.New {
					e.UI.Infof("%s snapshot %s (%d changes)", time.Now().Format(time.RFC3339), shortID(t.ID), t.Changes)
				}
			}
			e.notifyDenied(ctx, sb, run)
			// The wait starts when this try ended: a snapshot slower than
			// the interval is not followed at once by the next one.
			next = after(nextSnapshotTry(interval, failed, busy))
		case res := <-waitC:
			return e.supervisedExit(ctx, sb, res.Code, run)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// How the supervisor paces its interval snapshots besides the interval.
const (
	// failedSnapshotWait bounds the wait after interval snapshots that
	// failed in a row, which doubles with each (an interval longer than
	// this is kept as it is).
	failedSnapshotWait = time.Minute
	// busySnapshotWait is the wait after an interval snapshot gave way to
	// a command holding or awaiting the sandbox's lock (an interval
	// shorter than this is kept).
	busySnapshotWait = time.Second
)

// nextSnapshotTry is how long the supervisor waits before its next
// interval snapshot: the interval after one taken (or found unchanged);
// after failed ones in a row, twice as long for each, up to
// failedSnapshotWait, so a snapshot that keeps failing (an engine gone,
// a tree refused) is not retried every interval with the sandbox's lock
// held each time; after one that gave way to a user's command (busy),
// soon, as the command may not take a snapshot of its own.
func nextSnapshotTry(interval time.Duration, failed int, busy bool) time.Duration {
	if busy {
		return min(interval, busySnapshotWait)
	}
	d := interval
	for range failed {
		if d >= failedSnapshotWait {
			break
		}
		d *= 2
	}
	return max(interval, min(d, failedSnapshotWait))
}

// supervisedExit takes the exit snapshot of a sandbox whose agent exited
// and runs its automatic verify on that tree (once per tree: a verdict
// already recorded for it is kept), announcing each (notify) once.
func (e *Env) supervisedExit(ctx context.Context, sb *Sandbox, code int, run string) error {
	ctx = context.WithoutCancel(ctx)
	if err := sb.saveLogin(); err != nil {
		e.UI.Warnf("%v", err)
	}
	snap := sb.Snapshotter()
	t, err := snap.Take(ctx, rescue.ReasonExit)
	if err == nil && !t.New && t.Reason != rescue.ReasonExit {
		// An interval snapshot taken after the agent died already holds
		// these files: the exit is still recorded as such.
		t, err = snap.Restamp(ctx, rescue.ReasonExit)
	}
	if err != nil {
		return fmt.Errorf("final snapshot: %w", err)
	}
	sb.quarantineNested(ctx)
	e.UI.Infof("%s agent exited with code %d; snapshot %s", time.Now().Format(time.RFC3339), code, shortID(t.ID))
	e.recordUsage(ctx, sb, run)
	e.notify(ctx, sb, notify.Exited, &code, run)
	e.notifyDenied(ctx, sb, run)
	if sb.Verify != "" {
		v, err := sb.RunVerify(ctx, t, IO{Stdout: e.UI.Writer(), Stderr: e.UI.Writer()})
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		e.UI.Infof("%s verify on tree %s: ok=%v exit code %d", time.Now().Format(time.RFC3339), shortID(t.Tree), v.OK, v.ExitCode)
		ev := notify.VerifyFailed
		if v.OK {
			ev = notify.VerifyPassed
		}
		vcode := v.ExitCode
		e.notify(ctx, sb, ev, &vcode, t.Tree)
	}
	e.notifyConflict(ctx, sb)
	return nil
}
