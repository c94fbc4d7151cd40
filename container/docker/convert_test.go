package docker

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/git-sandbox/git-sandbox/container"
)

func validSpec() *container.Spec {
	s := &container.Spec{Name: "n", Image: "i", User: "1000:1000", Network: "none", Limits: container.Limits{Pids: 10, MemoryBytes: 1 << 30, CPUs: 1.5},
		Mounts: []container.Mount{{Source: "/a", Target: "/workspace"}, {Source: "/b", Target: "/workspace/.git", ReadOnly: true}}}
	s.Harden()
	return s
}

func TestCreateArgs(t *testing.T) {
	cfg, hc := createArgs(validSpec())
	if cfg.User != "1000:1000" || hc.NetworkMode != "none" || *hc.PidsLimit != 10 || hc.Memory != 1<<30 || hc.MemorySwap != 1<<30 || hc.NanoCPUs != 1_500_000_000 {
		t.Errorf("config %+v host %+v", cfg, hc)
	}
	if hc.Privileged || len(hc.CapAdd) != 0 || hc.CapDrop[0] != "ALL" || hc.SecurityOpt[0] != "no-new-privileges" || !*hc.Init {
		t.Errorf("hardening lost: %+v", hc)
	}
	if len(hc.Mounts) != 2 || !hc.Mounts[1].ReadOnly || string(hc.Mounts[1].Type) != "bind" {
		t.Errorf("mounts = %+v", hc.Mounts)
	}
}

// An entrypoint and a turned-off healthcheck reach the engine's
// configuration; a spec without them leaves both to the image (nil).
func TestCreateArgsEntrypointAndHealthcheck(t *testing.T) {
	cfg, _ := createArgs(validSpec())
	if cfg.Entrypoint != nil || cfg.Healthcheck != nil {
		t.Errorf("a plain spec sets entrypoint %q, healthcheck %+v", cfg.Entrypoint, cfg.Healthcheck)
	}
	s := validSpec()
	s.Entrypoint, s.Argv, s.NoHealthcheck = []string{"/git-sandbox"}, []string{"__proxy"}, true
	cfg, _ = createArgs(s)
	if strings.Join(cfg.Entrypoint, " ") != "/git-sandbox" || strings.Join(cfg.Cmd, " ") != "__proxy" ||
		cfg.Healthcheck == nil || strings.Join(cfg.Healthcheck.Test, " ") != "NONE" {
		t.Errorf("entrypoint %q cmd %q healthcheck %+v", cfg.Entrypoint, cfg.Cmd, cfg.Healthcheck)
	}
}

func TestCreateArgsPublishOnLoopback(t *testing.T) {
	s := &container.Spec{User: "1:1", Limits: container.Limits{Pids: 1}, Network: container.NetworkOpen,
		Ports: []container.Port{{HostIP: container.Loopback, HostPort: 41000, Port: 3000}, {HostIP: container.Loopback, Port: 5000}}}
	s.Harden()
	cfg, hc := createArgs(s)
	if _, ok := cfg.ExposedPorts["3000/tcp"]; !ok || len(cfg.ExposedPorts) != 2 {
		t.Errorf("exposed %v", cfg.ExposedPorts)
	}
	if b := hc.PortBindings["3000/tcp"]; len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "41000" {
		t.Errorf("bindings %v", hc.PortBindings)
	}
	if b := hc.PortBindings["5000/tcp"]; len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "" {
		t.Errorf("bindings %v", hc.PortBindings)
	}
}

func TestNetworkingConfigAlias(t *testing.T) {
	if networkingConfig(&container.Spec{NetworkName: "n1"}) != nil {
		t.Error("a networking config without an alias")
	}
	nc := networkingConfig(&container.Spec{NetworkName: "n1", NetworkAlias: "git-sandbox-agent"})
	if ep := nc.EndpointsConfig["n1"]; ep == nil || len(nc.EndpointsConfig) != 1 || len(ep.Aliases) != 1 || ep.Aliases[0] != "git-sandbox-agent" {
		t.Errorf("networking config %+v", nc)
	}
}

// A spec's Hosts are the container's extra hosts-file lines.
func TestCreateArgsHosts(t *testing.T) {
	_, hc := createArgs(&container.Spec{Hosts: []container.Host{{Name: "git-sandbox-proxy-0123", Addr: netip.MustParseAddr("10.213.0.30")}}})
	if len(hc.ExtraHosts) != 1 || hc.ExtraHosts[0] != "git-sandbox-proxy-0123:10.213.0.30" {
		t.Errorf("extra hosts %q", hc.ExtraHosts)
	}
}

func TestDockerNetworkMode(t *testing.T) {
	if dockerNetworkMode(&container.Spec{Network: container.NetworkOpen}) != "bridge" || dockerNetworkMode(&container.Spec{Network: container.NetworkNone}) != "none" ||
		dockerNetworkMode(&container.Spec{Network: container.NetworkAllowlist, NetworkName: "n1"}) != "n1" {
		t.Error("docker network modes")
	}
}

func TestExitCodeOf(t *testing.T) {
	for in, want := range map[string]int{"Exited (0) 2 seconds ago": 0, "Exited (137) About a minute ago": 137} {
		if got, ok := exitCodeOf(in); !ok || got != want {
			t.Errorf("exitCodeOf(%q) = %d, %v", in, got, ok)
		}
	}
	if _, ok := exitCodeOf("Up 3 minutes"); ok {
		t.Error("a running container has no exit code")
	}
}

func TestSDKErrorsMapToSentinels(t *testing.T) {
	nf := sdkErr(cerrdefs.ErrNotFound.WithMessage("no such container: x"))
	if !container.IsNotFound(nf) || container.IsConflict(nf) || !errors.Is(fmt.Errorf("inspect: %w", nf), container.ErrNotFound) {
		t.Errorf("not found: %v", nf)
	}
	if !strings.Contains(nf.Error(), "no such container: x") {
		t.Errorf("message lost: %q", nf.Error())
	}
	cf := sdkErr(cerrdefs.ErrConflict.WithMessage("is not running"))
	if !container.IsConflict(cf) || container.IsNotFound(cf) {
		t.Errorf("conflict: %v", cf)
	}
	other := errors.New("boom")
	if sdkErr(other) != other || sdkErr(nil) != nil {
		t.Error("other errors must pass unchanged")
	}
}

// TestDockerDNS: an allowlist container's engine resolver asks only the
// container's own loopback about outside names; the other modes keep the
// engine's name servers.
func TestDockerDNS(t *testing.T) {
	for _, tc := range []struct {
		mode container.NetworkMode
		net  string
		want string
	}{
		{container.NetworkAllowlist, "sb-net", "127.0.0.1"},
		{container.NetworkOpen, "sb-open", ""},
		{container.NetworkNone, "", ""},
	} {
		s := validSpec()
		s.Network, s.NetworkName = tc.mode, tc.net
		_, hc := createArgs(s)
		if got := strings.Join(hc.DNS, ","); got != tc.want {
			t.Errorf("%s: DNS %q, want %q", tc.mode, got, tc.want)
		}
	}
}
