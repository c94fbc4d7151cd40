// Package container is the engine-neutral side of running sandboxes: the
// Engine interface every backend implements (container/docker,
// container/kube, container/fake), the abilities an engine declares and
// its Images, and the vocabulary they all speak: the run spec (mounts and
// their refusals, hardening, labels, network modes, ports) built as data
// first, State, Streams, WaitCondition, Event, volumes and networks, and
// the errors ErrNotFound, ErrConflict and ErrNotSupported. Run is the one
// way a container is run to completion. Nothing here imports an engine's
// SDK: the conformance suite every backend passes is container/enginetest.
package container

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"sort"
	"strings"
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
// the engine, as data. --dry-run prints it; Create executes it.
type Spec struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// ToolImage says Image is git sandbox's own (the egress proxy's): an
	// engine that puts a configured image in place of a sandbox's leaves
	// it as it is.
	ToolImage bool `json:"tool_image,omitempty"`
	// Entrypoint, when set, replaces the image's entrypoint: Argv are then
	// its arguments. Without it an image's entrypoint runs first, with
	// Argv as its arguments.
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Argv       []string          `json:"argv"`
	Env        []string          `json:"env"`
	User       string            `json:"user"`
	WorkDir    string            `json:"workdir"`
	Hostname   string            `json:"hostname"`
	Labels     map[string]string `json:"labels"`
	Mounts     []Mount           `json:"mounts"`
	Ports      []Port            `json:"ports,omitempty"`
	Limits     Limits            `json:"limits"`
	Network    NetworkMode       `json:"network"`
	// NetworkName is the engine network the container joins: for
	// NetworkAllowlist the sandbox's internal network (required); for
	// NetworkOpen, the sandbox's own open network, or the egress proxy's
	// way out; without one an open container joins the engine's default
	// bridge (older sandboxes). Never set with NetworkNone.
	NetworkName string `json:"network_name,omitempty"`
	// NetworkAlias is another name the container answers to on
	// NetworkName, for the others there: the agent's, where its proxy
	// forwards published ports (allowlist mode).
	NetworkAlias string `json:"network_alias,omitempty"`
	// Hosts are names the container finds in its own hosts file, with no
	// name server asked: the agent's egress proxy, at the address its
	// network keeps for it (Abilities.FixedAddresses).
	Hosts []Host `json:"hosts,omitempty"`
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
	// NoHealthcheck turns off a healthcheck the image names: the engine
	// would otherwise run the image's command in the container every
	// interval.
	NoHealthcheck bool `json:"no_healthcheck,omitempty"`
}

// Host is a name and the address it stands for in a container's hosts
// file.
type Host struct {
	Name string     `json:"name"`
	Addr netip.Addr `json:"addr"`
}

// Hardening is applied to every sandbox container; no option removes it.
var (
	hardenCapDrop  = []string{"ALL"}
	hardenSecurity = []string{"no-new-privileges"}
)

// Clone returns a copy of s that shares nothing with it.
func (s *Spec) Clone() *Spec {
	c := *s
	if s.Entrypoint != nil {
		c.Entrypoint = append([]string(nil), s.Entrypoint...)
	}
	c.Argv = append([]string(nil), s.Argv...)
	c.Env = append([]string(nil), s.Env...)
	c.Mounts = append([]Mount(nil), s.Mounts...)
	c.CapDrop = append([]string(nil), s.CapDrop...)
	c.Security = append([]string(nil), s.Security...)
	c.Hosts = append([]Host(nil), s.Hosts...)
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
	if s.NetworkAlias != "" && (s.NetworkName == "" || !dnsLabel.MatchString(s.NetworkAlias)) {
		return fmt.Errorf("network alias %q: a DNS label on the container's own network", s.NetworkAlias)
	}
	for _, h := range s.Hosts {
		if !h.Addr.IsValid() || !hostName.MatchString(h.Name) {
			return fmt.Errorf("host %q at %v: a lower-case host name and an address", h.Name, h.Addr)
		}
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

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// dnsLabel is one label of a host name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// hostName is a host name of dot-separated labels.
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

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
