package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/recovery"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// StartOptions are start's flags, already parsed.
type StartOptions struct {
	Branch  string
	Base    string
	Carry   bool
	Agent   string
	Prompt  string
	Verify  string
	Args    []string
	Detach  bool
	DryRun  bool
	Env     []string // -e KEY or KEY=VALUE
	Image   string
	Network string
	// Allow adds HOST[:PORT] entries to the allow list (--allow).
	Allow   []string
	Runtime string
	Memory  string
	CPUs    float64
	Pids    int64
	// Rerun, for an existing sandbox, runs its original task again.
	Rerun bool
	// Publish are --publish values: PORT or HOST_PORT:PORT.
	Publish []string
	// Engine names a configured engine, or "auto" (--engine).
	Engine string
	// Budget is --budget: dollars the agent may spend on model calls.
	Budget string
	// Subdir is where start ran, relative to the top of the worktree
	// (slash-separated, "" at the top): the agent starts in the same
	// directory of its worktree when the start commit has it.
	Subdir string
	IO     IO
}

// IO is the caller's terminal.
type IO struct {
	Stdin           io.Reader
	StdinIsTerminal bool
	StdinIsPipe     bool
	StdinFd         int
	Stdout, Stderr  io.Writer
}

// StartResult is the outcome of start.
type StartResult struct {
	Plan     *Plan
	Sandbox  *Sandbox
	Resumed  bool
	ExitCode int
}

// Start creates a sandbox and runs its agent, or resumes an existing one.
func (e *Env) Start(ctx context.Context, o StartOptions) (*StartResult, error) {
	if err := worktree.ValidBranch(ctx, e.Git(), o.Branch); err != nil {
		return nil, err
	}
	if _, err := e.RecoverStart(ctx, o.Branch); err != nil {
		return nil, err
	}
	sb, err := e.Find(o.Branch)
	switch {
	case err == nil && o.DryRun:
		return nil, usererr.New("sandbox %s exists: start would resume it", termsafe.String(o.Branch)).
			Hint("git sandbox ps shows it; --dry-run plans new sandboxes only")
	case err == nil:
		return e.resume(ctx, sb, o)
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	p, task, adapter, err := e.plan(ctx, o)
	if err != nil {
		return nil, err
	}
	if p.Engine, err = e.placer().Choose(ctx, o.Engine); err != nil {
		return nil, err
	}
	if p.Engine != "" {
		c, err := e.Config.EngineNamed(p.Engine)
		if err != nil {
			return nil, err
		}
		if c.CopyMode() {
			uninspected, err := planCopy(p, o.Carry, len(o.Publish) > 0, c)
			if err != nil {
				return nil, err
			}
			if len(uninspected) > 0 {
				e.UI.Warnf("engine %s does not inspect %s (copy mode: the agent would not trust the proxy's certificates); a host whose allow entries have method or path rules is refused over TLS there", p.Engine, strings.Join(uninspected, ", "))
			}
		}
	}
	if o.DryRun {
		for _, c := range e.Config.RefusedImages(p.RepoImages) {
			e.UI.Warnf("%s names the image %s, which you have not allowed: start would ask (on a terminal) or refuse", c.Where(), termsafe.String(c.Image))
		}
		return &StartResult{Plan: p.Redacted()}, nil
	}
	if err := e.Toolchain().AllowRepoImages(toolchain.Terminal{In: o.IO.Stdin, IsTerminal: o.IO.StdinIsTerminal, Err: o.IO.Stderr}, p.RepoImages); err != nil {
		return nil, err
	}
	d, err := e.EngineNamed(ctx, p.Engine)
	if err != nil {
		return nil, err
	}
	// Ctrl-C while the sandbox is being made (its image built too)
	// cancels it, and what was made is undone; once the agent runs,
	// Ctrl-C belongs to the agent.
	cctx, stop := sigstack.NotifyContext(ctx, os.Interrupt, syscall.SIGHUP)
	err = e.prepareImage(cctx, d, p, o, adapter)
	if err != nil {
		p.made.Run()
	} else {
		sb, err = e.create(cctx, d, p, o, task, adapter)
	}
	interrupted := cctx.Err() != nil && ctx.Err() == nil
	stop()
	if err != nil {
		if interrupted {
			return nil, usererr.New("interrupted; nothing was created")
		}
		return nil, err
	}
	code, err := e.run(ctx, d, sb, o.Detach, o.IO)
	return &StartResult{Plan: p.Redacted(), Sandbox: sb, ExitCode: code}, err
}

// prepareImage makes sure the sandbox's image is on its engine: copied
// there, the default one built when missing, or the devcontainer's built
// (on the sandbox's networks, which it then makes: p.made); then checks
// that it has the agent's CLI.
func (e *Env) prepareImage(ctx context.Context, d Engine, p *Plan, o StartOptions, adapter agent.Adapter) error {
	if p.Devcontainer == nil {
		if err := e.placer().Ship(ctx, d, p.Engine, p.Container.Image); err != nil {
			return err
		}
		if err := e.Toolchain().EnsureImage(ctx, d, p.Container.Image, o.IO.Stderr); err != nil {
			return err
		}
	} else {
		if err := e.devImage(ctx, d, p, adapter, o.IO); err != nil {
			return err
		}
	}
	return e.Toolchain().CheckAgentCLI(ctx, d, p.Container.Image, adapter, p.buildDenied)
}

// step lets a test fail create right after the named step.
func (e *Env) step(name string) error {
	if e.Faults != nil {
		return e.Faults.At(name)
	}
	return nil
}

// replaySetup writes into a warm-started sandbox's worktree what setup
// wrote into /workspace when it made the warm image (it started from the
// same files), and takes it as the baseline, as a setup run would have.
func (e *Env) replaySetup(ctx context.Context, sb *Sandbox, w *toolchain.Warm) error {
	snap := sb.Snapshotter()
	if err := snap.Checkout(ctx, w.Replay[0], w.Replay[1]); err != nil {
		return fmt.Errorf("write what setup wrote into /workspace: %w", err)
	}
	taken, err := snap.Take(ctx, rescue.ReasonSetup)
	if err != nil {
		return err
	}
	if taken.New {
		return sb.Update(func(r *record.Record) error { r.Baseline = taken.ID; return nil })
	}
	return nil
}

// archiveChain moves the snapshot chain of an ended sandbox of the same
// branch aside, so a new sandbox never overwrites rescue history.
func (e *Env) archiveChain(ctx context.Context, branch string) error {
	g := e.Git()
	refs := rescue.Refs{Branch: branch}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	var moves []gitcmd.RefUpdate
	for name, ref := range map[string]string{"rescue": refs.Rescue(), "baseline": refs.Baseline(), "agent": refs.Agent()} {
		id, err := g.RevParse(ctx, ref)
		if errors.Is(err, gitcmd.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("keep the previous snapshots of %s: %w", termsafe.String(branch), err)
		}
		moves = append(moves,
			gitcmd.RefUpdate{Ref: refs.Ended(stamp) + "/" + name, New: id},
			gitcmd.RefUpdate{Ref: ref, Old: id})
	}
	if len(moves) == 0 {
		return nil
	}
	if err := g.UpdateRefs(ctx, "git sandbox: keep the snapshots of an ended sandbox", moves...); err != nil {
		return fmt.Errorf("keep the previous snapshots of %s: %w", termsafe.String(branch), err)
	}
	return nil
}

// identity is the user's git identity, given to the agent's repository so
// its commits have an author.
func (e *Env) identity(ctx context.Context) (name, email string) {
	g := e.Git()
	name, _ = g.Output(ctx, "config", "--get", "user.name")
	email, _ = g.Output(ctx, "config", "--get", "user.email")
	if name == "" {
		name = "git sandbox agent"
	}
	if email == "" {
		email = "agent@git-sandbox.invalid"
	}
	return name, email
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// RecoverStart removes what a start of branch killed midway made, as rm
// does (internal/recovery), and reports whether there was such a start.
func (e *Env) RecoverStart(ctx context.Context, branch string) (bool, error) {
	return recovery.Start(e.Layout.Dir(branch), e.Layout.Trash(), func(rec *record.Record) error {
		e.UI.Warnf("a start of %s was interrupted; removing what it made", termsafe.String(branch))
		sb := &Sandbox{Record: rec, env: e, interrupted: true}
		d, err := sb.engine(ctx)
		if err != nil {
			return err
		}
		return sb.teardown(ctx, d)
	})
}

// AgentImageProblem is what would stop every sandbox of an agent before
// it is made, asked before a fleet starts: the image the configuration
// names lacks the agent's CLI (the error start would give). A
// repository's devcontainer (built by each start, and checked then), an
// image not on the engine yet (the default one, which the first start
// builds with every CLI) and an engine that does not answer are left to
// each start.
func (e *Env) AgentImageProblem(ctx context.Context, name string) error {
	adapter, err := agent.Get(name)
	if err != nil || adapter.Package() == "" {
		return nil
	}
	head, err := e.Git().RevParse(ctx, "HEAD^{commit}")
	if err != nil {
		return nil
	}
	if dc, err := e.Toolchain().LoadDevcontainer(ctx, "", head.String()); err != nil || dc != nil {
		return nil
	}
	d, err := e.Engine(ctx)
	if err != nil {
		return nil
	}
	if _, err := d.Images().Agents(ctx, e.Config.Image); err != nil {
		return nil
	}
	return e.Toolchain().CheckAgentCLI(ctx, d, e.Config.Image, adapter, nil)
}
