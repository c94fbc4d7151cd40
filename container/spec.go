// Package container owns everything git sandbox does with the Docker Engine,
// through its Go SDK: the run spec (mounts, hardening, labels, network
// mode) built as data first, then image builds, create, start, attach,
// logs, exec, wait, stop and remove, container events, volumes and
// networks. It also defines the engine-neutral vocabulary every backend
// speaks (Spec, State, Streams, WaitCondition, Event, ErrNotFound,
// ErrConflict), so callers depend on an interface of their own
// (sandbox.Engine) and never on Docker types. The API version is
// negotiated, so Engine API 1.41 (Docker 20.10) and current engines both
// work.
package container

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// Label keys stamped on every sandbox container. Docker is where ps looks
// first; a fact not stamped at creation cannot be recovered later.
const (
	LabelManaged  = "git-sandbox"
	LabelRepo     = "git-sandbox.repo"
	LabelBranch   = "git-sandbox.branch"
	LabelBase     = "git-sandbox.base"
	LabelBaseline = "git-sandbox.baseline"
	LabelAgent    = "git-sandbox.agent"
	LabelPrompt   = "git-sandbox.prompt"
	LabelVerify   = "git-sandbox.verify"
	LabelWorktree = "git-sandbox.worktree"
	LabelRole     = "git-sandbox.role"
	LabelVersion  = "git-sandbox.version"
	// LabelMemory is the agent container's memory limit in bytes, read
	// when engine "auto" places a new sandbox.
	LabelMemory = "git-sandbox.memory"
)

// Roles of containers, in LabelRole.
const (
	RoleAgent  = "agent"
	RoleVerify = "verify"
	// RoleExec is a command run by exec in a sandbox whose agent is not
	// running.
	RoleExec = "exec"
	// RoleProxy is a sandbox's egress proxy; its networks carry it too.
	RoleProxy = "proxy"
	// RoleHooks runs the user's pre-commit and commit-msg hooks at land.
	RoleHooks = "hooks"
	// RoleEgress is the network every proxy leaves by, shared by all
	// sandboxes of the engine.
	RoleEgress = "egress"
	// RoleHelper is a copy-mode sandbox's git helper on a remote engine:
	// it checks out the baseline and reads the files for snapshots.
	RoleHelper = "helper"
)

// Workspace is where the worktree appears inside the container.
const Workspace = "/workspace"

// Home is the agent's home inside the container.
const Home = "/home/sandbox"

// Mount is one bind mount, or a named volume of the engine's.
type Mount struct {
	// Source is a host path, or the volume's name when Volume is set.
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly"`
	Volume   bool   `json:"volume,omitempty"`
	// NoCopy keeps the engine from filling an empty volume with what the
	// image has at Target, and from giving the volume's root that
	// directory's owner and mode on every mount while it is empty.
	NoCopy bool `json:"nocopy,omitempty"`
	// Why says what the mount is for, for --dry-run readers.
	Why string `json:"why,omitempty"`
}

// Limits are resource limits.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes"`
	CPUs        float64 `json:"cpus"`
	Pids        int64   `json:"pids"`
}

// Spec is a fully resolved container: everything that will be asked of
// Docker, as data. --dry-run prints it; Create executes it.
type Spec struct {
	Name     string            `json:"name"`
	Image    string            `json:"image"`
	Argv     []string          `json:"argv"`
	Env      []string          `json:"env"`
	User     string            `json:"user"`
	WorkDir  string            `json:"workdir"`
	Hostname string            `json:"hostname"`
	Labels   map[string]string `json:"labels"`
	Mounts   []Mount           `json:"mounts"`
	Ports    []Port            `json:"ports,omitempty"`
	Limits   Limits            `json:"limits"`
	Network  NetworkMode       `json:"network"`
	// NetworkName is the engine network the container joins: for
	// NetworkAllowlist the sandbox's internal network (required); for
	// NetworkOpen, the sandbox's own open network, or the egress proxy's
	// way out; without one an open container joins the engine's default
	// bridge (older sandboxes). Never set with NetworkNone.
	NetworkName string `json:"network_name,omitempty"`
	// ReadOnlyRoot mounts the image's root file system read-only.
	ReadOnlyRoot bool     `json:"read_only_root,omitempty"`
	Runtime      string   `json:"runtime,omitempty"`
	TTY          bool     `json:"tty"`
	OpenStdin    bool     `json:"open_stdin"`
	StdinOnce    bool     `json:"stdin_once"`
	CapDrop      []string `json:"cap_drop"`
	Security     []string `json:"security_opt"`
	Init         bool     `json:"init"`
	AutoRemove   bool     `json:"auto_remove,omitempty"`
}

// Hardening is applied to every sandbox container; no option removes it.
var (
	hardenCapDrop  = []string{"ALL"}
	hardenSecurity = []string{"no-new-privileges"}
)

// Clone returns a copy of s that shares nothing with it.
func (s *Spec) Clone() *Spec {
	c := *s
	c.Argv = append([]string(nil), s.Argv...)
	c.Env = append([]string(nil), s.Env...)
	c.Mounts = append([]Mount(nil), s.Mounts...)
	c.CapDrop = append([]string(nil), s.CapDrop...)
	c.Security = append([]string(nil), s.Security...)
	c.Labels = make(map[string]string, len(s.Labels))
	for k, v := range s.Labels {
		c.Labels[k] = v
	}
	return &c
}

// Harden stamps the non-negotiable hardening onto s.
func (s *Spec) Harden() {
	s.CapDrop = append([]string(nil), hardenCapDrop...)
	s.Security = append([]string(nil), hardenSecurity...)
	s.Init = true
}

// Validate refuses a spec that would break the isolation guarantees.
func (s *Spec) Validate() error {
	if err := s.Network.Validate(); err != nil {
		return err
	}
	if s.Network == NetworkAllowlist && s.NetworkName == "" {
		return fmt.Errorf("network allowlist needs the sandbox's own network")
	}
	if s.Network == NetworkNone && s.NetworkName != "" {
		return fmt.Errorf("network none joins no network (%s given)", s.NetworkName)
	}
	if s.User == "" {
		return fmt.Errorf("container user missing: sandboxes run as the invoking user")
	}
	if len(s.CapDrop) != 1 || s.CapDrop[0] != "ALL" || len(s.Security) == 0 || s.Limits.Pids <= 0 {
		return fmt.Errorf("sandbox hardening missing (cap-drop ALL, no-new-privileges, pids limit)")
	}
	for _, p := range s.Ports {
		if p.HostIP != Loopback {
			return fmt.Errorf("port %d published on %q: sandbox ports are published on %s only", p.Port, p.HostIP, Loopback)
		}
	}
	seen := map[string]bool{}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.Target) {
			return fmt.Errorf("mount target %q is not absolute", m.Target)
		}
		t := path.Clean(m.Target)
		if seen[t] {
			return fmt.Errorf("two mounts on %s", t)
		}
		seen[t] = true
		if strings.Contains(m.Source, ",") || strings.Contains(m.Target, ",") {
			return fmt.Errorf("mount %s -> %s: commas are not supported in mount paths", m.Source, m.Target)
		}
		if m.Volume && !volumeName.MatchString(m.Source) {
			return fmt.Errorf("mount %s -> %s: not a volume name", m.Source, m.Target)
		}
	}
	return nil
}

// Docker converts the spec into the SDK's create arguments.
func (s *Spec) Docker() (*dcontainer.Config, *dcontainer.HostConfig) {
	cfg := &dcontainer.Config{
		Image:        s.Image,
		Cmd:          s.Argv,
		Env:          s.Env,
		User:         s.User,
		WorkingDir:   s.WorkDir,
		Hostname:     s.Hostname,
		Labels:       s.Labels,
		Tty:          s.TTY,
		OpenStdin:    s.OpenStdin,
		StdinOnce:    s.StdinOnce,
		AttachStdin:  s.OpenStdin,
		AttachStdout: true,
		AttachStderr: true,
	}
	pids := s.Limits.Pids
	init := s.Init
	hc := &dcontainer.HostConfig{
		NetworkMode:    dockerNetworkMode(s),
		ReadonlyRootfs: s.ReadOnlyRoot,
		CapDrop:        s.CapDrop,
		SecurityOpt:    s.Security,
		Runtime:        s.Runtime,
		Init:           &init,
		AutoRemove:     s.AutoRemove,
		IpcMode:        dcontainer.IPCModePrivate,
		LogConfig:      logConfig,
		Resources: dcontainer.Resources{
			Memory:    s.Limits.MemoryBytes,
			NanoCPUs:  int64(s.Limits.CPUs * 1e9),
			PidsLimit: &pids,
		},
	}
	if s.Limits.MemoryBytes > 0 {
		hc.Resources.MemorySwap = s.Limits.MemoryBytes
	}
	cfg.ExposedPorts, hc.PortBindings = dockerPorts(s.Ports)
	for _, m := range s.Mounts {
		typ := mount.TypeBind
		if m.Volume {
			typ = mount.TypeVolume
		}
		dm := mount.Mount{
			Type:     typ,
			Source:   m.Source,
			Target:   m.Target,
			ReadOnly: m.ReadOnly,
		}
		if m.Volume && m.NoCopy {
			dm.VolumeOptions = &mount.VolumeOptions{NoCopy: true}
		}
		hc.Mounts = append(hc.Mounts, dm)
	}
	return cfg, hc
}

// logConfig bounds what the engine keeps of a container's output: an
// agent printing in a loop all night would otherwise fill the engine's
// disk. json-file is the engine's usual default and `logs` reads its
// rotated files; three files of 32 MB keep the last 96 MB.
var logConfig = dcontainer.LogConfig{
	Type:   "json-file",
	Config: map[string]string{"max-size": "32m", "max-file": "3"},
}

// dockerNetworkMode is what a spec's network means to Docker.
func dockerNetworkMode(s *Spec) dcontainer.NetworkMode {
	switch {
	case s.Network == NetworkNone:
		return dcontainer.NetworkMode("none")
	case s.NetworkName != "":
		return dcontainer.NetworkMode(s.NetworkName)
	case s.Network == NetworkOpen:
		return dcontainer.NetworkMode("bridge")
	default:
		return dcontainer.NetworkMode("none")
	}
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// volumeName is what Docker accepts as a volume's name.
var volumeName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Name returns the container name of a sandbox: readable, valid for Docker,
// and unique per repository and branch.
func Name(repoID, repoName, branch string) string {
	sum := sha256.Sum256([]byte(repoID + "\x00" + branch))
	b := strings.Trim(nameUnsafe.ReplaceAllString(branch, "-"), "-.")
	r := strings.Trim(nameUnsafe.ReplaceAllString(repoName, "-"), "-.")
	if len(b) > 40 {
		b = b[:40]
	}
	if len(r) > 24 {
		r = r[:24]
	}
	return fmt.Sprintf("git-sandbox-%s-%s-%s", r, b, hex.EncodeToString(sum[:])[:8])
}

// Hostname returns a valid hostname for a branch.
func Hostname(branch string) string {
	h := strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9-]+`).ReplaceAllString(branch, "-"), "-")
	if len(h) > 63 {
		h = strings.Trim(h[:63], "-")
	}
	if h == "" {
		h = "sandbox"
	}
	return h
}

// SortedLabels returns label keys in order, for stable output.
func SortedLabels(l map[string]string) []string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
