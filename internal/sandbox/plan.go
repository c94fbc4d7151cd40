package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
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
	HostObjects   string
	HostHooks     string
	AgentHome     string
	ExtraMounts   []config.Mount
	Network       container.NetworkMode
	// NetworkName is the sandbox's internal network (allowlist mode).
	NetworkName string
	// ProxyEnv points the agent's tools at the egress proxy.
	ProxyEnv  []string
	Runtime   string
	Memory    string
	CPUs      float64
	Pids      int64
	TTY       bool
	OpenStdin bool
	UID, GID  int
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
	spec.Env = append(spec.Env, in.AgentEnv...)
	spec.Env = append(spec.Env, in.UserEnv...)

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
	if in.Prompt != "" {
		spec.Labels[container.LabelPrompt] = in.Prompt
	}
	if in.Verify != "" {
		spec.Labels[container.LabelVerify] = in.Verify
	}

	type m struct {
		src, dst string
		ro       bool
		why      string
		optional bool
	}
	mounts := []m{
		{in.Worktree, container.Workspace, false, "the sandbox worktree", false},
		{in.Gitfile, container.Workspace + "/.git", true, "gitfile pointing at the agent's own repository; a mount point cannot be renamed or replaced", false},
		{in.PrivateGitDir, in.PrivateGitDir, false, "the agent's own repository (alternates to the host object store)", false},
		{in.HostObjects, in.HostObjects, true, "the host object store, read-only", false},
		{in.HostHooks, in.HostHooks, true, "the user's hooks, read-only, used as the agent repository's hooks path", true},
		{in.AgentHome, container.Home, false, "the agent's home: login and settings persist across sandboxes", false},
	}
	for _, alt := range alternates(in.HostObjects) {
		mounts = append(mounts, m{alt, alt, true, "an alternate object store of the host repository, read-only", true})
	}
	for _, em := range in.ExtraMounts {
		mounts = append(mounts, m{em.Source, em.Target, em.ReadOnly, "from your config", false})
	}
	for _, mm := range mounts {
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

// alternates lists the object stores the host's store borrows from (a
// clone made with --reference or --shared), which the agent's git needs too.
func alternates(objects string) []string {
	b, err := os.ReadFile(filepath.Join(objects, "info", "alternates"))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(objects, line)
		}
		out = append(out, filepath.Clean(line))
	}
	return out
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
	Egress    *EgressPlan     `json:"egress,omitempty"`
	Container *container.Spec `json:"container"`

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
	network := e.Config.Network
	if o.Network != "" {
		if network, err = container.ParseNetworkMode(o.Network); err != nil {
			return nil, task, nil, usererr.New("--%v", err).
				Hint("host networking is never offered: it would give the agent the host's services")
		}
	}
	if network == container.NetworkOpen {
		e.UI.Warnf("network is open: the agent can reach any host, this machine's ports and other containers")
		e.UI.Hintf("the default, network = \"allowlist\", lets it reach only the hosts you allow")
	}
	if len(o.Allow) > 0 && network != container.NetworkAllowlist {
		e.UI.Warnf("--allow is ignored: the network is %s, not allowlist", network)
	}
	name := container.Name(e.Repo.ID, e.Repo.Name, o.Branch)
	var eg *EgressPlan
	if network == container.NetworkAllowlist {
		if eg, err = e.planEgress(name, o.Branch, image, firstNonEmpty(o.Runtime, e.Config.Runtime), adapter.Name(), o.Allow); err != nil {
			return nil, task, nil, err
		}
	}
	hooksDir, _, err := e.Repo.HooksDir(ctx)
	if err != nil {
		return nil, task, nil, err
	}
	tty := o.IO.StdinIsTerminal && !o.Detach || interactive && o.Detach
	openStdin := tty || (!o.Detach && o.IO.StdinIsPipe)
	verify := firstNonEmpty(o.Verify, e.Config.Verify)
	in := PlanInput{
		Name:          name,
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
	if eg != nil {
		in.NetworkName = eg.InternalNetwork
		in.ProxyEnv = proxyEnv(eg.ProxyURL)
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
