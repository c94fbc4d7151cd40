package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/agentspec"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Plan is what start will do, printed by --dry-run (as Redacted returns
// it).
type Plan struct {
	Branch        string                `json:"branch"`
	Base          string                `json:"base"`
	BaseCommit    string                `json:"base_commit"`
	Worktree      string                `json:"worktree"`
	PrivateGitDir string                `json:"private_git_dir"`
	Record        string                `json:"record"`
	Carry         bool                  `json:"carry"`
	Setup         string                `json:"setup,omitempty"`
	Verify        string                `json:"verify,omitempty"`
	Detach        bool                  `json:"detach"`
	Interval      string                `json:"rescue_interval"`
	Network       container.NetworkMode `json:"network"`
	// Egress is allowlist mode's policy, networks and proxy.
	Egress *network.EgressPlan `json:"egress,omitempty"`
	// OpenNetwork is open mode's network of the sandbox's own: a bridge
	// with a route out and no traffic between its containers.
	OpenNetwork string          `json:"open_network,omitempty"`
	Container   *container.Spec `json:"container"`
	// Engine is the configured engine the sandbox goes to ("" for the one
	// the environment names); Copy is set when its files live in volumes
	// there (copy mode).
	Engine string       `json:"engine,omitempty"`
	Copy   *record.Copy `json:"copy,omitempty"`
	// Devcontainer is the repository's devcontainer.json when the image is
	// built from it (start builds it, or reuses the image of the same
	// inputs, before anything is created).
	Devcontainer *devcontainer.Config `json:"devcontainer,omitempty"`
	// RepoImages are the images the repository chooses for this sandbox
	// (its .sandbox.toml's image, or every image its devcontainer names),
	// which the user's image policy must allow before anything is built or
	// run (config.Loaded.RefusedImages).
	RepoImages []config.ImageChoice `json:"repo_images,omitempty"`

	// made is what start made before create, undone with create's steps
	// when a later step fails: the networks and proxy a devcontainer
	// build ran on (networksMade).
	made         steps.Undo
	networksMade bool
	// buildDenied are the hosts the proxy denied while the devcontainer
	// image was built, for the agent CLI check's hint.
	buildDenied []network.Denied

	// in is what Container was built from, for building it again once the
	// devcontainer image is known.
	in agentspec.Input
	// passed names the variables passed from the host, whose values
	// Redacted hides.
	passed []string
}

// planning is one start's plan being made: its parts share what the
// earlier ones found.
type planning struct {
	e       *Env
	o       StartOptions
	p       *Plan
	task    agent.Task
	adapter agent.Adapter
	argv    []string
	// interactive: the agent is asked to be; image and setup as planned so
	// far; env the passed variables.
	interactive  bool
	image, setup string
	env          []string
	secrets      []egress.Secret
}

// plan checks everything that can be checked before anything is created
// and computes the container spec.
func (e *Env) plan(ctx context.Context, o StartOptions) (*Plan, agent.Task, agent.Adapter, error) {
	pl := &planning{e: e, o: o, p: &Plan{Branch: o.Branch, Carry: o.Carry, Detach: o.Detach}}
	for _, part := range []func(context.Context) error{pl.checkNames, pl.pickAgent, pl.pickBase, pl.pickImage, pl.planNetwork, pl.buildSpec} {
		if err := part(ctx); err != nil {
			return nil, pl.task, nil, err
		}
	}
	return pl.p, pl.task, pl.adapter, nil
}

// checkNames refuses a branch that exists and is no sandbox's, and a worktree
// path that is taken.
func (pl *planning) checkNames(ctx context.Context) error {
	e, o := pl.e, pl.o
	if _, err := e.Git().RevParse(ctx, "refs/heads/"+o.Branch); !errors.Is(err, gitcmd.ErrNotExist) {
		if err != nil {
			return err
		}
		return usererr.New("branch %s already exists and is not a sandbox", termsafe.String(o.Branch)).
			Hint("choose another name, or rename the branch first (git branch -m %s NEW)", termsafe.String(o.Branch)).
			WithCode(usererr.ExitRefused)
	}
	l := e.Layout
	p := pl.p
	p.Worktree, p.PrivateGitDir, p.Record = l.Worktree(o.Branch), l.PrivateGitDir(o.Branch), l.Record(o.Branch)
	if _, err := os.Lstat(p.Worktree); err == nil {
		return usererr.New("worktree path %s is already taken", p.Worktree).
			Hint("a sandbox of that name was not cleaned up; move the directory away or remove it, then start again").
			WithCode(usererr.ExitRefused)
	}
	return nil
}

// pickAgent is the adapter and its command for the task.
func (pl *planning) pickAgent(context.Context) error {
	o := pl.o
	name := firstNonEmpty(o.Agent, pl.e.Config.Agent)
	adapter, err := agent.Get(name)
	if err != nil {
		return err
	}
	pl.adapter = adapter
	pl.task = agent.Task{Prompt: o.Prompt, Args: o.Args, Terminal: o.IO.StdinIsTerminal}
	if pl.argv, err = adapter.Argv(pl.task); err != nil {
		return asUserError(err)
	}
	pl.interactive = adapter.Interactive(pl.task)
	if pl.interactive && !o.IO.StdinIsTerminal && !o.Detach {
		return agent.NeedTerminal(adapter.Name())
	}
	return nil
}

// pickBase is where the work starts and lands, the carried work's check, and
// the variables passed from here.
func (pl *planning) pickBase(ctx context.Context) error {
	e, o, p := pl.e, pl.o, pl.p
	var err error
	if p.Base, p.BaseCommit, err = e.resolveBase(ctx, o.Base); err != nil {
		return err
	}
	if o.Carry {
		if err := e.Repo.CheckCarry(ctx, p.BaseCommit); err != nil {
			return err
		}
	}
	pl.env, err = resolveEnv(append(append([]string{}, e.Config.Env...), o.Env...))
	p.passed = envNames(pl.env)
	return err
}

// pickImage is the image and setup: asked for, configured, or the
// repository's devcontainer's (built at start, once the engine is
// reached; a dry run shows where it comes from), and the images the
// repository chose, for the user's policy.
func (pl *planning) pickImage(ctx context.Context) error {
	e, o, p := pl.e, pl.o, pl.p
	pl.image, pl.setup = firstNonEmpty(o.Image, e.Config.Image), e.Config.Setup
	dc, err := e.Toolchain().LoadDevcontainer(ctx, o.Image, p.BaseCommit)
	if err != nil {
		return err
	}
	p.Devcontainer = dc
	switch {
	case dc != nil:
		pl.image = devImagePending + dc.Path
		if pl.setup == "" {
			pl.setup = dc.SetupCommand()
		}
		p.RepoImages, err = dc.ImageChoices(ctx, devcontainer.Source{Git: e.Git(), Commit: p.BaseCommit})
	case o.Image == "" && pl.image == e.Config.RepoImage:
		p.RepoImages = e.Config.RepoImageChoice()
	}
	return err
}

// planNetwork is the network mode, and in allowlist mode the egress plan with
// the secrets.
func (pl *planning) planNetwork(ctx context.Context) error {
	e, o, p := pl.e, pl.o, pl.p
	p.Network = e.Config.Network
	if o.Network != "" {
		var err error
		if p.Network, err = container.ParseNetworkMode(o.Network); err != nil {
			return usererr.New("--%v", err).
				Hint("host networking is never offered: it would give the agent the host's services")
		}
	}
	if p.Network == container.NetworkOpen {
		e.UI.Warnf("network is open: the agent can reach any host and this machine's ports (other sandboxes stay out of reach)")
		e.UI.Hintf("the default, network = \"allowlist\", lets it reach only the hosts you allow")
	}
	if len(o.Allow) > 0 && p.Network != container.NetworkAllowlist {
		e.UI.Warnf("--allow is ignored: the network is %s, not allowlist", p.Network)
	}
	secrets, shown, err := e.network().PlanSecrets(ctx, network.SecretsInput{
		Env: o.Env, DryRun: o.DryRun, Agent: pl.adapter.Name(), IO: network.IO{Stdin: o.IO.Stdin, StdinIsTerminal: o.IO.StdinIsTerminal, Stderr: o.IO.Stderr},
	}, p.Network == container.NetworkAllowlist)
	if err == nil {
		err = network.CheckBudget(o.Budget, p.Network == container.NetworkAllowlist, len(secrets))
	}
	if err != nil || p.Network != container.NetworkAllowlist {
		return err
	}
	p.Egress, err = e.network().PlanEgress(network.EgressInput{
		Name: container.Name(e.Repo.ID, e.Repo.Name, o.Branch), Branch: o.Branch, Runtime: firstNonEmpty(o.Runtime, e.Config.Runtime),
		Agent: pl.adapter.Name(), Allow: o.Allow, DryRun: o.DryRun, Budget: o.Budget,
	})
	if err != nil {
		return err
	}
	p.Egress.SetSecrets(shown, secrets)
	pl.secrets = secrets
	return nil
}

// buildSpec is the agent's container.
func (pl *planning) buildSpec(ctx context.Context) error {
	in, err := pl.specInput(ctx)
	if err != nil {
		return err
	}
	pl.p.Container, err = agentspec.Build(in)
	pl.p.in = in
	return err
}

// specInput is what the agent's container is built from.
func (pl *planning) specInput(ctx context.Context) (agentspec.Input, error) {
	e, o, p := pl.e, pl.o, pl.p
	var forward []int
	if p.Devcontainer != nil {
		forward = p.Devcontainer.Ports
	}
	ports, err := agentspec.Ports(o.Publish, forward, p.Network, o.DryRun)
	if err != nil {
		return agentspec.Input{}, err
	}
	hooksDir, _, err := e.Repo.HooksDir(ctx)
	if err != nil {
		return agentspec.Input{}, err
	}
	tty := o.IO.StdinIsTerminal && !o.Detach || pl.interactive && o.Detach
	p.Setup, p.Verify = pl.setup, firstNonEmpty(o.Verify, e.Config.Verify)
	p.Interval = e.Config.Rescue.Interval.String()
	name := container.Name(e.Repo.ID, e.Repo.Name, o.Branch)
	in := agentspec.Input{
		Subdir: pl.subdir(ctx),
		Name:   name, Image: pl.image, Branch: o.Branch, RepoID: e.Repo.ID, Base: p.Base,
		Agent: pl.adapter.Name(), Prompt: o.Prompt, Verify: p.Verify, Setup: pl.setup,
		Argv: pl.argv, AgentEnv: pl.adapter.Env(), UserEnv: pl.env,
		Worktree: p.Worktree, Workspace: workspace.BindMounts(e.Layout, o.Branch, p.Worktree, hooksDir),
		ExtraMounts: e.Config.Mounts, Caches: toolchain.CacheTargets(e.Config.Caches), RepoCaches: e.Config.RepoCaches,
		Ports: ports, Network: p.Network,
		Runtime: firstNonEmpty(o.Runtime, e.Config.Runtime), Memory: firstNonEmpty(o.Memory, e.Config.Limits.Memory),
		CPUs: firstPositive(o.CPUs, e.Config.Limits.CPUs), Pids: int64(firstPositive(float64(o.Pids), float64(e.Config.Limits.Pids))),
		TTY: tty, OpenStdin: tty || (!o.Detach && o.IO.StdinIsPipe),
		UID: os.Getuid(), GID: os.Getgid(),
	}
	if eg := p.Egress; eg != nil {
		eg.SetForward(ports) // the proxy publishes them
		in.NetworkName, in.ProxyEnv = eg.InternalNetwork, network.ProxyEnv(eg.ProxyURL)
		if len(pl.secrets) > 0 {
			in.SecretEnv = network.SecretEnv(pl.secrets)
		}
		if eg.Terminates() {
			in.TrustDir = e.Layout.TrustDir(o.Branch)
		}
	}
	if p.Network == container.NetworkOpen {
		p.OpenNetwork = network.OpenNetworkName(name)
		in.NetworkName = p.OpenNetwork
	}
	return in, nil
}

// devImagePending is the image a plan names until its devcontainer image is
// built.
const devImagePending = "(to be built from) "

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
		if heads, herr := g.Lines(ctx, "for-each-ref", "--count=1", "--format=%(refname)", "refs/heads/"); herr == nil && len(heads) == 0 {
			return "", "", usererr.New("this repository has no commits yet, and a sandbox starts from one").
				Hint("commit your files first (git add -A && git commit -m 'initial commit'), then start again")
		}
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

// WorkspaceLines say where the sandbox's files and git will be.
func (p *Plan) WorkspaceLines() []workspace.Line {
	return workspace.Describe(&record.Record{Branch: p.Branch, Worktree: p.Worktree, PrivateGitDir: p.PrivateGitDir, Copy: p.Copy})
}

// asUserError is an adapter's refusal as the user sees it: its own hints
// kept when it has them.
func asUserError(err error) error {
	if _, ok := usererr.As(err); ok {
		return err
	}
	return usererr.Wrap(err, "%v", err)
}

// subdir is the directory of the worktree the agent starts in: where start
// ran, when the start commit has that directory, else the top (said, for a
// directory it does not have).
func (pl *planning) subdir(ctx context.Context) string {
	sub := path.Clean("/" + filepath.ToSlash(pl.o.Subdir))[1:]
	if sub == "" {
		return ""
	}
	if t, err := pl.e.Git().Output(ctx, "cat-file", "-t", "--end-of-options", pl.p.BaseCommit+":"+sub); err != nil || strings.TrimSpace(t) != "tree" {
		pl.e.UI.Infof("%s is not a directory of %s: the agent starts at the top of its worktree", termsafe.String(sub), shortID(pl.p.BaseCommit))
		return ""
	}
	return sub
}
