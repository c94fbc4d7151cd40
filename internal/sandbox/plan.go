package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// setupMarker is created inside the container (outside /workspace) once the
// setup command succeeded, so a restarted container goes straight to the agent.
const setupMarker = "/var/tmp/.git-sandbox-setup-done"

// setupScript runs the setup command on the container's first start and
// exits; every later start executes the agent ("$@").
const setupScript = `if [ ! -e ` + setupMarker + ` ]; then
  /bin/sh -c "$GIT_SANDBOX_SETUP" || exit $?
  : > ` + setupMarker + `
  exit 0
fi
unset GIT_SANDBOX_SETUP
exec "$@"`

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
	Network       string
	Runtime       string
	Memory        string
	CPUs          float64
	Pids          int64
	TTY           bool
	OpenStdin     bool
	UID, GID      int
}

// BuildSpec turns the input into a container spec, refusing any mount
// source that resolves to /, the home directory or an ancestor of it.
func BuildSpec(in PlanInput) (*container.Spec, error) {
	mem, err := config.MemoryBytes(in.Memory)
	if err != nil {
		return nil, fmt.Errorf("memory limit %q: %w", in.Memory, err)
	}
	spec := &container.Spec{
		Name:      in.Name,
		Image:     in.Image,
		User:      strconv.Itoa(in.UID) + ":" + strconv.Itoa(in.GID),
		WorkDir:   container.Workspace,
		Hostname:  container.Hostname(in.Branch),
		Network:   in.Network,
		Runtime:   in.Runtime,
		TTY:       in.TTY,
		OpenStdin: in.OpenStdin,
		StdinOnce: in.OpenStdin && !in.TTY,
		Limits:    container.Limits{MemoryBytes: mem, CPUs: in.CPUs, Pids: in.Pids},
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
