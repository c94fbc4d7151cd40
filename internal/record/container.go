package record

import (
	"maps"
	"slices"

	"github.com/git-sandbox/git-sandbox/container"
)

// Container is the container a sandbox's start created, as the record
// keeps it: what a later command needs to make another like it (exec in a
// stopped sandbox, a follow-up task, verify's network, runtime and
// limits) and the ports it published. It is the record's own type, not
// container.Spec: the spec is the engines' vocabulary and may change with
// them, while records on users' disks must go on loading. Its JSON names
// are the ones container.Spec marshalled to when records first held it,
// so those records load unchanged (testdata/record-spec-2026-12.json).
// ContainerOf and ToSpec convert, and nothing else does.
type Container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// ToolImage, Entrypoint and NoHealthcheck are what the spec says of
	// git sandbox's own image (the proxy's); a sandbox's container sets
	// none of them, and records made before them load unchanged.
	ToolImage  bool              `json:"tool_image,omitempty"`
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
	// Network is the network mode ("none", "allowlist", "open").
	Network container.NetworkMode `json:"network"`
	// NetworkName is the engine network the container joined.
	NetworkName  string `json:"network_name,omitempty"`
	NetworkAlias string `json:"network_alias,omitempty"`
	// Hosts are the names the container's hosts file gives (its proxy's).
	Hosts         []container.Host `json:"hosts,omitempty"`
	ReadOnlyRoot  bool             `json:"read_only_root,omitempty"`
	Runtime       string           `json:"runtime,omitempty"`
	TTY           bool             `json:"tty"`
	OpenStdin     bool             `json:"open_stdin"`
	StdinOnce     bool             `json:"stdin_once"`
	CapDrop       []string         `json:"cap_drop"`
	Security      []string         `json:"security_opt"`
	Init          bool             `json:"init"`
	AutoRemove    bool             `json:"auto_remove,omitempty"`
	NoHealthcheck bool             `json:"no_healthcheck,omitempty"`
}

// Mount is one mount of the recorded container: a host path, or a volume
// of the engine's when Volume is set.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly"`
	Volume   bool   `json:"volume,omitempty"`
	NoCopy   bool   `json:"nocopy,omitempty"`
	Why      string `json:"why,omitempty"`
}

// Port is a container port published on the host's loopback interface.
type Port struct {
	HostIP   string `json:"host_ip"`
	HostPort int    `json:"host_port"`
	Port     int    `json:"port"`
}

// Limits are the recorded container's resource limits (0: none).
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes"`
	CPUs        float64 `json:"cpus"`
	Pids        int64   `json:"pids"`
}

// ContainerOf is what the record keeps of a created container's spec.
func ContainerOf(s *container.Spec) *Container {
	c := &Container{
		Name: s.Name, Image: s.Image, ToolImage: s.ToolImage, Entrypoint: slices.Clone(s.Entrypoint),
		Argv: slices.Clone(s.Argv), Env: slices.Clone(s.Env), User: s.User,
		WorkDir: s.WorkDir, Hostname: s.Hostname, Labels: maps.Clone(s.Labels),
		Limits:  Limits{MemoryBytes: s.Limits.MemoryBytes, CPUs: s.Limits.CPUs, Pids: s.Limits.Pids},
		Network: s.Network, NetworkName: s.NetworkName, NetworkAlias: s.NetworkAlias, ReadOnlyRoot: s.ReadOnlyRoot, Runtime: s.Runtime,
		TTY: s.TTY, OpenStdin: s.OpenStdin, StdinOnce: s.StdinOnce,
		CapDrop: slices.Clone(s.CapDrop), Security: slices.Clone(s.Security), Init: s.Init, AutoRemove: s.AutoRemove,
		NoHealthcheck: s.NoHealthcheck, Hosts: slices.Clone(s.Hosts),
	}
	for _, m := range s.Mounts {
		c.Mounts = append(c.Mounts, Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly, Volume: m.Volume, NoCopy: m.NoCopy, Why: m.Why})
	}
	c.Ports = PortsOf(s.Ports)
	return c
}

// PortsOf is what the record keeps of ports.
func PortsOf(ports []container.Port) []Port {
	var out []Port
	for _, p := range ports {
		out = append(out, Port{HostIP: p.HostIP, HostPort: p.HostPort, Port: p.Port})
	}
	return out
}

// ToPorts are recorded ports as the engines' type.
func ToPorts(ports []Port) []container.Port {
	var out []container.Port
	for _, p := range ports {
		out = append(out, container.Port{HostIP: p.HostIP, HostPort: p.HostPort, Port: p.Port})
	}
	return out
}

// ToSpec is the recorded container as a spec to create again: a new value
// that shares nothing with the record.
func (c *Container) ToSpec() *container.Spec {
	s := &container.Spec{
		Name: c.Name, Image: c.Image, ToolImage: c.ToolImage, Entrypoint: slices.Clone(c.Entrypoint),
		Argv: slices.Clone(c.Argv), Env: slices.Clone(c.Env), User: c.User,
		WorkDir: c.WorkDir, Hostname: c.Hostname, Labels: maps.Clone(c.Labels),
		Limits:  container.Limits{MemoryBytes: c.Limits.MemoryBytes, CPUs: c.Limits.CPUs, Pids: c.Limits.Pids},
		Network: c.Network, NetworkName: c.NetworkName, NetworkAlias: c.NetworkAlias, ReadOnlyRoot: c.ReadOnlyRoot, Runtime: c.Runtime,
		TTY: c.TTY, OpenStdin: c.OpenStdin, StdinOnce: c.StdinOnce,
		CapDrop: slices.Clone(c.CapDrop), Security: slices.Clone(c.Security), Init: c.Init, AutoRemove: c.AutoRemove,
		NoHealthcheck: c.NoHealthcheck, Hosts: slices.Clone(c.Hosts),
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	for _, m := range c.Mounts {
		s.Mounts = append(s.Mounts, container.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly, Volume: m.Volume, NoCopy: m.NoCopy, Why: m.Why})
	}
	s.Ports = c.ContainerPorts()
	return s
}

// ContainerPorts are the recorded ports as the engines' type.
func (c *Container) ContainerPorts() []container.Port { return ToPorts(c.Ports) }
