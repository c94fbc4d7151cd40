// Package agentspec turns what a start planned into the agent container's
// spec: its hardening and limits, its environment (the agent's, the
// user's, the proxy's, the secrets' placeholders, in that order of
// precedence), its labels, its mounts (the workspace's, the trust files,
// the user's, the caches), and the wrappers in front of the agent's
// command (setup on the first start, the wait for a terminal's size).
package agentspec

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// Input is everything the agent container's spec is derived from.
type Input struct {
	// Subdir is the directory of /workspace the agent starts in
	// (slash-separated, clean, "" for /workspace itself).
	Subdir   string
	Name     string
	Image    string
	Branch   string
	RepoID   string
	Base     string
	Baseline string
	Agent    string
	Prompt   string
	Verify   string
	Setup    string
	Argv     []string
	AgentEnv []string
	UserEnv  []string // KEY=VALUE, already resolved
	// Worktree is the worktree's path on this machine ("" in copy mode),
	// for the container's label.
	Worktree string
	// Workspace are the mounts of the sandbox's files and git
	// (workspace.BindMounts or VolumeMounts); host paths among them are
	// checked as every other.
	Workspace   []container.Mount
	ExtraMounts []config.Mount
	Network     container.NetworkMode
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
	// Ports are published on the host's loopback interface: by the
	// engine in open mode, by the egress proxy in allowlist mode.
	Ports []container.Port
}

// Build turns the input into a container spec, refusing any mount
// source that resolves to /, the home directory or an ancestor of it.
func Build(in Input) (*container.Spec, error) {
	mem, err := config.MemoryBytes(in.Memory)
	if err != nil {
		return nil, fmt.Errorf("memory limit %q: %w", in.Memory, err)
	}
	spec := &container.Spec{
		Name:        in.Name,
		Image:       in.Image,
		User:        strconv.Itoa(in.UID) + ":" + strconv.Itoa(in.GID),
		WorkDir:     path.Join(container.Workspace, in.Subdir),
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
	spec.Argv = WithTerminalWait(in.Argv, in.TTY)
	if in.Setup != "" {
		spec.Argv = append([]string{"/bin/sh", "-c", toolchain.SetupScript, "git-sandbox-setup"}, spec.Argv...)
	}
	spec.Env = environment(in)
	spec.Labels = labels(in, mem)
	if len(in.Ports) > 0 {
		spec.Labels[container.LabelPorts] = container.PortsLabel(in.Ports)
		if in.Network == container.NetworkAllowlist {
			// The engine publishes nothing of an internal network: the
			// proxy does, and reaches the agent by this name
			// (network.EgressPlan.SetForward).
			spec.NetworkAlias = network.AgentAlias
		} else {
			spec.Ports = append([]container.Port(nil), in.Ports...)
		}
	}
	if spec.Mounts, err = mounts(in); err != nil {
		return nil, err
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return spec, nil
}

// environment is the agent's: the sandbox's own variables, the proxy's,
// the image's, the agent's, the user's, then the trust bundle's and the
// secrets' placeholders, which win over every other source of the name.
func environment(in Input) []string {
	env := []string{
		"HOME=" + container.Home,
		"USER=sandbox",
		"LOGNAME=sandbox",
		"GIT_SANDBOX=1",
		"GIT_SANDBOX_BRANCH=" + in.Branch,
	}
	if in.TTY {
		env = append(env, terminalEnv())
	}
	if in.Setup != "" {
		env = append(env, "GIT_SANDBOX_SETUP="+in.Setup)
	}
	if in.Prompt != "" {
		// The task, for agents (and shell commands) that read it.
		env = append(env, "GIT_SANDBOX_PROMPT="+in.Prompt)
	}
	env = append(env, in.ProxyEnv...)
	env = append(env, in.ImageEnv...)
	env = append(env, in.AgentEnv...)
	env = append(env, in.UserEnv...)
	if in.TrustDir != "" {
		env = network.Override(env, network.TrustEnv())
	}
	if len(in.SecretEnv) > 0 {
		env = network.Override(env, in.SecretEnv)
	}
	return env
}

// terminalEnv is TERM for a container with a terminal: the user's, or a
// common one.
func terminalEnv() string {
	term := os.Getenv("TERM")
	if term == "" || strings.ContainsAny(term, "\x00\n") {
		term = "xterm-256color"
	}
	return "TERM=" + term
}

// labels stamp the container with what ps and the tool read first.
func labels(in Input, mem int64) map[string]string {
	l := map[string]string{
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
		l[container.LabelBaseline] = in.Baseline
	}
	if mem > 0 {
		l[container.LabelMemory] = strconv.FormatInt(mem, 10)
	}
	if in.Prompt != "" {
		l[container.LabelPrompt] = in.Prompt
	}
	if in.Verify != "" {
		l[container.LabelVerify] = in.Verify
	}
	return l
}

// mounts are the workspace's, the trust files, the user's and the
// caches'; a host source is checked, and a repository's cache may not
// overlap another mount (inside the agent's home it may).
func mounts(in Input) ([]container.Mount, error) {
	var out []container.Mount
	out = append(out, in.Workspace...)
	if in.TrustDir != "" {
		out = append(out, network.TrustMounts(in.TrustDir)...)
	}
	for _, em := range in.ExtraMounts {
		out = append(out, container.Mount{Source: em.Source, Target: em.Target, ReadOnly: em.ReadOnly, Why: "from your config"})
	}
	for _, target := range in.Caches {
		out = append(out, container.Mount{Source: container.CacheVolume(in.RepoID, target), Target: path.Clean(target), Volume: true, Why: "a cache from your config, shared by this repository's sandboxes"})
	}
	for _, c := range in.RepoCaches {
		t := path.Clean(c.Target)
		for _, other := range out {
			if other.Target == container.Home && t != container.Home {
				continue
			}
			if overlaps(t, other.Target) {
				return nil, usererr.New("%s: repo_cache %q: target %s overlaps %s (%s)", config.RepoFile, termsafe.String(c.Name), termsafe.String(t), other.Target, other.Why).
					Hint("give the cache a directory of its own in %s", config.RepoFile)
			}
		}
		out = append(out, container.Mount{Source: container.RepoCacheVolume(in.RepoID, c.Name), Target: t, Volume: true, Why: "a cache the repository names (" + c.Name + "), shared by its sandboxes"})
	}
	for i, m := range out {
		if m.Volume {
			continue
		}
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return nil, err
		}
		out[i] = container.Mount{Source: src, Target: m.Target, ReadOnly: m.ReadOnly, Why: m.Why}
	}
	return out, nil
}

// overlaps reports whether one of two container paths is the other or
// inside it.
func overlaps(a, b string) bool {
	a, b = path.Clean(a), path.Clean(b)
	return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/")
}

// terminalWait starts the agent once its terminal has a size (1 s at
// most). A container's terminal has none until a resize reaches it, which
// the engine takes only once the container runs, and an agent that reads
// its size at once (a full-screen CLI) would lay itself out for 0 x 0. An
// image without stty starts the agent at once.
const terminalWait = `n=0; while [ "$(stty size 2>/dev/null)" = "0 0" ] && [ $n -lt 100 ]; do sleep 0.01; n=$((n+1)); done; exec "$@"`

// WithTerminalWait puts terminalWait in front of an agent's argv when its
// container has a terminal.
func WithTerminalWait(argv []string, tty bool) []string {
	if !tty {
		return argv
	}
	return append([]string{"/bin/sh", "-c", terminalWait, "git-sandbox-terminal"}, argv...)
}

// AgentArgv is the agent's own command in a container's argv, without the
// setup (or warm home) and terminal wrappers.
func AgentArgv(argv []string) []string {
	if len(argv) >= 4 && argv[0] == "/bin/sh" && argv[1] == "-c" && (argv[2] == toolchain.SetupScript || argv[2] == toolchain.SetupThenRun || argv[2] == toolchain.HomeLayerScript) {
		argv = argv[4:]
	}
	if len(argv) >= 4 && argv[0] == "/bin/sh" && argv[1] == "-c" && argv[2] == terminalWait {
		argv = argv[4:]
	}
	return argv
}
