package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/git-sandbox/git-sandbox/internal/ui"
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
	if p.Engine, err = e.chooseEngine(ctx, o.Engine); err != nil {
		return nil, err
	}
	if p.Engine != "" {
		c, err := e.Config.EngineNamed(p.Engine)
		if err != nil {
			return nil, err
		}
		if c.CopyMode() {
			if err := planCopy(p, o.Carry); err != nil {
				return nil, err
			}
		}
	}
	if o.DryRun {
		if e.repoChoseImage(o, p.Container.Image) {
			e.UI.Warnf("%s chooses the image %s, which you have not allowed: start would ask (on a terminal) or refuse", config.RepoFile, termsafe.String(p.Container.Image))
		}
		return &StartResult{Plan: p.Redacted()}, nil
	}
	if err := e.allowRepoImage(o, p.Container.Image); err != nil {
		return nil, err
	}
	d, err := e.EngineNamed(ctx, p.Engine)
	if err != nil {
		return nil, err
	}
	if p.Devcontainer == nil {
		if err := e.shipImage(ctx, d, p.Engine, p.Container.Image); err != nil {
			return nil, err
		}
	}
	if p.Devcontainer != nil {
		if err := e.devImage(ctx, d, p, adapter, o.IO); err != nil {
			return nil, err
		}
		if p.Copy != nil {
			// The spec was built again with the image: volumes again.
			if err := planCopy(p, o.Carry); err != nil {
				return nil, err
			}
		}
	} else if err := e.ensureImage(ctx, d, p.Container.Image, o.IO); err != nil {
		return nil, err
	}
	if err := e.checkAgentCLI(ctx, d, p.Container.Image, adapter); err != nil {
		return nil, err
	}
	// Ctrl-C while the sandbox is being made cancels it, and what was made
	// is undone; once the agent runs, Ctrl-C belongs to the agent.
	cctx, stop := sigstack.NotifyContext(ctx, os.Interrupt, syscall.SIGHUP)
	if p.Copy != nil {
		sb, err = e.createCopy(cctx, d, p, o)
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

// ensureImage makes sure the image exists, building the default one when
// it is missing.
func (e *Env) ensureImage(ctx context.Context, d Engine, image string, io IO) error {
	ok, err := d.ImageExists(ctx, image)
	if err != nil || ok {
		return err
	}
	if image != config.DefaultImage() {
		return container.ErrImageMissing(image, false)
	}
	e.UI.Infof("image %s is missing; building it from %s", termsafe.String(image), termsafe.String(e.Config.BaseImage))
	bo := container.BuildOptions{Tag: image, Base: e.Config.BaseImage, Agents: agent.Packages(), Progress: io.Stderr}
	bo.TerminalFd, bo.IsTerminal = ui.TerminalFd(io.Stderr)
	return d.Build(ctx, bo)
}

// checkAgentCLI refuses, before anything is created, an agent whose CLI
// the image does not have: its container would only exit with "exec
// failed". The image says which agent CLIs it has (container.LabelAgents,
// or the list its build wrote); an image that says nothing — one git
// sandbox did not build — is given the benefit of the doubt, with a
// warning.
func (e *Env) checkAgentCLI(ctx context.Context, d Engine, image string, adapter agent.Adapter) error {
	if adapter.Package() == "" {
		return nil
	}
	have, err := d.ImageAgents(ctx, image)
	if err != nil {
		e.UI.Warnf("cannot tell whether image %s has the %s CLI: %v", termsafe.String(image), adapter.Name(), err)
		return nil
	}
	if slices.Contains(have, adapter.Name()) {
		return nil
	}
	said := "none"
	if len(have) > 0 {
		said = strings.Join(have, ", ")
	}
	ue := usererr.New("image %s has no %s CLI (agent CLIs it has: %s); nothing was created", termsafe.String(image), adapter.Name(), said)
	if image == config.DefaultImage() {
		ue = ue.Hint("rebuild it with network access so npm can install %s: git sandbox image build", adapter.Package())
	} else {
		ue = ue.Hint("build %s with network access so npm can install %s, or pick another image with --image", termsafe.String(image), adapter.Package())
	}
	return ue.Hint("or pick another agent with --agent (%s)", strings.Join(agentsIn(have), ", "))
}

// agentsIn lists the agents an image with the given CLIs can run.
func agentsIn(have []string) []string {
	var out []string
	for _, n := range agent.Names() {
		if a, _ := agent.Get(n); a.Package() == "" || slices.Contains(have, n) {
			out = append(out, n)
		}
	}
	return out
}

// step lets a test fail create right after the named step.
func (e *Env) step(name string) error {
	if e.failStep != nil {
		return e.failStep(name)
	}
	return nil
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
func (e *Env) create(ctx context.Context, d Engine, p *Plan, o StartOptions, task agent.Task, adapter agent.Adapter) (sb *Sandbox, err error) {
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
	if err := e.step("worktree"); err != nil {
		return nil, err
	}
	admin, err := worktree.AdminDir(e.Repo.CommonDir, p.Worktree)
	if err != nil {
		return nil, err
	}
	carried := ""
	if p.Carry {
		if carried, err = e.carry(ctx, p.Worktree, admin); err != nil {
			return nil, err
		}
		if err := e.step("carry"); err != nil {
			return nil, err
		}
	}
	snap := e.snapshotter("", p.Branch, p.Worktree, p.BaseCommit, "", "", "")
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
	if err := e.step("baseline"); err != nil {
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
		Engine:        p.Engine,
		Image:         p.Container.Image,
		Agent:         adapter.Name(),
		Prompt:        task.Prompt,
		Verify:        p.Verify,
		Setup:         p.Setup,
		Carried:       p.Carry,
		Created:       time.Now().UTC(),
	}
	if eg := p.Egress; eg != nil {
		rec.Egress = &record.Egress{
			Allow: eg.Allow, Remove: eg.Remove,
			InternalNetwork: eg.InternalNetwork, EgressNetwork: eg.EgressNetwork, Proxy: eg.Proxy.Name,
			Secrets: recordSecrets(eg.secrets),
		}
	}
	if p.Base != "" {
		rec.BaseRef = "refs/heads/" + p.Base
	}
	if err := record.Save(l.Record(p.Branch), rec); err != nil {
		return nil, err
	}
	if err := e.step("record"); err != nil {
		return nil, err
	}
	name, email := e.identity(ctx)
	hooksDir, _, err := e.Repo.HooksDir(ctx)
	if err != nil {
		return nil, err
	}
	agentRefs, err := e.prepareObjects(ctx, p.Branch, p.BaseCommit, carried)
	if err != nil {
		return nil, err
	}
	if err := agentrepo.Init(agentrepo.InitOptions{
		GitDir: p.PrivateGitDir, HostCommonDir: e.Repo.CommonDir, HooksDir: hooksDir, Branch: p.Branch,
		Alternates: e.agentStores(p.Branch), Refs: agentRefs,
		WorktreeIndex: filepath.Join(admin, "index"), UserName: name, UserEmail: email,
	}); err != nil {
		return nil, err
	}
	if err := e.step("private repository"); err != nil {
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
	if err := os.MkdirAll(l.Home(p.Branch), 0o700); err != nil {
		return nil, fmt.Errorf("create the sandbox's home: %w", err)
	}
	if len(adapter.LoginPaths()) > 0 {
		rec.LoginStore = e.loginStore(adapter.Name())
		if err := e.newLoginStore(adapter, rec.LoginStore); err != nil {
			return nil, err
		}
	}
	// Re-plan now that every path exists, so what is mounted is what was
	// resolved a moment ago, with the baseline stamped.
	spec := *p.Container
	spec.Labels = cloneMap(spec.Labels)
	spec.Mounts = append([]container.Mount(nil), spec.Mounts...)
	spec.Labels[container.LabelBaseline] = base.ID
	for i, m := range spec.Mounts {
		if m.Volume {
			continue
		}
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return nil, err
		}
		spec.Mounts[i].Source = src
	}
	if p.Egress != nil {
		if len(p.Egress.secrets) > 0 {
			if err := writeTrust(p.Egress.configDir, l.TrustDir(p.Branch), p.Egress.secrets); err != nil {
				return nil, err
			}
		}
		if err := e.createEgress(ctx, d, p.Branch, p.Egress, &u); err != nil {
			return nil, err
		}
	}
	if p.OpenNetwork != "" {
		if err := e.createOpenNetwork(ctx, d, p.Branch, p.OpenNetwork, &u); err != nil {
			return nil, err
		}
	}
	if err := e.ensureCaches(ctx, d, &spec, l.Home(p.Branch)); err != nil {
		return nil, err
	}
	sb = &Sandbox{Record: rec, env: e}
	// With a setup, its result is kept as a warm image: made here when
	// no image of the same key exists, else setup is skipped.
	var warm *warmStart
	if p.Setup != "" {
		if warm, err = e.planWarm(ctx, d, &spec, base, p.Setup, adapter.Name()); err != nil {
			return nil, err
		}
	}
	switch {
	case warm != nil && warm.found:
		e.UI.Infof("setup skipped: image %s holds its result (made %s, same image, setup and setup_inputs)", warm.tag, warm.created.Local().Format("2006-01-02 15:04"))
		withoutSetup(&spec, warm.tag)
	case warm != nil:
		if err := e.setupWarm(ctx, d, &spec, warm, sb, o.IO); err != nil {
			return nil, err
		}
		// The baseline may have moved to setup's snapshot; the rest of the
		// record is this function's (sb.Update read it from disk).
		rec.Baseline, sb.Record = sb.Record.Baseline, rec
		withoutSetup(&spec, warm.tag)
	}
	id, err := d.Create(ctx, &spec)
	if err != nil {
		return nil, err
	}
	u.add(func() { _ = d.Remove(cctx, id) })
	rec.Spec = &spec
	if warm != nil {
		rec.WarmImage = warm.tag
	}
	if err := record.Save(l.Record(p.Branch), rec); err != nil {
		return nil, err
	}
	if err := e.step("container"); err != nil {
		return nil, err
	}
	switch {
	case p.Setup != "" && warm == nil:
		if err := e.runSetup(ctx, d, sb, o.IO, true); err != nil {
			return nil, err
		}
	case warm != nil && warm.found && warm.replay[1] != "":
		if err := e.replaySetup(ctx, sb, warm); err != nil {
			return nil, err
		}
	}
	// The login comes in after setup: the repository's setup never sees it.
	if err := sb.loadLogin(); err != nil {
		return nil, err
	}
	return sb, nil
}

// replaySetup writes into a warm-started sandbox's worktree what setup
// wrote into /workspace when it made the warm image (it started from the
// same files), and takes it as the baseline, as a setup run would have.
func (e *Env) replaySetup(ctx context.Context, sb *Sandbox, w *warmStart) error {
	snap := sb.Snapshotter()
	if err := snap.Checkout(ctx, w.replay[0], w.replay[1]); err != nil {
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

// repoChoseImage reports whether image is the repository's choice (its
// .sandbox.toml, not the user's config or --image) and the user has not
// allowed it.
func (e *Env) repoChoseImage(o StartOptions, image string) bool {
	return o.Image == "" && e.Config.RepoImage != "" && image == e.Config.RepoImage && !e.Config.ImageAllowed(image)
}

// allowRepoImage asks the user, on a terminal, whether the image the
// repository chose may run; without a terminal it refuses. Any local image
// can be named, one with secrets baked in too, and the agent (and whoever
// wrote the repository) would read them.
func (e *Env) allowRepoImage(o StartOptions, image string) error {
	if !e.repoChoseImage(o, image) {
		return nil
	}
	refused := func(msg string) error {
		return usererr.New("%s: %s chooses the image %s", msg, config.RepoFile, termsafe.String(image)).
			Hint("a repository may name any local image, one with secrets in it too; if you trust this one, add it to allowed_images in %s", config.UserPath()).
			Hint("or choose it yourself with --image %s, or another with --image", termsafe.String(image)).
			WithCode(usererr.ExitRefused)
	}
	if !o.IO.StdinIsTerminal || o.IO.Stdin == nil {
		return refused("not started")
	}
	fmt.Fprintf(o.IO.Stderr, "%s asks for the image %s, which is not in your allowed_images.\nRun the agent in it? [y/N] ", config.RepoFile, termsafe.String(image))
	answer, _ := readLine(o.IO.Stdin)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return refused("not started, as you answered")
}

// readLine reads up to a newline one byte at a time, so nothing after it
// is taken from a terminal the agent reads next.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() < 256 {
		n, err := r.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			b.WriteByte(buf[0])
		}
		if err != nil {
			return b.String(), err
		}
	}
	return b.String(), nil
}
