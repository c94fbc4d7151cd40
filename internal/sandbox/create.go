package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/agentspec"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/recovery"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// creation is one start making a new sandbox, whatever its workspace: the
// steps share what the earlier ones made.
type creation struct {
	e       *Env
	d       Engine
	p       *Plan
	o       StartOptions
	task    agent.Task
	adapter agent.Adapter

	rec  *record.Record
	sb   *Sandbox
	ws   workspace.Workspace
	wo   workspace.CreateOptions
	base *rescue.Taken
	spec container.Spec
	warm *toolchain.Warm
	mark *recovery.Mark
}

// create makes the sandbox: state directory, branch and worktree (here or
// in volumes on the engine), baseline, record, the agent's repository, its
// home, networks, caches, container and setup. On failure everything it
// made is removed again, on the engine too, and the error names the step.
func (e *Env) create(ctx context.Context, d Engine, p *Plan, o StartOptions, task agent.Task, adapter agent.Adapter) (*Sandbox, error) {
	c := &creation{e: e, d: d, p: p, o: o, task: task, adapter: adapter}
	c.rec = c.newRecord()
	c.sb = &Sandbox{Record: c.rec, env: e}
	c.ws = c.sb.Workspace()
	var u steps.Undo
	// What start made for the plan before (the networks and proxy a
	// devcontainer build ran on) goes with the rest.
	u.Add(p.made.Run)
	err := steps.Run(ctx, &u, steps.Options{Flow: "start", Inject: e.step, Trace: e.UI.Tracef},
		steps.Step{Name: "state directory", Do: c.stateDir},
		steps.Step{Name: "worktree", Do: c.worktree},
		steps.Step{Name: "baseline", Do: c.baseline},
		steps.Step{Name: "record", Do: c.saveRecord},
		steps.Step{Name: "private repository", Do: c.agentRepo},
		steps.Step{Name: "home", Do: c.home},
		steps.Step{Name: "network", Do: c.network},
		steps.Step{Name: "caches", Do: c.caches},
		steps.Step{Name: "warm image", Do: c.warmImage},
		steps.Step{Name: "container", Do: c.container},
		steps.Step{Name: "setup", Do: c.setup},
	)
	if err != nil {
		return nil, err
	}
	c.mark.Done()
	return c.sb, nil
}

// newRecord is the record of the sandbox being made, as far as the plan
// knows it.
func (c *creation) newRecord() *record.Record {
	p, e := c.p, c.e
	rec := &record.Record{
		Branch:        p.Branch,
		RepoID:        e.Repo.ID,
		CommonDir:     e.Repo.CommonDir,
		Base:          p.Base,
		BaseTip:       p.BaseCommit,
		Start:         p.BaseCommit,
		Worktree:      p.Worktree,
		PrivateGitDir: p.PrivateGitDir,
		Container:     p.Container.Name,
		Engine:        p.Engine,
		Copy:          p.Copy,
		Image:         p.Container.Image,
		Agent:         c.adapter.Name(),
		Prompt:        c.task.Prompt,
		Verify:        p.Verify,
		Setup:         p.Setup,
		Carried:       p.Carry,
		Created:       time.Now().UTC(),
	}
	if eg := p.Egress; eg != nil {
		rec.Egress = eg.Record()
	}
	if p.Base != "" {
		rec.BaseRef = "refs/heads/" + p.Base
	}
	return rec
}

// stateDir makes the sandbox's state directory and keeps the snapshots of
// an ended sandbox of the same branch.
func (c *creation) stateDir(ctx context.Context, u *steps.Undo) error {
	dir := c.e.Layout.Dir(c.p.Branch)
	err := os.MkdirAll(dir, 0o700)
	if err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	// Marked until whole: a start killed midway is undone by the next; a
	// start of the same sandbox under way keeps its directory.
	if c.mark, err = recovery.Begin(filepath.Join(dir, recovery.MarkName), c.rec); err != nil {
		return err
	}
	u.Add(func() { os.RemoveAll(dir) })
	u.Add(c.mark.Release)
	// Where the repository is, for ps --all-repos (kept when the start
	// fails: it lists repositories with a sandbox's record only).
	if err := c.e.Layout.Remember(c.e.Repo); err != nil {
		return err
	}
	return c.e.archiveChain(ctx, c.p.Branch)
}

// worktree makes the branch and its files at the start commit.
func (c *creation) worktree(ctx context.Context, u *steps.Undo) error {
	c.wo = workspace.CreateOptions{Carry: c.p.Carry}
	c.wo.UserName, c.wo.UserEmail = c.e.identity(ctx)
	hooksDir, _, err := c.e.Repo.HooksDir(ctx)
	if err != nil {
		return err
	}
	c.wo.HooksDir, c.wo.Agent = hooksDir, c.p.Container
	if err := c.ws.Create(ctx, u, c.wo); err != nil {
		return err
	}
	if m := c.ws.PooledMounts(); m != nil {
		// The engine's warm pool gave the volumes (the agent's mounts were renamed).
		c.p.in.Workspace = m
		return c.mark.Update(c.rec)
	}
	return nil
}

// baseline takes the first snapshot: what the sandbox started with, which
// land never counts as the agent's.
func (c *creation) baseline(ctx context.Context, u *steps.Undo) error {
	g := c.e.Git()
	refs := rescue.Refs{Branch: c.p.Branch}
	cctx := context.WithoutCancel(ctx)
	u.Add(func() {
		for _, r := range []string{refs.Rescue(), refs.Baseline(), refs.Agent()} {
			_ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: r, AnyOld: true})
		}
	})
	base, err := c.sb.Snapshotter().Take(ctx, rescue.ReasonStart)
	if err != nil {
		return err
	}
	c.base, c.rec.Baseline = base, base.ID
	return nil
}

func (c *creation) saveRecord(context.Context, *steps.Undo) error {
	return record.Save(c.e.Layout.Record(c.p.Branch), c.rec)
}

func (c *creation) agentRepo(ctx context.Context, u *steps.Undo) error {
	return c.ws.CreateAgentRepo(ctx, u, c.wo)
}

// home makes the agent's home on this machine (a volume of the engine's in
// copy mode) and its login store.
func (c *creation) home(context.Context, *steps.Undo) error {
	home := c.ws.HostHome()
	if home == "" {
		return nil
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create the sandbox's home: %w", err)
	}
	if len(c.adapter.LoginPaths()) > 0 {
		c.rec.LoginStore = c.e.network().LoginStore(c.adapter.Name())
		if err := c.e.network().NewLoginStore(c.adapter, c.rec.LoginStore); err != nil {
			return err
		}
	}
	return nil
}

// network re-plans the container's mounts now that every path exists (so
// what is mounted is what was resolved a moment ago, with the baseline
// stamped), and makes the sandbox's networks and egress proxy, unless a
// devcontainer build made them already; the container's environment then
// points at the proxy's address, and its hosts file names it.
func (c *creation) network(ctx context.Context, u *steps.Undo) error {
	p, e := c.p, c.e
	c.spec = *p.Container
	c.spec.Labels = cloneMap(c.spec.Labels)
	c.spec.Mounts = append([]container.Mount(nil), c.spec.Mounts...)
	c.spec.Labels[container.LabelBaseline] = c.base.ID
	for i, m := range c.spec.Mounts {
		if m.Volume {
			continue
		}
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return err
		}
		c.spec.Mounts[i].Source = src
	}
	if !p.networksMade {
		if err := e.network().Make(ctx, c.d, network.Networks{Branch: p.Branch, Egress: p.Egress, OpenNetwork: p.OpenNetwork}, u); err != nil {
			return err
		}
	}
	if p.Egress != nil {
		c.spec.Env = p.Egress.AgentEnv(c.spec.Env)
		c.spec.Hosts = append(c.spec.Hosts, p.Egress.AgentHosts()...)
		c.rec.Egress.ProxyAddr = p.Egress.ProxyAddr
	}
	return nil
}

// caches makes the cache volumes the container mounts (not the
// workspace's own volumes).
func (c *creation) caches(ctx context.Context, _ *steps.Undo) error {
	caches := c.spec
	caches.Mounts = nil
	own := map[string]bool{}
	for _, m := range c.p.in.Workspace {
		own[m.Source] = true
	}
	for _, m := range c.spec.Mounts {
		if !own[m.Source] {
			caches.Mounts = append(caches.Mounts, m)
		}
	}
	return c.e.Toolchain().EnsureCaches(ctx, c.d, &caches, c.ws.HostHome())
}

// warmImage runs setup into a warm image, or finds the one that holds its
// result: with a setup, its result is kept as an image, made here when no
// image of the same key exists, else setup is skipped.
func (c *creation) warmImage(ctx context.Context, _ *steps.Undo) error {
	p, e := c.p, c.e
	if p.Setup == "" {
		return nil
	}
	tc := e.Toolchain()
	w, err := tc.PlanWarm(ctx, c.d, &c.spec, c.base, p.Setup, c.adapter.Name())
	if err != nil || w == nil {
		return err
	}
	c.warm = w
	if w.Found {
		e.UI.Infof("setup skipped: image %s holds its result (made %s, same image, setup and setup_inputs)", w.Tag, w.Created.Local().Format("2006-01-02 15:04"))
		toolchain.WithoutSetup(&c.spec, w.Tag)
		return nil
	}
	err = tc.SetupWarm(ctx, c.d, &c.spec, w, toolchain.WarmRun{
		Branch: p.Branch, Display: c.sb.Display(), Out: c.o.IO.Stderr, Snapshot: c.sb.setupSnapshot,
	})
	if err != nil {
		return err
	}
	// The baseline may have moved to setup's snapshot; the rest of the
	// record is this flow's (sb.Update read it from disk).
	c.rec.Baseline, c.sb.Record = c.sb.Record.Baseline, c.rec
	toolchain.WithoutSetup(&c.spec, w.Tag)
	return nil
}

// container creates the agent's container and records its spec.
func (c *creation) container(ctx context.Context, u *steps.Undo) error {
	id, err := c.d.Create(ctx, &c.spec)
	if err != nil {
		return err
	}
	cctx := context.WithoutCancel(ctx)
	u.Add(func() { _ = c.d.Remove(cctx, id) })
	c.rec.Spec = record.ContainerOf(&c.spec)
	c.rec.Argv = agentspec.AgentArgv(c.spec.Argv)
	if c.warm != nil {
		c.rec.WarmImage = c.warm.Tag
	}
	return record.Save(c.e.Layout.Record(c.p.Branch), c.rec)
}

// setup runs setup on the container's first start (no warm image), or
// writes what the warm image's setup wrote into /workspace; then the
// login comes in: the repository's setup never sees it.
func (c *creation) setup(ctx context.Context, _ *steps.Undo) error {
	switch w := c.warm; {
	case c.p.Setup != "" && w == nil:
		err := c.e.Toolchain().RunSetup(ctx, c.d, toolchain.SetupRun{Container: c.sb.Container, Display: c.sb.Display(), Out: c.o.IO.Stderr})
		if err != nil {
			return err
		}
		if _, _, err := c.sb.setupSnapshot(ctx); err != nil {
			return err
		}
	case w != nil && w.Found && w.Replay[1] != "":
		if err := c.e.replaySetup(ctx, c.sb, w); err != nil {
			return err
		}
	}
	return c.e.network().LoadLogin(c.rec)
}
