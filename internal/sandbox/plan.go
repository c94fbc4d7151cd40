package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
	"github.com/git-sandbox/git-sandbox/internal/visible"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// PlanInput is everything a container spec is derived from.
type PlanInput struct {
	Name          string
	Image         string
	Branch        string
	RepoID        string
	Base          string
	Baseline      string
	Agent         string
	Prompt        string
	Verify        string
	Setup         string
	Argv          []string
	AgentEnv      []string
	UserEnv       []string // KEY=VALUE, already resolved
	Worktree      string
	Gitfile       string
	PrivateGitDir string
	// VisibleObjects and GivenObjects are the object stores the agent's
	// repository borrows from (internal/visible): what the user's branches
	// and tags reach, and what this sandbox was given beyond it.
	VisibleObjects string
	GivenObjects   string
	HostHooks      string
	AgentHome      string
	ExtraMounts    []config.Mount
	Network        container.NetworkMode
	// NetworkName is the sandbox's internal network (allowlist mode) or
	// its own open network (open mode).
	NetworkName string
	// ProxyEnv points the agent's tools at the egress proxy.
	ProxyEnv []string
	// SecretEnv gives each secret's placeholder in its variable; it wins
	// over every other source of the same name.
	SecretEnv []string
	// TrustDir, when set, is the host directory of the sandbox CA's
	// certificate and trust bundle (the sandbox has secrets).
	TrustDir  string
	Runtime   string
	Memory    string
	CPUs      float64
	Pids      int64
	TTY       bool
	OpenStdin bool
	UID, GID  int

	// ImageEnv is the image's own configuration's environment (a
	// devcontainer's containerEnv and remoteEnv), before the agent's and
	// the user's variables, which win.
	ImageEnv []string
	// Caches are container directories kept in the repository's cache
	// volumes.
	Caches []string
	// RepoCaches are the caches the repository names itself.
	RepoCaches []config.RepoCache
	// Ports are published on the host's loopback interface.
	Ports []container.Port
}

// BuildSpec turns the input into a container spec, refusing any mount
// source that resolves to /, the home directory or an ancestor of it.
func BuildSpec(in PlanInput) (*container.Spec, error) {
	mem, err := config.MemoryBytes(in.Memory)
	if err != nil {
		return nil, fmt.Errorf("memory limit %q: %w", in.Memory, err)
	}
	spec := &container.Spec{
		Name:        in.Name,
		Image:       in.Image,
		User:        strconv.Itoa(in.UID) + ":" + strconv.Itoa(in.GID),
		WorkDir:     container.Workspace,
		Hostname:    container.Hostname(in.Branch),
		Network:     in.Network,
		NetworkName: in.NetworkName,
		Runtime:     in.Runtime,
		TTY:         in.TTY,
		OpenStdin:   in.OpenStdin,
		StdinOnce:   in.OpenStdin && !in.TTY,
		Limits:      container.Limits{MemoryBytes: mem, CPUs: in.CPUs, Pids: in.Pids},
	}
	spec.Harden()
	spec.Argv = in.Argv
	if in.Setup != "" {
		spec.Argv = append([]string{"/bin/sh", "-c", setupScript, "git-sandbox-setup"}, in.Argv...)
	}
	spec.Env = []string{
		"HOME=" + container.Home,
		"USER=sandbox",
		"LOGNAME=sandbox",
		"GIT_SANDBOX=1",
		"GIT_SANDBOX_BRANCH=" + in.Branch,
	}
	if in.TTY {
		term := os.Getenv("TERM")
		if term == "" || strings.ContainsAny(term, "\x00\n") {
			term = "xterm-256color"
		}
		spec.Env = append(spec.Env, "TERM="+term)
	}
	if in.Setup != "" {
		spec.Env = append(spec.Env, "GIT_SANDBOX_SETUP="+in.Setup)
	}
	if in.Prompt != "" {
		// The task, for agents (and shell commands) that read it.
		spec.Env = append(spec.Env, "GIT_SANDBOX_PROMPT="+in.Prompt)
	}
	spec.Env = append(spec.Env, in.ProxyEnv...)
	spec.Env = append(spec.Env, in.ImageEnv...)
	spec.Env = append(spec.Env, in.AgentEnv...)
	spec.Env = append(spec.Env, in.UserEnv...)
	if in.TrustDir != "" {
		tenv := trustEnv()
		spec.Env = append(withoutNames(spec.Env, envNames(tenv)), tenv...)
	}
	if len(in.SecretEnv) > 0 {
		spec.Env = append(withoutNames(spec.Env, envNames(in.SecretEnv)), in.SecretEnv...)
	}

	spec.Labels = map[string]string{
		container.LabelManaged:  "1",
		container.LabelRepo:     in.RepoID,
		container.LabelBranch:   in.Branch,
		container.LabelBase:     in.Base,
		container.LabelAgent:    in.Agent,
		container.LabelWorktree: in.Worktree,
		container.LabelRole:     container.RoleAgent,
		container.LabelVersion:  version.Version,
	}
	if in.Baseline != "" {
		spec.Labels[container.LabelBaseline] = in.Baseline
	}
	if mem > 0 {
		spec.Labels[container.LabelMemory] = strconv.FormatInt(mem, 10)
	}
	if in.Prompt != "" {
		spec.Labels[container.LabelPrompt] = in.Prompt
	}
	if in.Verify != "" {
		spec.Labels[container.LabelVerify] = in.Verify
	}
	if len(in.Ports) > 0 {
		spec.Ports = append([]container.Port(nil), in.Ports...)
		spec.Labels[container.LabelPorts] = container.PortsLabel(in.Ports)
	}

	type m struct {
		src, dst string
		ro       bool
		why      string
		optional bool
		volume   bool
	}
	mounts := []m{
		{in.Worktree, container.Workspace, false, "the sandbox worktree", false, false},
		{in.Gitfile, container.Workspace + "/.git", true, "gitfile pointing at the agent's own repository; a mount point cannot be renamed or replaced", false, false},
		{in.PrivateGitDir, in.PrivateGitDir, false, "the agent's own repository (alternates to the two stores below)", false, false},
		{in.VisibleObjects, in.VisibleObjects, true, "the objects your branches and tags reach (not your object store), read-only", false, false},
		{in.GivenObjects, in.GivenObjects, true, "the objects given to this sandbox beyond those (work carried in, updates), read-only", false, false},
		{in.HostHooks, in.HostHooks, true, "the user's hooks, read-only, used as the agent repository's hooks path", true, false},
		{in.AgentHome, container.Home, false, "the sandbox's own home, new for this sandbox (only the agent's login is copied in)", false, false},
	}
	if in.TrustDir != "" {
		mounts = append(mounts,
			m{in.TrustDir, trustDirIn, true, "the sandbox CA's certificate (never its key) and a bundle of this machine's roots plus it", false, false},
			m{filepath.Join(in.TrustDir, trustBundleFile), egress.SystemBundlePath, true, "the same bundle over the system's", false, false})
	}
	for _, em := range in.ExtraMounts {
		mounts = append(mounts, m{em.Source, em.Target, em.ReadOnly, "from your config", false, false})
	}
	for _, target := range in.Caches {
		mounts = append(mounts, m{container.CacheVolume(in.RepoID, target), path.Clean(target), false, "a cache from your config, shared by this repository's sandboxes", false, true})
	}
	for _, c := range in.RepoCaches {
		t := path.Clean(c.Target)
		for _, other := range mounts {
			// Inside the agent's home is where caches usually are;
			// anything else overlapping another mount is refused.
			if other.dst == container.Home && t != container.Home {
				continue
			}
			if overlaps(t, other.dst) {
				return nil, usererr.New("%s: repo_cache %q: target %s overlaps %s (%s)", config.RepoFile, termsafe.String(c.Name), termsafe.String(t), other.dst, other.why).
					Hint("give the cache a directory of its own in %s", config.RepoFile)
			}
		}
		mounts = append(mounts, m{container.RepoCacheVolume(in.RepoID, c.Name), t, false, "a cache the repository names (" + c.Name + "), shared by its sandboxes", false, true})
	}
	for _, mm := range mounts {
		if mm.volume {
			spec.Mounts = append(spec.Mounts, container.Mount{Source: mm.src, Target: mm.dst, Volume: true, Why: mm.why})
			continue
		}
		if mm.optional {
			if _, err := os.Stat(mm.src); err != nil {
				continue
			}
		}
		src, err := container.RefuseUnsafeHostPath(mm.why, mm.src)
		if err != nil {
			return nil, err
		}
		spec.Mounts = append(spec.Mounts, container.Mount{Source: src, Target: mm.dst, ReadOnly: mm.ro, Why: mm.why})
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return spec, nil
}

// overlaps reports whether one of two container paths is the other or
// inside it.
func overlaps(a, b string) bool {
	a, b = path.Clean(a), path.Clean(b)
	return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/")
}

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
	Egress *EgressPlan `json:"egress,omitempty"`
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

	// in is what Container was built from, for building it again once the
	// devcontainer image is known.
	in PlanInput
	// passed names the variables passed from the host, whose values
	// Redacted hides.
	passed []string
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
	setup := e.Config.Setup
	dc, err := e.loadDevcontainer(ctx, o, baseCommit)
	if err != nil {
		return nil, task, nil, err
	}
	if dc != nil {
		// Built at start, once the engine is reached; dry runs show where
		// it comes from.
		image = devImagePending + dc.Path
		if setup == "" {
			setup = dc.SetupCommand()
		}
	}
	network := e.Config.Network
	if o.Network != "" {
		if network, err = container.ParseNetworkMode(o.Network); err != nil {
			return nil, task, nil, usererr.New("--%v", err).
				Hint("host networking is never offered: it would give the agent the host's services")
		}
	}
	if network == container.NetworkOpen {
		e.UI.Warnf("network is open: the agent can reach any host and this machine's ports (other sandboxes stay out of reach)")
		e.UI.Hintf("the default, network = \"allowlist\", lets it reach only the hosts you allow")
	}
	if len(o.Allow) > 0 && network != container.NetworkAllowlist {
		e.UI.Warnf("--allow is ignored: the network is %s, not allowlist", network)
	}
	name := container.Name(e.Repo.ID, e.Repo.Name, o.Branch)
	secrets, shownSecrets, err := e.planSecrets(ctx, o, network == container.NetworkAllowlist)
	if err != nil {
		return nil, task, nil, err
	}
	var eg *EgressPlan
	if network == container.NetworkAllowlist {
		if eg, err = e.planEgress(name, o.Branch, image, firstNonEmpty(o.Runtime, e.Config.Runtime), adapter.Name(), o.Allow); err != nil {
			return nil, task, nil, err
		}
		eg.Secrets, eg.secrets = shownSecrets, secrets
	}
	ports, err := publishPorts(o, dc, network)
	if err != nil {
		return nil, task, nil, err
	}
	hooksDir, _, err := e.Repo.HooksDir(ctx)
	if err != nil {
		return nil, task, nil, err
	}
	tty := o.IO.StdinIsTerminal && !o.Detach || interactive && o.Detach
	openStdin := tty || (!o.Detach && o.IO.StdinIsPipe)
	verify := firstNonEmpty(o.Verify, e.Config.Verify)
	in := PlanInput{
		Name:           name,
		Image:          image,
		Branch:         o.Branch,
		RepoID:         e.Repo.ID,
		Base:           base,
		Agent:          adapter.Name(),
		Prompt:         o.Prompt,
		Verify:         verify,
		Setup:          setup,
		Argv:           argv,
		AgentEnv:       adapter.Env(),
		UserEnv:        env,
		Worktree:       wt,
		Gitfile:        l.Gitfile(o.Branch),
		PrivateGitDir:  l.PrivateGitDir(o.Branch),
		VisibleObjects: visible.Store{Dir: l.VisibleStore()}.Objects(),
		GivenObjects:   l.GivenObjects(o.Branch),
		HostHooks:      hooksDir,
		AgentHome:      l.Home(o.Branch),
		ExtraMounts:    e.Config.Mounts,
		Caches:         cacheTargets(e.Config.Caches),
		RepoCaches:     e.Config.RepoCaches,
		Ports:          ports,
		Network:        network,
		Runtime:        firstNonEmpty(o.Runtime, e.Config.Runtime),
		Memory:         firstNonEmpty(o.Memory, e.Config.Limits.Memory),
		CPUs:           firstPositive(o.CPUs, e.Config.Limits.CPUs),
		Pids:           int64(firstPositive(float64(o.Pids), float64(e.Config.Limits.Pids))),
		TTY:            tty,
		OpenStdin:      openStdin,
		UID:            os.Getuid(),
		GID:            os.Getgid(),
	}
	if eg != nil {
		in.NetworkName = eg.InternalNetwork
		in.ProxyEnv = proxyEnv(eg.ProxyURL)
		if len(secrets) > 0 {
			in.SecretEnv = secretEnv(secrets)
			in.TrustDir = l.TrustDir(o.Branch)
		}
	}
	openNet := ""
	if network == container.NetworkOpen {
		openNet = openNetworkName(name)
		in.NetworkName = openNet
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
		Network:       network,
		Egress:        eg,
		OpenNetwork:   openNet,
		Container:     spec,
		Devcontainer:  dc,
		in:            in,
		passed:        envNames(env),
	}, task, adapter, nil
}

// publishPorts reads --publish and adds the devcontainer's forwardPorts
// not published already; every port is on the host's loopback interface.
// Outside a dry run, a free host port is chosen for each that names none,
// so the mapping is fixed at creation (labels, record) and the same on
// every resume.
func publishPorts(o StartOptions, dc *devcontainer.Config, network container.NetworkMode) ([]container.Port, error) {
	var ports []container.Port
	seen := map[int]bool{}
	hostSeen := map[int]bool{}
	for _, s := range o.Publish {
		p, err := container.ParsePublish(s)
		if err != nil {
			return nil, usererr.New("--publish %v", err).
				Hint("--publish 3000 publishes port 3000 on a free port of 127.0.0.1; --publish 8080:3000 on 127.0.0.1:8080")
		}
		if seen[p.Port] {
			return nil, usererr.New("--publish: port %d is published twice", p.Port)
		}
		if p.HostPort > 0 && hostSeen[p.HostPort] {
			return nil, usererr.New("--publish: host port %d is used twice", p.HostPort)
		}
		seen[p.Port], hostSeen[p.HostPort] = true, true
		ports = append(ports, p)
	}
	if dc != nil {
		for _, n := range dc.Ports {
			if !seen[n] {
				seen[n] = true
				ports = append(ports, container.Port{HostIP: container.Loopback, Port: n})
			}
		}
	}
	// The engine publishes no port of a container on an internal network,
	// and allowlist mode puts the agent on one: only open mode can.
	if len(ports) > 0 && network != container.NetworkOpen {
		if len(o.Publish) == 0 {
			return nil, nil // forwardPorts only: nothing to reach from the host
		}
		return nil, usererr.New("--publish needs the open network: the sandbox's network is %s, where the engine publishes no port", network).
			Hint("start it with --network %s to publish ports (on 127.0.0.1 only); the agent can then reach any host", container.NetworkOpen)
	}
	if o.DryRun {
		return ports, nil
	}
	for i := range ports {
		if ports[i].HostPort > 0 {
			continue
		}
		for {
			n, err := container.FreeLoopbackPort()
			if err != nil {
				return nil, err
			}
			if !hostSeen[n] {
				hostSeen[n] = true
				ports[i].HostPort = n
				break
			}
		}
	}
	return ports, nil
}

// devImagePending is the image a plan names until its devcontainer image is
// built.
const devImagePending = "(to be built from) "

// loadDevcontainer returns the repository's devcontainer at the start
// commit when it gives the sandbox its image: no --image, no image in the
// user's or the repository's config, and a file that names an image or a
// build. What the file asks for and does not get is printed, one line each.
func (e *Env) loadDevcontainer(ctx context.Context, o StartOptions, commit string) (*devcontainer.Config, error) {
	if o.Image != "" || e.Config.Image != config.DefaultImage() {
		return nil, nil
	}
	dc, err := devcontainer.Load(ctx, devcontainer.Source{Git: e.Git(), Commit: commit})
	if err != nil || dc == nil {
		return nil, err
	}
	if !dc.HasBase() {
		e.UI.Infof("%s names no image and no build; using %s", dc.Path, termsafe.String(e.Config.Image))
		return nil, nil
	}
	for _, ig := range dc.Ignored {
		e.UI.Warnf("%s: %s", dc.Path, ig.String())
	}
	return dc, nil
}

// devImage builds the plan's devcontainer image (or finds the one built from
// the same inputs) and points the plan's container at it, with the file's
// environment. The agent CLIs are tried only for an agent that needs one.
func (e *Env) devImage(ctx context.Context, d Engine, p *Plan, adapter agent.Adapter, io IO) error {
	de, ok := d.(devcontainer.Engine)
	if !ok {
		return usererr.New("this container engine cannot build the image %s describes", p.Devcontainer.Path).
			Hint("pick an image with --image")
	}
	src := devcontainer.Source{Git: e.Git(), Commit: p.BaseCommit}
	plan, err := devcontainer.PlanImage(ctx, de, src, p.Devcontainer, devcontainer.ImageOptions{
		RepoName: e.Repo.Name, RepoID: e.Repo.ID, NoAgents: adapter.Package() == "",
	})
	if err != nil {
		return err
	}
	bo := devcontainer.BuildOptions{Out: io.Stderr}
	bo.TerminalFd, bo.IsTerminal = ui.TerminalFd(io.Stderr)
	img, err := devcontainer.EnsureImage(ctx, de, src, plan, bo)
	if err != nil {
		return err
	}
	if !img.Built {
		e.UI.Infof("image %s (from %s, unchanged)", img.Tag, p.Devcontainer.Path)
	}
	in := p.in
	in.Image = img.Tag
	in.ImageEnv = p.Devcontainer.Environ(img.Env)
	spec, err := BuildSpec(in)
	if err != nil {
		return err
	}
	p.in, p.Container = in, spec
	if p.Egress != nil && p.Egress.Proxy != nil {
		// The proxy runs from the sandbox's image too (it was planned
		// before the image had a name).
		p.Egress.Proxy.Image = img.Tag
	}
	return nil
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
