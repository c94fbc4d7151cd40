package docker

import (
	"strconv"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/git-sandbox/git-sandbox/container"
)

// createArgs converts a spec into the SDK's create arguments: the one place
// that says what each of the spec's settings means to Docker.
func createArgs(s *container.Spec) (*dcontainer.Config, *dcontainer.HostConfig) {
	cfg := &dcontainer.Config{
		Image:        s.Image,
		Entrypoint:   s.Entrypoint,
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
	if s.NoHealthcheck {
		cfg.Healthcheck = &dcontainer.HealthConfig{Test: []string{"NONE"}}
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
	if s.Network == container.NetworkAllowlist {
		hc.DNS = []string{allowlistUpstreamDNS}
	}
	for _, h := range s.Hosts {
		hc.ExtraHosts = append(hc.ExtraHosts, h.Name+":"+h.Addr.String())
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

// allowlistUpstreamDNS is the name server an allowlist container's engine
// resolver (127.0.0.11, which still answers the proxy's name) asks about
// outside names: the container's own loopback, where nothing answers. An
// internal network has no route to any other, but an engine before 26.0
// (23.0.11, 25.0.4) asks a name server on the host's loopback from the
// host's namespace (CVE-2024-29018): a lookup of <secret>.attacker.example
// would reach the attacker's name server. A name server of the container's
// own is asked from the container's namespace.
const allowlistUpstreamDNS = "127.0.0.1"

// dockerNetworkMode is what a spec's network means to Docker.
func dockerNetworkMode(s *container.Spec) dcontainer.NetworkMode {
	switch {
	case s.Network == container.NetworkNone:
		return dcontainer.NetworkMode("none")
	case s.NetworkName != "":
		return dcontainer.NetworkMode(s.NetworkName)
	case s.Network == container.NetworkOpen:
		return dcontainer.NetworkMode("bridge")
	default:
		return dcontainer.NetworkMode("none")
	}
}

// networkingConfig gives the container its alias on its network; nil
// without one.
func networkingConfig(s *container.Spec) *network.NetworkingConfig {
	if s.NetworkAlias == "" {
		return nil
	}
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		s.NetworkName: {Aliases: []string{s.NetworkAlias}},
	}}
}

// dockerPorts converts ports into the SDK's exposed ports and bindings.
func dockerPorts(ports []container.Port) (nat.PortSet, nat.PortMap) {
	if len(ports) == 0 {
		return nil, nil
	}
	set, bindings := nat.PortSet{}, nat.PortMap{}
	for _, p := range ports {
		cp := nat.Port(strconv.Itoa(p.Port) + "/tcp")
		set[cp] = struct{}{}
		host := ""
		if p.HostPort > 0 {
			host = strconv.Itoa(p.HostPort)
		}
		bindings[cp] = append(bindings[cp], nat.PortBinding{HostIP: p.HostIP, HostPort: host})
	}
	return set, bindings
}
