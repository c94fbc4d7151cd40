package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/rawterm"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/status"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// States a sandbox can be in, as ps shows them (see package status).
const (
	StateRunning     = status.Running
	StatePaused      = status.Paused
	StateExited      = status.Exited
	StateStopped     = status.Stopped
	StateCreated     = status.Created
	StateMissing     = status.Missing
	StateUnknown     = status.Unknown
	StateUnreachable = status.Unreachable
	StateLost        = status.Lost
)

// Status is one row of ps.
type Status = status.Row

// Statuses reports every sandbox of the repository. Records are the source
// of truth for which sandboxes exist; the engines add their state in one
// call each, and an engine that does not answer makes its sandboxes'
// state unknown rather than an error.
func (e *Env) Statuses(ctx context.Context) ([]Status, error) {
	sbs, errs := e.All()
	for _, err := range errs {
		e.UI.Warnf("%v", err)
	}
	e.EmptyTrash()
	// Every engine the sandboxes are on is asked at once, while git reads
	// the refs: a slow or unreachable one holds up only its own rows.
	answers := make(chan map[string]*engineAnswer, 1)
	go func() { answers <- e.engineStates(ctx, sbs) }()
	tips := rescue.ReadTips(ctx, e.Git(), baseRefs(sbs)...)
	out := e.withStates(sbs, tips, <-answers)
	if fc, err := e.forecast(ctx, sbs, tips, false); err != nil {
		e.UI.Warnf("conflict forecast: %v", err)
	} else {
		for i := range out {
			out[i].Forecast = fc[out[i].Branch]
		}
	}
	return out, nil
}

// RecordedStatuses reports every sandbox of a repository that is gone
// from where it was (NewGoneEnv): what the records and the engines say,
// without the snapshots' counts or the forecast, which need its git.
func (e *Env) RecordedStatuses(ctx context.Context) []Status {
	sbs, errs := e.All()
	for _, err := range errs {
		e.UI.Warnf("%v", err)
	}
	return e.withStates(sbs, nil, e.engineStates(ctx, sbs))
}

// withStates is each sandbox's status with its engine's word on its
// container.
func (e *Env) withStates(sbs []*Sandbox, tips map[string]rescue.Tip, engines map[string]*engineAnswer) []Status {
	for _, name := range slices.Sorted(maps.Keys(engines)) {
		if a := engines[name]; name != "" && a.err != nil {
			e.UI.Warnf("engine %s is unreachable: %v", name, a.err)
		}
	}
	out := make([]Status, 0, len(sbs))
	for _, sb := range sbs {
		st := sb.status(tips)
		setState(&st, sb, engines[sb.Record.Engine])
		out = append(out, st)
	}
	return out
}

// engineAnswer is what one engine said of the repository's containers.
type engineAnswer struct {
	byName map[string]container.State
	err    error
}

// engineStates asks every engine the sandboxes are on (and the
// environment's) for the repository's containers, all at once.
func (e *Env) engineStates(ctx context.Context, sbs []*Sandbox) map[string]*engineAnswer {
	names := map[string]bool{"": true}
	for _, sb := range sbs {
		names[sb.Record.Engine] = true
	}
	out := map[string]*engineAnswer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &engineAnswer{byName: map[string]container.State{}}
			d, err := e.EngineNamed(ctx, name)
			if err == nil {
				var list []container.State
				list, err = d.List(ctx, container.LabelRepo+"="+e.Repo.ID)
				for _, c := range list {
					a.byName[c.Name] = c
				}
			}
			a.err = err
			mu.Lock()
			out[name] = a
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// baseRefs are the branches the sandboxes land on, each once.
func baseRefs(sbs []*Sandbox) []string {
	var bases []string
	seen := map[string]bool{}
	for _, sb := range sbs {
		if sb.BaseRef != "" && !seen[sb.BaseRef] && !strings.HasPrefix(sb.BaseRef, rescue.RefPrefix) {
			seen[sb.BaseRef] = true
			bases = append(bases, sb.BaseRef)
		}
	}
	return bases
}

// status is what the record, the state directory and the newest snapshot
// say of the sandbox.
func (sb *Sandbox) status(tips map[string]rescue.Tip) Status {
	st := Status{
		Branch: sb.Branch, Agent: sb.Agent, Base: sb.Base, Created: sb.Created,
		Worktree: sb.Worktree, Baseline: sb.Baseline, Container: sb.Container,
		Prompt: sb.Prompt, Verify: sb.Verify, Ports: sb.Ports(), Engine: sb.Record.Engine,
	}
	if ws := sb.Workspace(); ws.Remote() {
		st.Worktree = ws.Where()
	}
	st.Network = string(sb.Network())
	if u := sb.TotalUsage(); !u.IsZero() {
		st.Usage = &u
	}
	st.Conflicts, st.Spend = sb.ConflictsInWorktree(), network.SpendOf(sb.Record, sb.NetLog())
	st.SnapshotBytes, _, st.SnapshotBudgetSpent = sb.SnapshotBudget()
	if sb.Egress != nil {
		if sum, err := netlog.SummarizeFile(sb.NetLog()); err == nil {
			st.Denied = sum.Denied + sum.Leaks
		}
	}
	if t, ok := tips[sb.Refs().Rescue()]; ok {
		st.Changes, st.Snapshot, st.TooLarge, st.Nested = t.Changes, t.ID, t.TooLarge, t.Nested
		st.SnapshotTime, st.SnapshotTree = t.Time, t.Tree
	}
	st.Verdict = status.Verdict(sb.Verify, sb.Verdicts, st.SnapshotTree)
	return st
}

// setState is the state of the sandbox's container, as its engine's
// answer a says.
func setState(st *Status, sb *Sandbox, a *engineAnswer) {
	c, ok := a.byName[sb.Container]
	st.SetState(c, ok, a.err, sb.Record.Engine != "", sb.Stopped)
}

// existing connects to the engine and returns the sandbox's container, which
// must exist.
func (s *Sandbox) existing(ctx context.Context) (Engine, *container.State, error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.ContainerState(ctx)
	if err != nil {
		return nil, nil, err
	}
	if st == nil {
		return nil, nil, errMissing(s)
	}
	return d, st, nil
}

// Wait blocks until the sandbox's agent exits and returns its exit code.
// A timeout of 0 waits for ever.
func (s *Sandbox) Wait(ctx context.Context, timeout time.Duration) (int, error) {
	d, st, err := s.existing(ctx)
	if err != nil {
		return -1, err
	}
	if !st.Running {
		if st.Status == "created" {
			return -1, usererr.New("sandbox %s has not started", s.Display()).
				Hint("git sandbox start %s runs it", s.Display())
		}
		return st.ExitCode, s.exitSnapshot(ctx)
	}
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	res := <-d.WaitExit(wctx, s.Container, container.WaitNotRunning)
	if res.Err != nil {
		if errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return -1, usererr.New("sandbox %s is still running after %s", s.Display(), timeout).
				Hint("wait again, or stop it with git sandbox stop %s", s.Display()).
				WithCode(usererr.ExitTimeout)
		}
		return -1, fmt.Errorf("wait: %w", res.Err)
	}
	return res.Code, s.exitSnapshot(ctx)
}

// exitSnapshot makes sure the snapshot of the agent's last files is
// written before wait returns, so ps right after shows what it changed.
// The supervisor takes the same snapshot; whichever comes second finds the
// tree unchanged and writes nothing.
func (s *Sandbox) exitSnapshot(ctx context.Context) error {
	if _, err := s.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonExit); err != nil {
		return fmt.Errorf("snapshot after the agent exited: %w", err)
	}
	s.quarantineNested(context.WithoutCancel(ctx))
	return nil
}

func errMissing(s *Sandbox) error {
	err := usererr.New("sandbox %s has no container any more", s.Display())
	if s.Spec != nil && !s.Workspace().Remote() {
		// resume makes it again from the record.
		err = err.Hint("git sandbox start %s -p \"TASK\" makes it again for a follow-up task (--rerun: its first task), in the same worktree, branch and snapshots", s.Display())
	}
	return err.Hint("git sandbox rescue list %s shows its snapshots; git sandbox rm %s cleans up", s.Display(), s.Display())
}

// Running reports whether the sandbox's container runs. Docker being
// unreachable is an error: callers that delete must not guess.
func (s *Sandbox) Running(ctx context.Context) (bool, error) {
	st, err := s.ContainerState(ctx)
	if err != nil {
		return false, err
	}
	return st != nil && st.Running, nil
}

// Stop stops the agent's container and takes a snapshot.
func (s *Sandbox) Stop(ctx context.Context, timeout time.Duration) (*rescue.Taken, error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.ContainerState(ctx)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Running {
		if err := s.Update(func(r *record.Record) error { r.Stopped = true; return nil }); err != nil {
			return nil, err
		}
		if err := d.Stop(ctx, s.Container, timeout); err != nil {
			return nil, err
		}
	}
	if err := network.StopProxy(ctx, d, s.Record); err != nil {
		s.env.UI.Warnf("the egress proxy was not removed: %v", err)
	}
	t, err := s.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonStop)
	if err != nil {
		return nil, err
	}
	s.quarantineNested(context.WithoutCancel(ctx))
	return t, nil
}

// RemoveOptions control rm.
type RemoveOptions struct {
	// Force removes a running sandbox and one with work that differs from
	// its baseline (the snapshots stay).
	Force bool
	// Reason is recorded on the last snapshot (rm, land).
	Reason rescue.Reason
}

// Remove deletes the sandbox: container, worktree, branch, private
// repository and state. A final snapshot is taken first, and the rescue
// chain stays until pruned.
func (s *Sandbox) Remove(ctx context.Context, o RemoveOptions) (*rescue.Taken, error) {
	ws := s.Workspace()
	d, err := s.engine(ctx)
	if err != nil && ws.Remote() {
		// Its machine may be gone for good: the work is in the snapshots
		// here, so --force forgets the sandbox on this side.
		if !o.Force {
			return nil, usererr.Wrap(err, "engine %s does not answer, so sandbox %s cannot be removed there: %v", s.engineName(), s.Display(), err).
				Hint("its snapshots are here: git sandbox rescue list %s", s.Display()).
				Hint("git sandbox rm --force %s removes it here only (its containers and volumes there stay)", s.Display())
		}
		s.env.UI.Warnf("engine %s does not answer: sandbox %s is removed here only; its containers and volumes there stay", s.engineName(), s.Display())
		return nil, s.teardown(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	st, err := s.ContainerState(ctx)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Running {
		if !o.Force {
			return nil, usererr.New("sandbox %s is still running", s.Display()).
				Hint("stop it first (git sandbox stop %s), or remove it anyway with --force", s.Display()).
				WithCode(usererr.ExitRefused)
		}
		if err := d.Stop(ctx, s.Container, 5*time.Second); err != nil {
			return nil, err
		}
	}
	var last *rescue.Taken
	if _, err := os.Lstat(s.Worktree); err == nil || ws.Remote() {
		// The agent's commits go with its repository: bring them back first,
		// so the last snapshot keeps them (as its second parent).
		if _, err := s.Sync(ctx, false); err != nil {
			s.env.UI.Warnf("the agent's commits were not kept: %v", err)
		}
		reason := o.Reason
		if reason == "" {
			reason = rescue.ReasonRemove
		}
		last, err = s.Snapshotter().Take(ctx, reason)
		if err != nil {
			return nil, usererr.Wrap(err, "cannot take the final snapshot of %s: %v", s.Display(), err).
				Hint("nothing was removed; the newest snapshot is in git sandbox rescue list %s, the worktree %s", s.Display(), ws.Where())
		}
		if len(last.Nested) > 0 && !o.Force {
			s.quarantineNested(context.WithoutCancel(ctx))
			what := "git sandbox rm"
			if reason == rescue.ReasonLand {
				what = "git sandbox land"
			}
			return nil, nestedRefusal(s, last.Nested, what)
		}
		if last.Changes > 0 && !o.Force {
			return nil, usererr.New("sandbox %s has %d changed files that were not landed", s.Display(), last.Changes).
				Hint("git sandbox diff %s shows them; git sandbox land %s lands them", s.Display(), s.Display()).
				Hint("git sandbox rm --force %s removes it anyway (snapshot %s keeps the work)", s.Display(), shortID(last.ID)).
				WithCode(usererr.ExitRefused)
		}
	}
	return last, s.teardown(ctx, d)
}

// teardownEngine removes what the sandbox has on its engine.
func (s *Sandbox) teardownEngine(ctx context.Context, d Engine) []error {
	var errs []error
	if err := d.Remove(ctx, s.Container); err != nil {
		errs = append(errs, err)
	}
	// Verify and proxy containers of this sandbox too, then its networks.
	if others, err := d.List(ctx, container.LabelRepo+"="+s.RepoID, container.LabelBranch+"="+s.Branch); err == nil {
		for _, c := range others {
			_ = d.Remove(ctx, c.ID)
		}
	}
	if err := network.RemoveNetworks(ctx, d, s.Record); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// teardown removes everything of the sandbox except its snapshot refs.
func (s *Sandbox) teardown(ctx context.Context, d Engine) error {
	ctx = context.WithoutCancel(ctx)
	g := s.env.Git()
	var errs []error
	if d != nil { // nil: a lost engine, forgotten with rm --force
		errs = append(errs, s.teardownEngine(ctx, d)...)
	}
	// The worktree and the state directory are moved aside (a rename, so
	// the name can be used again at once, however many files they hold)
	// and deleted in the background.
	trash := s.env.Layout.Trash()
	var engine workspace.Engine
	if d != nil {
		engine = d
	}
	errs = append(errs, s.Workspace().Remove(ctx, trash, engine)...)
	branch := "refs/heads/" + s.Branch
	if head, err := g.RevParse(ctx, branch); err == nil && s.interrupted && head.String() != s.Start {
		s.env.UI.Warnf("kept the branch %s: it moved since the interrupted start made it", termsafe.String(s.Branch))
	} else if err == nil {
		if err := g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: branch, Old: head, Message: "git sandbox: remove sandbox"}); err != nil {
			errs = append(errs, err)
		}
	} else if !errors.Is(err, gitcmd.ErrNotExist) {
		errs = append(errs, err)
	}
	_ = g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: s.Refs().Agent(), AnyOld: true})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := s.env.network().ArchiveUsage(s.Branch, s.Created.UTC().Format("20060102T150405Z")); err != nil {
		s.env.UI.Warnf("the usage log was not kept: %v", err)
	}
	if err := worktree.MoveIntoTrash(s.env.Layout.Dir(s.Branch), trash); err != nil {
		return fmt.Errorf("remove sandbox state: %w", err)
	}
	s.env.EmptyTrash()
	return nil
}

// EmptyTrash deletes what removed sandboxes left in the trash, in the
// background.
func (e *Env) EmptyTrash() {
	var purge func(string) error
	if e.Background != nil {
		purge = e.Background.Purge
	}
	workspace.EmptyTrash(e.Layout.Trash(), purge, e.UI.Warnf)
}

// Logs writes the agent's output.
func (s *Sandbox) Logs(ctx context.Context, follow bool, tail string, stdout, stderr io.Writer) error {
	d, _, err := s.existing(ctx)
	if err != nil {
		return err
	}
	return d.Logs(ctx, s.Container, container.LogsOptions{Follow: follow, Tail: tail, Stdout: stdout, Stderr: stderr})
}

// Changes is how many files the sandbox's newest snapshot changed from its
// baseline; ok is false when it has none.
func (s *Sandbox) Changes(ctx context.Context) (n int, ok bool) {
	t, ok := rescue.ReadTips(ctx, s.env.Git())[s.Refs().Rescue()]
	return t.Changes, ok
}

// Attach connects the terminal (or pipes) to the running agent until its
// output ends, ctx ends, or, on a terminal, the user types Ctrl-P Ctrl-Q
// (rawterm.DetachKeys): then detached is true and the agent runs on. On a
// terminal every other key, Ctrl-C included, goes to the agent.
func (s *Sandbox) Attach(ctx context.Context, io IO) (detached bool, err error) {
	d, st, err := s.existing(ctx)
	if err != nil {
		return false, err
	}
	if !st.Running {
		return false, usererr.New("sandbox %s is not running", s.Display()).
			Hint("git sandbox start %s resumes it; git sandbox logs %s shows what it printed", s.Display(), s.Display())
	}
	tty := st.TTY
	if tty && !io.StdinIsTerminal {
		return false, usererr.New("sandbox %s has a terminal and this command has none", s.Display()).
			Hint("attach from a terminal, or read its output with git sandbox logs -f %s", s.Display())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var keys atomic.Bool
	streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: tty, TerminalFd: io.StdinFd}
	if st.OpenStdin && (io.StdinIsTerminal || io.StdinIsPipe) {
		streams.Stdin = io.Stdin
		if tty {
			// The detach keys are read here, not by the engine, so they
			// are the same on every engine.
			streams.Stdin = rawterm.Detachable(io.Stdin, func() { keys.Store(true); cancel() })
		}
	}
	// The engine refuses to attach to a paused container: attach under the
	// sandbox's lock, so no snapshot pauses the agent while it connects.
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		return false, err
	}
	wait, err := d.Attach(ctx, s.Container, streams)
	unlock()
	if err != nil {
		return false, err
	}
	err = wait()
	return keys.Load(), err
}

// Exec runs a command in the running sandbox as the sandbox user, in
// /workspace, and returns its exit code.
func (s *Sandbox) Exec(ctx context.Context, argv []string, io IO) (int, error) {
	if err := s.Snapshotter().CheckWorktree(ctx); err != nil {
		return -1, err
	}
	d, st, err := s.existing(ctx)
	if err != nil {
		return -1, err
	}
	if len(argv) == 0 {
		if !io.StdinIsTerminal {
			return -1, usererr.New("an interactive shell needs a terminal").
				Hint("give a command: git sandbox exec %s -- CMD", s.Display())
		}
		argv = []string{"/bin/bash", "-l"}
	}
	if !st.Running {
		return s.execFresh(ctx, d, argv, io)
	}
	streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: io.StdinIsTerminal, TerminalFd: io.StdinFd}
	if io.StdinIsTerminal || io.StdinIsPipe {
		streams.Stdin = io.Stdin
	}
	env := []string{"HOME=" + container.Home}
	if io.StdinIsTerminal {
		env = append(env, "TERM="+firstNonEmpty(os.Getenv("TERM"), "xterm-256color"))
	}
	// A process started into a container a snapshot has paused hangs, and
	// with it the daemon's handling of that container (its unpause
	// included). Snapshots pause only under the sandbox's lock: hold it
	// until the command runs, not while it runs.
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		return -1, err
	}
	return d.Exec(ctx, s.Container, container.ExecOptions{
		Argv: argv, User: fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), WorkDir: container.Workspace, Env: env, Streams: streams,
		Started: unlock,
	})
}

// execFresh runs a command in a sandbox whose agent is not running: in a
// fresh container made from the agent's (same image, mounts, hardening,
// limits, network), which is removed when the command ends. The agent is
// not started. The sandbox's lock is held while the command runs, so no
// snapshot reads the files half-written and the agent cannot start beside
// it; a snapshot is taken when it ends, as after the agent.
func (s *Sandbox) execFresh(ctx context.Context, d Engine, argv []string, io IO) (int, error) {
	if s.Spec == nil {
		return -1, usererr.New("sandbox %s is not running, and was made by an older git sandbox that did not record its container", s.Display()).
			Hint("git sandbox start -d %s runs it again; then exec works", s.Display())
	}
	spec := s.Spec.ToSpec()
	spec.Name = fmt.Sprintf("%s-exec-%d", s.Container, time.Now().UnixNano())
	spec.Argv = argv
	spec.Labels[container.LabelRole] = container.RoleExec
	spec.TTY = io.StdinIsTerminal
	spec.OpenStdin = io.StdinIsTerminal || io.StdinIsPipe
	spec.StdinOnce = spec.OpenStdin && !spec.TTY
	if spec.TTY {
		spec.Env = append(spec.Env, "TERM="+firstNonEmpty(os.Getenv("TERM"), "xterm-256color"))
	}
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		return -1, err
	}
	code, err := func() (int, error) {
		defer unlock()
		if st, err := s.ContainerState(ctx); err != nil {
			return -1, err
		} else if st != nil && st.Running {
			return -1, usererr.New("sandbox %s started while exec was getting ready", s.Display()).
				Hint("run git sandbox exec %s again", s.Display())
		}
		// The command runs where the agent would: with its nested
		// repositories in place (quarantined again after it).
		if err := s.env.restoreNested(ctx, s); err != nil {
			return -1, err
		}
		streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: spec.TTY, TerminalFd: io.StdinFd}
		if spec.OpenStdin {
			streams.Stdin = io.Stdin
		}
		res, err := container.Run(ctx, d, spec, container.RunOptions{Streams: streams, Started: func(id string) func() {
			return forwardSignals(ctx, d, id, spec.TTY)
		}})
		if err != nil {
			return -1, err
		}
		if res.Err != nil {
			return -1, fmt.Errorf("wait for the command: %w", res.Err)
		}
		return res.Code, nil
	}()
	if err != nil {
		s.quarantineNested(context.WithoutCancel(ctx))
		return code, err
	}
	if _, err := s.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonExec); err != nil {
		s.env.UI.Warnf("snapshot after the command failed: %v", err)
	}
	s.quarantineNested(context.WithoutCancel(ctx))
	return code, nil
}

// WaitAny blocks until the first of the sandboxes' agents exits (one that
// has exited already counts at once, the first listed winning) and returns
// it with its exit code. A timeout of 0 waits for ever.
func (e *Env) WaitAny(ctx context.Context, sbs []*Sandbox, timeout time.Duration) (*Sandbox, int, error) {
	if len(sbs) == 0 {
		return nil, -1, usererr.New("wait --any needs at least one sandbox")
	}
	d, err := e.Engine(ctx)
	if err != nil {
		return nil, -1, err
	}
	ids := make([]string, len(sbs))
	for i, sb := range sbs {
		ids[i] = sb.Container
	}
	i, code, err := container.FirstExit(ctx, d, ids, timeout)
	switch {
	case err == nil:
		return sbs[i], code, sbs[i].exitSnapshot(ctx)
	case container.IsNotFound(err):
		return nil, -1, errMissing(sbs[i])
	case errors.Is(err, container.ErrNotStarted):
		return nil, -1, usererr.New("sandbox %s has not started", sbs[i].Display()).
			Hint("git sandbox start %s runs it", sbs[i].Display())
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, -1, usererr.New("no sandbox's agent exited within %s", timeout).
			Hint("wait again, or stop them with git sandbox stop BRANCH").
			WithCode(usererr.ExitTimeout)
	case i >= 0:
		return nil, -1, fmt.Errorf("wait for %s: %w", sbs[i].Display(), err)
	}
	return nil, -1, err
}

// OutOfMemory says whether the engine ended the agent's last run for
// memory, as "out of memory (limit 4g)" (code is the run's exit code: only
// a kill, 137, is looked into); "" when it did not.
func (s *Sandbox) OutOfMemory(ctx context.Context, code int) string {
	if code != 137 {
		return ""
	}
	d, err := s.engine(ctx)
	if err != nil {
		return ""
	}
	st, err := d.Inspect(ctx, s.Container)
	if err != nil || s.Spec == nil {
		return ""
	}
	return container.OutOfMemory(st, s.Spec.Limits.MemoryBytes)
}
