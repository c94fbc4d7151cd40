package sandbox

import (
	"context"
	"errors"
	"os"
	"slices"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/recovery"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
)

// resumption is one start of an existing sandbox: its steps share what the
// earlier ones found.
type resumption struct {
	e  *Env
	sb *Sandbox
	o  StartOptions
	d  Engine
	st *container.State
	// argv is the new container's command (nil: the container is started
	// again as it is); interactive says the agent is asked to be.
	argv        []string
	interactive bool
	// prompt is the task's prompt (the original's for --rerun).
	prompt  string
	newTask bool
	fresh   bool
	// gone says the engine has no container of the sandbox any more (it
	// was removed, or went with the engine's state): a new one is made
	// from the record.
	gone bool
}

// resume starts an existing sandbox's container again. Its container keeps
// what was installed outside /workspace; a container that is gone is made
// again from the record's spec (bind mode), with the task given, its
// original one (--rerun) or interactively, as for a follow-up.
func (e *Env) resume(ctx context.Context, sb *Sandbox, o StartOptions) (*StartResult, error) {
	r := &resumption{e: e, sb: sb, o: o}
	var u steps.Undo
	err := steps.Run(ctx, &u, steps.Options{Flow: "resume", Inject: e.step, Trace: e.UI.Tracef},
		steps.Step{Name: "container state", Do: r.state},
		steps.Step{Name: "mounts", Do: r.mounts},
		steps.Step{Name: "task", Do: r.task},
		steps.Step{Name: "budget", Do: r.budget},
		steps.Step{Name: "container", Do: r.container},
		steps.Step{Name: "proxy", Do: r.proxy},
		steps.Step{Name: "setup", Do: r.setup},
		steps.Step{Name: "record", Do: r.record},
	)
	if err != nil {
		return nil, err
	}
	r.say()
	code, err := e.run(ctx, r.d, sb, o.Detach, o.IO)
	return &StartResult{Sandbox: sb, Resumed: true, ExitCode: code}, err
}

// state refuses a sandbox whose container is gone or runs, and flags that
// cannot change for an existing sandbox.
func (r *resumption) state(ctx context.Context, _ *steps.Undo) error {
	sb := r.sb
	var err error
	if r.d, err = sb.engine(ctx); err != nil {
		return err
	}
	if r.st, err = sb.ContainerState(ctx); err != nil {
		return err
	}
	if r.st == nil {
		if sb.Spec == nil || sb.Workspace().Remote() {
			// Made before the container was recorded, or its files were
			// in volumes on the engine (copy mode): nothing to make a new
			// container from here.
			return usererr.New("sandbox %s has no container any more", sb.Display()).
				Hint("its work is safe: git sandbox rescue list %s shows the snapshots", sb.Display()).
				Hint("git sandbox rm %s removes the rest, then start it again", sb.Display())
		}
		r.gone = true
		r.st = goneState(sb.Spec.ToSpec())
		r.e.UI.Infof("sandbox %s has no container any more; making it again from its record (its branch, worktree and snapshots are kept)", sb.Display())
	}
	if r.st.Running {
		if recovery.Unheld(r.e.Layout.SupervisorLock(sb.Branch)) && r.e.superviseInBackground(sb.Branch) == nil {
			r.e.UI.Warnf("sandbox %s ran without its supervisor (it was killed); started it again", sb.Display())
		}
		return usererr.New("sandbox %s is already running", sb.Display()).
			Hint("git sandbox attach %s connects to it; git sandbox logs %s shows its output", sb.Display(), sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	if err := checkFixedFlags(sb, r.o); err != nil {
		return err
	}
	return network.CheckFollowUpBudget(sb.Record, r.o.Budget)
}

// mounts makes sure every mount source is as it was: the visible store
// (the repository's, not the sandbox's) packed again when it was removed,
// and no source swapped for a symlink since creation (the engine mounts a
// bind source by path when the container starts again, and would follow
// it).
func (r *resumption) mounts(ctx context.Context, _ *steps.Undo) error {
	e, sb := r.e, r.sb
	if err := sb.Snapshotter().CheckWorktree(ctx); err != nil {
		return err
	}
	if vis := workspace.VisibleStore(e.Layout); r.st.Mounts[vis.Objects()] != "" {
		if _, err := os.Stat(vis.Objects()); errors.Is(err, os.ErrNotExist) {
			if _, err := vis.Refresh(ctx, e.Git()); err != nil {
				return err
			}
		}
	}
	for dest, src := range r.st.Mounts {
		resolved, err := container.RefuseUnsafeHostPath("mount "+dest, src)
		if err != nil {
			return err
		}
		if resolved != src {
			return usererr.New("the mount source %s of sandbox %s now resolves to %s", src, sb.Display(), resolved).
				Hint("something replaced a sandbox directory with a symlink; check it, then git sandbox rm %s", sb.Display())
		}
	}
	return nil
}

// task decides what the agent does now: its original task again (--rerun,
// or a container that never ran), a follow-up task, or going on
// interactively; and records a new verify command.
func (r *resumption) task(_ context.Context, _ *steps.Undo) error {
	sb, o := r.sb, r.o
	adapter, err := agent.Get(sb.Agent)
	if err != nil {
		return err
	}
	r.newTask = o.Prompt != "" || len(o.Args) > 0
	if o.Rerun && r.newTask {
		return usererr.New("--rerun runs the sandbox's original task again; it takes no new one").
			Hint("give the follow-up task without --rerun: git sandbox start %s -p TASK", sb.Display())
	}
	if o.Verify != "" && o.Verify != sb.Verify {
		if err := sb.Update(func(rec *record.Record) error { rec.Verify = o.Verify; return nil }); err != nil {
			return err
		}
		r.e.UI.Infof("verify for %s is now: %s", sb.Display(), termsafe.String(o.Verify))
	}
	r.fresh = r.st.Status == "created" && !r.gone // never ran: it starts as planned
	switch {
	case o.Rerun || r.fresh:
		return r.again(adapter)
	case r.newTask:
		r.prompt = o.Prompt
		return r.followUp(adapter, agent.Task{Prompt: o.Prompt, Args: o.Args, Terminal: o.IO.StdinIsTerminal, Continue: true})
	}
	// Nothing new to do: go on with the agent interactively, never run its
	// task again unasked.
	if !o.IO.StdinIsTerminal && !o.Detach {
		return usererr.New("sandbox %s has run its task; without a new one, start goes on with the agent interactively, which needs a terminal", sb.Display()).
			Hint("give it a follow-up task: git sandbox start %s -p TASK", sb.Display()).
			Hint("run its original task again: git sandbox start %s --rerun; run a command in it: git sandbox exec %s -- CMD", sb.Display(), sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	if err := r.followUp(adapter, agent.Task{Terminal: o.IO.StdinIsTerminal, Continue: true}); err != nil {
		return err
	}
	r.interactive = true
	return nil
}

// again runs the original task: in the container as it is, or in a new
// one when the limits change.
func (r *resumption) again(adapter agent.Adapter) error {
	o, sb := r.o, r.sb
	if orig := sb.Argv; orig != nil && !slices.Equal(orig, sb.agentArgv()) {
		// A follow-up replaced the container's command: the original
		// task's comes back.
		r.argv, r.prompt = orig, sb.Prompt
		r.interactive = adapter.Interactive(agent.Task{Prompt: sb.Prompt, Terminal: o.IO.StdinIsTerminal})
		return nil
	}
	if o.Memory == "" && o.CPUs <= 0 && o.Pids <= 0 && !r.gone {
		return nil
	}
	if sb.Spec == nil {
		return usererr.New("sandbox %s was made by an older git sandbox that did not record its container: its limits cannot change", sb.Display()).
			Hint("start it without --memory, --cpus and --pids")
	}
	r.argv, r.prompt = sb.agentArgv(), sb.Prompt
	return nil
}

// followUp gives the agent a task in a new container.
func (r *resumption) followUp(adapter agent.Adapter, task agent.Task) error {
	argv, err := adapter.Argv(task)
	if err != nil {
		return asUserError(err)
	}
	r.interactive = adapter.Interactive(task)
	if r.interactive && !r.o.IO.StdinIsTerminal && !r.o.Detach {
		return agent.NeedTerminal(adapter.Name())
	}
	r.argv = argv
	return nil
}

// container replaces the container when the agent gets a new command.
func (r *resumption) container(ctx context.Context, _ *steps.Undo) error {
	if r.argv == nil {
		return nil
	}
	return r.e.recreate(ctx, r.d, r.sb, agentCommand{argv: r.argv, interactive: r.interactive, prompt: r.prompt, followUp: r.newTask}, r.o)
}

// budget sets the sandbox's dollar budget to --budget, as git sandbox
// budget does (the sandbox's record is updated in place); the proxy made
// next reads it from the record.
func (r *resumption) budget(context.Context, *steps.Undo) error {
	if r.o.Budget == "" {
		return nil
	}
	net, target := r.sb.Live()
	b, err := net.ChangeBudget(target, r.o.Budget, "")
	if err != nil {
		return err
	}
	r.e.UI.Infof("budget for %s is now %s", r.sb.Display(), b)
	return nil
}

func (r *resumption) proxy(ctx context.Context, _ *steps.Undo) error {
	return r.e.network().RestartProxy(ctx, r.d, r.sb.Record, r.sb.Workspace().Remote(), network.IO{Stdin: r.o.IO.Stdin, StdinIsTerminal: r.o.IO.StdinIsTerminal, Stderr: r.o.IO.Stderr})
}

// setup runs setup in a new container first, alone, without the login in
// the home; then the login comes in.
func (r *resumption) setup(ctx context.Context, _ *steps.Undo) error {
	sb := r.sb
	if r.argv != nil && sb.setupPerContainer() {
		if err := r.e.network().ClearLogin(sb.Record); err != nil {
			return err
		}
		err := r.e.Toolchain().RunSetup(ctx, r.d, toolchain.SetupRun{Container: sb.Container, Display: sb.Display(), FollowUp: true, Out: r.o.IO.Stderr})
		if err != nil {
			return err
		}
	}
	return r.e.network().LoadLogin(sb.Record)
}

// record notes that the sandbox is no longer stopped.
func (r *resumption) record(context.Context, *steps.Undo) error {
	if !r.sb.Stopped {
		return nil
	}
	return r.sb.Update(func(rec *record.Record) error { rec.Stopped = false; return nil })
}

// say tells what this start does.
func (r *resumption) say() {
	e, sb := r.e, r.sb
	switch {
	case r.newTask:
		e.UI.Infof("giving %s a follow-up task", sb.Display())
	case r.argv != nil && !r.o.Rerun && !r.fresh:
		e.UI.Infof("continuing %s interactively", sb.Display())
	default:
		e.UI.Infof("resuming %s", sb.Display())
	}
}

// goneState stands for the container of a sandbox the engine no longer
// has: never started, with the bind mounts its record names, so the
// mounts are checked as for any resume before a new one is made.
func goneState(spec *container.Spec) *container.State {
	st := &container.State{Name: spec.Name, Status: "created", Mounts: map[string]string{}}
	for _, m := range spec.Mounts {
		if !m.Volume {
			st.Mounts[m.Target] = m.Source
		}
	}
	return st
}
