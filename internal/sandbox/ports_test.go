package sandbox

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/portfwd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// In allowlist mode the agent's container publishes nothing (its network
// is internal): its proxy publishes the ports on 127.0.0.1 and forwards
// them to the agent by its alias. The mapping is fixed at creation and
// the same on every new proxy; rm takes it all.
func TestAllowlistProxyPublishesPorts(t *testing.T) {
	te := allowlistEnv(t)
	ctx := context.Background()
	o := detached("t1")
	o.Publish = []string{"3000", "18080:8080"}
	res, err := te.env.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	sb := res.Sandbox
	agent, _ := te.fake.Get(sb.Container)
	if len(agent.Spec.Ports) != 0 || agent.Spec.NetworkAlias != network.AgentAlias || agent.Spec.NetworkName != sb.Egress.InternalNetwork {
		t.Errorf("agent: ports %v alias %q on %q", agent.Spec.Ports, agent.Spec.NetworkAlias, agent.Spec.NetworkName)
	}
	ports := sb.Ports()
	if len(ports) != 2 || ports[0].Port != 3000 || ports[0].HostPort == 0 || ports[0].HostIP != container.Loopback ||
		ports[1] != (container.Port{HostIP: container.Loopback, HostPort: 18080, Port: 8080}) {
		t.Fatalf("record's ports %+v", ports)
	}
	if agent.Spec.Labels[container.LabelPorts] != container.PortsLabel(ports) {
		t.Errorf("label %q", agent.Spec.Labels[container.LabelPorts])
	}
	checkProxy := func(when string) {
		t.Helper()
		p := te.role("t1", container.RoleProxy)
		if len(p) != 1 {
			t.Fatalf("%s: proxies %+v", when, p)
		}
		want := []container.Port{
			{HostIP: container.Loopback, HostPort: ports[0].HostPort, Port: portfwd.ListenPort(0)},
			{HostIP: container.Loopback, HostPort: 18080, Port: portfwd.ListenPort(1)},
		}
		if !slices.Equal(p[0].Spec.Ports, want) || !slices.Contains(p[0].Spec.Argv, "--forward") {
			t.Errorf("%s: proxy publishes %+v with %q, want %+v and --forward", when, p[0].Spec.Ports, p[0].Spec.Argv, want)
		}
		fc, err := portfwd.Load(filepath.Join(te.env.Layout.ProxyDir("t1"), portfwd.File))
		if err != nil || fc.Target != network.AgentAlias || len(fc.Ports) != 2 ||
			fc.Ports[0] != (portfwd.Rule{Listen: portfwd.ListenPort(0), Port: 3000}) || fc.Ports[1] != (portfwd.Rule{Listen: portfwd.ListenPort(1), Port: 8080}) {
			t.Errorf("%s: forwarding %+v %v", when, fc, err)
		}
	}
	checkProxy("start")
	list, err := te.env.Statuses(ctx)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Ports, ports) {
		t.Errorf("ps: %+v %v", list, err)
	}

	// stop takes the proxy (and its ports); resume publishes the same.
	if _, err := te.find("t1").Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if p := te.role("t1", container.RoleProxy); len(p) != 0 {
		t.Errorf("proxy after stop: %+v", p)
	}
	if got := te.find("t1").Ports(); !slices.Equal(got, ports) {
		t.Errorf("ports of the stopped sandbox %+v, want %+v", got, ports)
	}
	if _, err := te.env.Start(ctx, detached("t1")); err != nil {
		t.Fatal(err)
	}
	checkProxy("resume")

	if _, err := te.find("t1").Remove(ctx, RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	te.assertNothingLeft("t1", true)
}

// A sandbox with no published port: no alias, no forwarding, the proxy's
// command as ever.
func TestAllowlistWithoutPortsForwardsNothing(t *testing.T) {
	te := allowlistEnv(t)
	sb := te.start("t1")
	agent, _ := te.fake.Get(sb.Container)
	p := te.role("t1", container.RoleProxy)
	if agent.Spec.NetworkAlias != "" || len(p) != 1 || len(p[0].Spec.Ports) != 0 || slices.Contains(p[0].Spec.Argv, "--forward") {
		t.Errorf("agent alias %q, proxy %+v", agent.Spec.NetworkAlias, p)
	}
}

// --network none has no network at all: --publish is refused with the
// mode that publishes, and nothing is made.
func TestPublishWithNoNetworkIsRefused(t *testing.T) {
	te := newTestEnv(t)
	o := detached("t1")
	o.Network, o.Publish = "none", []string{"3000"}
	_, err := te.env.Start(context.Background(), o)
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(ue.Msg, "--publish needs a network") || len(ue.Hints) != 1 || !strings.Contains(ue.Hints[0], "the default, allowlist, publishes") {
		t.Fatalf("start = %v", err)
	}
	te.assertNothingLeft("t1", false)
}
