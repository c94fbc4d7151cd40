package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentspec"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/notify"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

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
		Hint("leave them out to go on in %s (a follow-up task: -p TASK; --verify, --budget and limits may change)", sb.Display()).
		Hint("or start a new sandbox with them: git sandbox start NEW-BRANCH …").
		WithCode(usererr.ExitUsage)
}

// agentArgv is the agent's command in the recorded container spec, without
// the setup wrapper.
func (sb *Sandbox) agentArgv() []string { return agentspec.AgentArgv(sb.Spec.Argv) }

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
	return append([]string{"/bin/sh", "-c", toolchain.SetupScript, "git-sandbox-setup"}, argv...)
}

// agentCommand is what a new container of the agent runs: its command,
// whether the agent is asked to be interactive, the task's prompt (its
// label and GIT_SANDBOX_PROMPT), and whether it is a follow-up task, which
// the record lists.
type agentCommand struct {
	argv        []string
	interactive bool
	prompt      string
	followUp    bool
}

// recreate replaces the sandbox's (stopped) container by a new one from
// its recorded spec (same name, image, mounts, hardening, network) running
// argv, with the limits and terminal of this start. If the new one cannot
// be created, the old spec is created again, so the sandbox always has a
// container.
func (e *Env) recreate(ctx context.Context, d Engine, sb *Sandbox, c agentCommand, o StartOptions) error {
	if sb.Spec == nil {
		return usererr.New("sandbox %s was made by an older git sandbox that did not record its container, so it cannot take a follow-up task", sb.Display()).
			Hint("run its original task again with git sandbox start %s --rerun, or run a command with git sandbox exec", sb.Display())
	}
	spec := sb.Spec.ToSpec()
	tty := o.IO.StdinIsTerminal && !o.Detach || c.interactive && o.Detach
	if err := agentspec.Rebuild(spec, agentspec.Again{
		Argv: sb.withSetup(agentspec.WithTerminalWait(c.argv, tty)),
		TTY:  tty, OpenStdin: tty || (!o.Detach && o.IO.StdinIsPipe),
		Prompt: c.prompt, Memory: o.Memory, CPUs: o.CPUs, Pids: o.Pids, Verify: o.Verify,
	}); err != nil {
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
		if _, rerr := d.Create(context.WithoutCancel(ctx), sb.Spec.ToSpec()); rerr != nil {
			e.UI.Warnf("the old container could not be made again either: %v", rerr)
		}
		return fmt.Errorf("create the follow-up container: %w", err)
	}
	return sb.Update(func(r *record.Record) error {
		r.Spec = record.ContainerOf(spec)
		if c.followUp && c.prompt != "" {
			r.Tasks = append(r.Tasks, c.prompt)
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
	if err := e.network().SaveLogin(sb.Record); err != nil {
		e.UI.Warnf("%v", err)
	}
	network.HintCLIDenials(e.UI, e.network().CLIDenials(sb.Record))
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
	if err := e.restoreNested(ctx, sb); err != nil {
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
	if e.Background != nil {
		return e.Background.Supervise(branch)
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
	// A bound worktree is watched while the agent runs: snapshots look at
	// what changed only.
	if w, ok := sb.Workspace().(interface{ Watch(context.Context) func() }); ok {
		defer w.Watch(ctx)()
	}
	defer e.watchProxy(ctx, d, sb)()
	waitC := d.WaitExit(ctx, sb.Container, container.WaitNotRunning)
	clock := e.Clock
	if clock == nil {
		clock = realClock{}
	}
	p := &rescue.Pacer{Snap: snap, Interval: interval, Log: e.UI}
	next := clock.After(interval)
	for {
		select {
		case <-next:
			busy := p.Take(ctx)
			e.notifyDenied(ctx, sb, run)
			e.notifySpend(ctx, sb)
			// The wait starts when this try ended: a snapshot slower than
			// the interval is not followed at once by the next one.
			next = clock.After(p.Next(busy))
		case res := <-waitC:
			return e.supervisedExit(ctx, sb, res.Code, run)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchProxy starts what the supervisor does for an allowlist sandbox's
// proxy while the agent runs, and returns what stops it: the copies here
// of a copy-mode proxy's log and held connections (its files are on the
// engine), and the announcement of each held connection (notify).
func (e *Env) watchProxy(ctx context.Context, d container.Engine, sb *Sandbox) func() {
	if sb.Egress == nil || e.Config == nil {
		return func() {}
	}
	wctx, stop := context.WithCancel(ctx)
	mirrored := make(chan struct{})
	if sb.Copy != nil {
		go func() {
			defer close(mirrored)
			e.network().MirrorProxy(wctx, d, sb.Record, e.Config.NetworkPrompt)
		}()
	} else {
		close(mirrored)
	}
	if e.Config.NetworkPrompt && e.Config.Notify != "" {
		go e.network().WatchHeld(wctx, sb.Branch, func(q held.Request) { e.notify(wctx, sb, notify.EgressHeld, nil, q.ID) })
	}
	return func() {
		stop()
		<-mirrored // its last look
	}
}

// supervisedExit takes the exit snapshot of a sandbox whose agent exited
// and runs its automatic verify on that tree (once per tree: a verdict
// already recorded for it is kept), announcing each (notify) once.
func (e *Env) supervisedExit(ctx context.Context, sb *Sandbox, code int, run string) error {
	ctx = context.WithoutCancel(ctx)
	if err := e.network().SaveLogin(sb.Record); err != nil {
		e.UI.Warnf("%v", err)
	}
	snap := sb.Snapshotter()
	t, err := snap.Take(ctx, rescue.ReasonExit)
	if err == nil && !t.New && t.Reason.WhileRunning() {
		// An interval snapshot taken after the agent died already holds
		// these files: the exit is still recorded as such. A command the
		// user ran since (wait, update, land --keep, exec) wrote a later
		// snapshot of them, and an exit stamped after it would come out
		// of order.
		t, err = snap.Restamp(ctx, rescue.ReasonExit)
	}
	if err != nil {
		return fmt.Errorf("final snapshot: %w", err)
	}
	sb.quarantineNested(ctx)
	why := ""
	if oom := sb.OutOfMemory(ctx, code); oom != "" {
		why = " (" + oom + ")"
	}
	e.UI.Infof("%s agent exited with code %d%s; snapshot %s", time.Now().Format(time.RFC3339), code, why, shortID(t.ID))
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
