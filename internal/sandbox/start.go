package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
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
	Runtime string
	Memory  string
	CPUs    float64
	Pids    int64
	IO      IO
}

// IO is the caller's terminal.
type IO struct {
	Stdin           io.Reader
	StdinIsTerminal bool
	StdinIsPipe     bool
	StdinFd         int
	Stdout, Stderr  io.Writer
}

// Plan is what start will do, printed by --dry-run (as Redacted returns
// it).
type Plan struct {
	Branch        string          `json:"branch"`
	Base          string          `json:"base"`
	BaseCommit    string          `json:"base_commit"`
	Worktree      string          `json:"worktree"`
	PrivateGitDir string          `json:"private_git_dir"`
	Record        string          `json:"record"`
	Carry         bool            `json:"carry"`
	Setup         string          `json:"setup,omitempty"`
	Verify        string          `json:"verify,omitempty"`
	Detach        bool            `json:"detach"`
	Interval      string          `json:"rescue_interval"`
	Container     *container.Spec `json:"container"`

	// passed names the variables passed from the host, whose values
	// Redacted hides.
	passed []string
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
	if o.DryRun {
		return &StartResult{Plan: p.Redacted()}, nil
	}
	d, err := e.Docker(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.ensureImage(ctx, d, p.Container.Image, o.IO); err != nil {
		return nil, err
	}
	// Ctrl-C while the sandbox is being made cancels it, and what was made
	// is undone; once the agent runs, Ctrl-C belongs to the agent.
	cctx, stop := sigstack.NotifyContext(ctx, os.Interrupt, syscall.SIGHUP)
	sb, err = e.create(cctx, d, p, o, task, adapter)
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

// plan checks everything that can be checked before anything is created
// and computes the container spec.
func (e *Env) plan(ctx context.Context, o StartOptions) (*Plan, agent.Task, agent.Adapter, error) {
	g := e.Git()
	l := e.Layout
	if _, err := g.RevParse(ctx, "refs/heads/"+o.Branch); !errors.Is(err, gitcmd.ErrNotExist) {
		if err != nil {
			return nil, agent.Task{}, nil, err
		}
		return nil, agent.Task{}, nil, usererr.New("branch %s already exists and is not a sandbox", termsafe.String(o.Branch)).
			Hint("choose another name, or rename the branch first (git branch -m %s NEW)", termsafe.String(o.Branch))
	}
	wt := l.Worktree(o.Branch)
	if _, err := os.Lstat(wt); err == nil {
		return nil, agent.Task{}, nil, usererr.New("worktree path %s is already taken", wt).
			Hint("a sandbox of that name was not cleaned up; move the directory away or remove it, then start again")
	}
	agentName := o.Agent
	if agentName == "" {
		agentName = e.Config.Agent
	}
	adapter, err := agent.Get(agentName)
	if err != nil {
		return nil, agent.Task{}, nil, err
	}
	task := agent.Task{Prompt: o.Prompt, Args: o.Args, Terminal: o.IO.StdinIsTerminal}
	argv, err := adapter.Argv(task)
	if err != nil {
		return nil, task, nil, usererr.Wrap(err, "%v", err)
	}
	interactive := adapter.Interactive(task)
	if interactive && !o.IO.StdinIsTerminal && !o.Detach {
		return nil, task, nil, agent.NeedTerminal(adapter.Name())
	}
	base, baseCommit, err := e.resolveBase(ctx, o.Base)
	if err != nil {
		return nil, task, nil, err
	}
	if o.Carry {
		if err := e.checkCarry(ctx, baseCommit); err != nil {
			return nil, task, nil, err
		}
	}
	env, err := resolveEnv(append(append([]string{}, e.Config.Env...), o.Env...))
	if err != nil {
		return nil, task, nil, err
	}
	image := firstNonEmpty(o.Image, e.Config.Image)
	network := firstNonEmpty(o.Network, e.Config.Network)
	if network != "none" && network != "bridge" {
		return nil, task, nil, usererr.New("--network %q: must be none or bridge", network).
			Hint("host networking is never offered: it would give the agent the host's services")
	}
	hooksDir, _, err := e.Repo.HooksDir(ctx)
	if err != nil {
		return nil, task, nil, err
	}
	tty := o.IO.StdinIsTerminal && !o.Detach || interactive && o.Detach
	openStdin := tty || (!o.Detach && o.IO.StdinIsPipe)
	verify := firstNonEmpty(o.Verify, e.Config.Verify)
	in := PlanInput{
		Name:          container.Name(e.Repo.ID, e.Repo.Name, o.Branch),
		Image:         image,
		Branch:        o.Branch,
		RepoID:        e.Repo.ID,
		Base:          base,
		Agent:         adapter.Name(),
		Prompt:        o.Prompt,
		Verify:        verify,
		Setup:         e.Config.Setup,
		Argv:          argv,
		AgentEnv:      adapter.Env(),
		UserEnv:       env,
		Worktree:      wt,
		Gitfile:       l.Gitfile(o.Branch),
		PrivateGitDir: l.PrivateGitDir(o.Branch),
		HostObjects:   e.Repo.ObjectsDir(),
		HostHooks:     hooksDir,
		AgentHome:     l.AgentHome(adapter.Name()),
		ExtraMounts:   e.Config.Mounts,
		Network:       network,
		Runtime:       firstNonEmpty(o.Runtime, e.Config.Runtime),
		Memory:        firstNonEmpty(o.Memory, e.Config.Limits.Memory),
		CPUs:          firstPositive(o.CPUs, e.Config.Limits.CPUs),
		Pids:          int64(firstPositive(float64(o.Pids), float64(e.Config.Limits.Pids))),
		TTY:           tty,
		OpenStdin:     openStdin,
		UID:           os.Getuid(),
		GID:           os.Getgid(),
	}
	spec, err := BuildSpec(in)
	if err != nil {
		return nil, task, nil, err
	}
	return &Plan{
		Branch:        o.Branch,
		Base:          base,
		BaseCommit:    baseCommit,
		Worktree:      wt,
		PrivateGitDir: in.PrivateGitDir,
		Record:        l.Record(o.Branch),
		Carry:         o.Carry,
		Setup:         in.Setup,
		Verify:        verify,
		Detach:        o.Detach,
		Interval:      e.Config.Rescue.Interval.String(),
		Container:     spec,
		passed:        envNames(env),
	}, task, adapter, nil
}

// resolveBase returns the branch work lands on and the commit the sandbox
// starts at. Without --base it is the current branch.
func (e *Env) resolveBase(ctx context.Context, base string) (name, commit string, err error) {
	g := e.Git()
	if base == "" {
		cur, err := worktree.CurrentBranch(ctx, e.Repo.GitAt(e.Repo.GitDir, e.Repo.WorkTree))
		if err != nil {
			return "", "", err
		}
		if cur == "" {
			return "", "", usererr.New("HEAD is detached: there is no current branch to start from").
				Hint("name the branch the work should land on with --base BRANCH")
		}
		base = cur
	}
	if strings.HasPrefix(base, "-") {
		return "", "", usererr.New("base %s is not a commit in this repository", termsafe.String(base))
	}
	id, err := g.PeelToCommit(ctx, base)
	if errors.Is(err, gitcmd.ErrNotExist) {
		return "", "", usererr.New("base %s is not a commit in this repository", termsafe.String(base)).
			Hint("give --base an existing branch (git branch lists them)")
	}
	if err != nil {
		return "", "", fmt.Errorf("read base %s: %w", termsafe.String(base), err)
	}
	if full, err := g.SymbolicFullName(ctx, base); err == nil && strings.HasPrefix(full, "refs/heads/") {
		return strings.TrimPrefix(full, "refs/heads/"), id.String(), nil
	}
	// A tag, remote-tracking branch or commit: work starts there, and land
	// then needs --onto to know where it goes.
	return "", id.String(), nil
}

func (e *Env) checkCarry(ctx context.Context, baseCommit string) error {
	head, err := e.Repo.GitAt(e.Repo.GitDir, e.Repo.WorkTree).PeelToCommit(ctx, "HEAD")
	if err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	if head.String() != baseCommit {
		return usererr.New("--carry copies the uncommitted work of this checkout, which is at %s, not at the base %s", head.Short(), shortID(baseCommit)).
			Hint("start from this checkout's branch (drop --base), or check out the base first")
	}
	return nil
}

// resolveEnv turns -e KEY[=VALUE] into KEY=VALUE; a bare KEY takes the
// host's value and is skipped when unset.
func resolveEnv(specs []string) ([]string, error) {
	var out []string
	for _, s := range specs {
		k, v, hasValue := strings.Cut(s, "=")
		if k == "" || strings.ContainsAny(k, " \t\n\x00") {
			return nil, usererr.New("-e %q: not a variable name", s)
		}
		if !hasValue {
			var ok bool
			if v, ok = os.LookupEnv(k); !ok {
				continue
			}
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// ensureImage makes sure the image exists, building the default one when
// it is missing.
func (e *Env) ensureImage(ctx context.Context, d *container.Docker, image string, io IO) error {
	ok, err := d.ImageExists(ctx, image)
	if err != nil || ok {
		return err
	}
	if image != config.DefaultImage() {
		return container.ErrImageMissing(image, false)
	}
	e.UI.Infof("image %s is missing; building it from %s", termsafe.String(image), termsafe.String(e.Config.BaseImage))
	return d.Build(ctx, container.BuildOptions{Tag: image, Base: e.Config.BaseImage, Agents: agent.Packages(), Progress: io.Stderr})
}

// undo collects the steps that remove what a failed start created.
type undo []func()

func (u *undo) add(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// create makes the sandbox: branch and worktree, carried work, baseline,
// record, private repository, container, setup. On failure everything it
// made is removed again.
func (e *Env) create(ctx context.Context, d *container.Docker, p *Plan, o StartOptions, task agent.Task, adapter agent.Adapter) (sb *Sandbox, err error) {
	l := e.Layout
	g := e.Git()
	var u undo
	defer func() {
		if err != nil {
			// Undo with a fresh context: an interrupted start still cleans up.
			u.run()
		}
	}()
	cctx := context.WithoutCancel(ctx)
	dir := l.Dir(p.Branch)
	u.add(func() { os.RemoveAll(dir) })
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	if err := e.archiveChain(ctx, p.Branch); err != nil {
		return nil, err
	}
	err = worktree.Add(ctx, g, worktree.AddOptions{
		Path: p.Worktree, Branch: p.Branch, Start: p.BaseCommit, Reason: "git sandbox " + p.Branch,
	})
	if err != nil {
		return nil, err
	}
	u.add(func() {
		_ = worktree.Remove(cctx, e.Repo.CommonDir, g, p.Worktree)
		_ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: "refs/heads/" + p.Branch, AnyOld: true})
	})
	admin, err := worktree.AdminDir(e.Repo.CommonDir, p.Worktree)
	if err != nil {
		return nil, err
	}
	if p.Carry {
		if err := e.carry(ctx, p.Worktree, admin); err != nil {
			return nil, err
		}
	}
	snap := e.snapshotter(p.Branch, p.Worktree, p.BaseCommit, "", "", "")
	if err := snap.SeedIndex(filepath.Join(admin, "index")); err != nil {
		return nil, err
	}
	refs := rescue.Refs{Branch: p.Branch}
	u.add(func() {
		for _, r := range []string{refs.Rescue(), refs.Baseline(), refs.Agent()} {
			_ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: r, AnyOld: true})
		}
	})
	base, err := snap.Take(ctx, rescue.ReasonStart)
	if err != nil {
		return nil, err
	}
	rec := &record.Record{
		Branch:        p.Branch,
		RepoID:        e.Repo.ID,
		CommonDir:     e.Repo.CommonDir,
		Base:          p.Base,
		BaseTip:       p.BaseCommit,
		Start:         p.BaseCommit,
		Baseline:      base.ID,
		Worktree:      p.Worktree,
		PrivateGitDir: p.PrivateGitDir,
		Container:     p.Container.Name,
		Image:         p.Container.Image,
		Agent:         adapter.Name(),
		Prompt:        task.Prompt,
		Verify:        p.Verify,
		Setup:         p.Setup,
		Carried:       p.Carry,
		Created:       time.Now().UTC(),
	}
	if p.Base != "" {
		rec.BaseRef = "refs/heads/" + p.Base
	}
	if err := record.Save(l.Record(p.Branch), rec); err != nil {
		return nil, err
	}
	name, email := e.identity(ctx)
	hooksDir, _, err := e.Repo.HooksDir(ctx)
	if err != nil {
		return nil, err
	}
	if err := agentrepo.Init(ctx, g, agentrepo.InitOptions{
		GitDir: p.PrivateGitDir, HostCommonDir: e.Repo.CommonDir, HooksDir: hooksDir, Branch: p.Branch,
		WorktreeIndex: filepath.Join(admin, "index"), UserName: name, UserEmail: email,
	}); err != nil {
		return nil, err
	}
	// From here on the host-side index of the worktree has no gitlinks
	// (the snapshot index and the agent's index were copied above).
	if err := worktree.StripGitlinks(ctx, &gitcmd.Runner{GitDir: admin}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(l.Gitfile(p.Branch), agentrepo.Gitfile(p.PrivateGitDir), 0o444); err != nil {
		return nil, fmt.Errorf("write gitfile: %w", err)
	}
	if err := os.MkdirAll(l.AgentHome(adapter.Name()), 0o700); err != nil {
		return nil, fmt.Errorf("create agent home: %w", err)
	}
	// Re-plan now that every path exists, so what is mounted is what was
	// resolved a moment ago, with the baseline stamped.
	spec := *p.Container
	spec.Labels = cloneMap(spec.Labels)
	spec.Mounts = append([]container.Mount(nil), spec.Mounts...)
	spec.Labels[container.LabelBaseline] = base.ID
	for i, m := range spec.Mounts {
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return nil, err
		}
		spec.Mounts[i].Source = src
	}
	id, err := d.Create(ctx, &spec)
	if err != nil {
		return nil, err
	}
	u.add(func() { _ = d.Remove(cctx, id) })
	sb = &Sandbox{Record: rec, env: e}
	if p.Setup != "" {
		if err := e.runSetup(ctx, d, sb, o.IO); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// runSetup starts the container once to run the setup command (the
// container's first start does only that), then takes the baseline again so
// what setup wrote is not counted as the agent's work.
func (e *Env) runSetup(ctx context.Context, d *container.Docker, sb *Sandbox, io IO) error {
	e.UI.Infof("running setup in %s", sb.Display())
	waitC := d.WaitExit(ctx, sb.Container, "next-exit")
	wait, err := d.Attach(ctx, sb.Container, container.Streams{Stdout: io.Stderr, Stderr: io.Stderr})
	if err != nil {
		return err
	}
	if err := d.Start(ctx, sb.Container); err != nil {
		return err
	}
	_ = wait()
	res := <-waitC
	if res.Err != nil {
		return fmt.Errorf("setup: %w", res.Err)
	}
	if res.Code != 0 {
		return usererr.New("setup failed with exit code %d; the sandbox was not created", res.Code).
			Hint("fix the setup command (in %s or your config) and start again", config.RepoFile)
	}
	snap := sb.Snapshotter()
	taken, err := snap.Take(ctx, rescue.ReasonSetup)
	if err != nil {
		return err
	}
	if taken.New {
		return sb.Update(func(r *record.Record) error { r.Baseline = taken.ID; return nil })
	}
	return nil
}

// carry copies the uncommitted work of the current checkout (staged,
// unstaged, untracked and not ignored) into the new worktree, keeping what
// was staged staged. The checkout itself is not touched: its state is read
// through a copy of its index.
func (e *Env) carry(ctx context.Context, newWorktree, newAdmin string) error {
	tmp, err := os.CreateTemp("", "git-sandbox-carry-*.index")
	if err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if b, err := os.ReadFile(filepath.Join(e.Repo.GitDir, "index")); err == nil {
		if err := os.WriteFile(tmp.Name(), b, 0o600); err != nil {
			return fmt.Errorf("--carry: %w", err)
		}
	} else {
		os.Remove(tmp.Name())
	}
	cur := &gitcmd.Runner{GitDir: e.Repo.GitDir, WorkTree: e.Repo.WorkTree, IndexFile: tmp.Name()}
	staged, err := cur.Output(ctx, "write-tree")
	if err != nil {
		return usererr.Wrap(err, "--carry: the checkout's index cannot be written as a tree: %v", err).
			Hint("resolve any merge conflicts in your checkout first")
	}
	if _, err := cur.Run(ctx, nil, "add", "--all", "--", "."); err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	full, err := cur.Output(ctx, "write-tree")
	if err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	nw := &gitcmd.Runner{GitDir: newAdmin, WorkTree: newWorktree}
	if err := nw.ReadTree(ctx, gitcmd.ReadTreeRequest{From: "HEAD", Tree: full, Update: true}); err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	if err := nw.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: staged}); err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	if _, err := nw.Run(ctx, nil, "update-index", "-q", "--refresh"); err != nil && gitcmd.ExitCode(err) != 1 {
		return fmt.Errorf("--carry: %w", err)
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

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstPositive(vals ...float64) float64 {
	for _, v := range vals {
		if v > 0 {
			return v
		}
	}
	return 0
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
