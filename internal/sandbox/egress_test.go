package sandbox

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/enginefake"
)

// allowlistEnv is a test env in allowlist mode whose proxy containers say
// they listen.
func allowlistEnv(t *testing.T) *testEnv {
	te := newTestEnv(t)
	te.env.Config.Network = container.NetworkAllowlist
	te.env.Config.Allow = []string{"api.example.com"}
	te.env.Config.RepoDeny = []string{"bad.example.com"}
	te.fake.Output = "git sandbox: " + proxyReadyText + " [::]:3128\n"
	return te
}

func (te *testEnv) role(branch, role string) []enginefake.Container {
	var out []enginefake.Container
	for _, c := range te.fake.Containers() {
		if c.Spec.Labels[container.LabelBranch] == branch && c.Spec.Labels[container.LabelRole] == role {
			out = append(out, c)
		}
	}
	return out
}

func TestStartAllowlistMakesNetworksAndProxy(t *testing.T) {
	te := allowlistEnv(t)
	sb := te.start("t1")
	ctx := context.Background()

	// One network of the sandbox's own, on a range numbered by us; the
	// proxies' way out is the engine's one shared, isolated network.
	nets, err := te.fake.ListNetworks(ctx, container.LabelRepo+"="+te.env.Repo.ID, container.LabelBranch+"=t1")
	if err != nil || len(nets) != 1 {
		t.Fatalf("networks = %+v, %v", nets, err)
	}
	shared, err := te.fake.ListNetworks(ctx, container.LabelRole+"="+container.RoleEgress)
	if err != nil || len(shared) != 1 {
		t.Fatalf("shared egress networks = %+v, %v", shared, err)
	}
	eg := sb.Egress
	if eg == nil {
		t.Fatal("no egress in the record")
	}
	in, out := nets[0], shared[0]
	if in.Name != eg.InternalNetwork || !in.Internal || out.Name != eg.EgressNetwork || out.Internal || in.ID == "" || out.ID == "" {
		t.Errorf("internal %+v egress %+v, record %+v", in, out, eg)
	}
	spec := te.fake.NetworkSpec(in.ID)
	if sub, err := netip.ParsePrefix(spec.Subnet); err != nil || !internalPool.Contains(sub.Addr()) || sub.Bits() != internalBits || !spec.HostUnreachable {
		t.Errorf("internal network spec %+v", spec)
	}
	if spec := te.fake.NetworkSpec(out.ID); spec.Internal || spec.Subnet != "" {
		t.Errorf("egress network spec %+v", spec)
	}
	if sb.Network() != "allowlist" || !slices.ContainsFunc(eg.Allow, func(r egress.Rule) bool { return r.Entry == "api.example.com" && r.Source == egress.FromUser }) ||
		len(eg.Remove) != 1 || eg.Remove[0].Source != egress.FromRepository {
		t.Errorf("record: network %q egress %+v", sb.Network(), eg)
	}

	proxies := te.role("t1", container.RoleProxy)
	if len(proxies) != 1 {
		t.Fatalf("proxies = %d", len(proxies))
	}
	p := proxies[0]
	if p.Name != eg.Proxy || p.Status != enginefake.StatusRunning {
		t.Errorf("proxy %s %s, record says %s", p.Name, p.Status, eg.Proxy)
	}
	if p.Spec.NetworkName != out.ID || !slices.Contains(p.Networks, in.ID) {
		t.Errorf("proxy joins %q and %v, want %s (%s, by id) and %s", p.Spec.NetworkName, p.Networks, out.ID, eg.EgressNetwork, in.ID)
	}
	if !p.Spec.ReadOnlyRoot || p.Spec.CapDrop[0] != "ALL" || p.Spec.Argv[1] != "__proxy" {
		t.Errorf("proxy spec = %+v", p.Spec)
	}
	for _, m := range p.Spec.Mounts {
		if m.Target == proxyBinary && !m.ReadOnly || m.Target == proxyConfigDir && !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Target)
		}
	}

	agent, _ := te.fake.Get(sb.Container)
	if agent.Spec.Network != container.NetworkAllowlist || agent.Spec.NetworkName != eg.InternalNetwork || len(agent.Networks) != 0 {
		t.Errorf("agent network %s %q %v", agent.Spec.Network, agent.Spec.NetworkName, agent.Networks)
	}
	url := "http://" + eg.Proxy + ":" + proxyPort
	for _, k := range []string{"HTTP_PROXY", "https_proxy", "ALL_PROXY"} {
		if !slices.Contains(agent.Spec.Env, k+"="+url) {
			t.Errorf("agent env lacks %s=%s: %v", k, url, agent.Spec.Env)
		}
	}

	// The proxy's configuration: owner-only, the record's policy.
	cfgPath := filepath.Join(te.env.Layout.ProxyDir("t1"), proxyConfigFile)
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("proxy config %v %v", fi, err)
	}
	cfg, err := egress.LoadConfig(cfgPath)
	if err != nil || len(cfg.Allow) != len(eg.Allow) || cfg.Log != proxyLogDir+"/"+proxyLogFile {
		t.Errorf("proxy config = %+v, %v", cfg, err)
	}
	// The proxy started before the agent (setup and the agent's first
	// request find it listening).
	var order []string
	for _, c := range te.fake.Calls() {
		if c.Method == "Start" {
			order = append(order, c.Target)
		}
	}
	if len(order) != 2 || order[0] != p.ID {
		t.Errorf("start order = %v, want the proxy %s first", order, p.ID)
	}
	// A second sandbox makes a network of its own and shares the egress.
	te.start("t2")
	if nets, _ := te.fake.ListNetworks(ctx, container.LabelBranch+"=t2"); len(nets) != 1 || nets[0].ID == in.ID {
		t.Errorf("second sandbox's networks = %+v", nets)
	}
	if shared, _ := te.fake.ListNetworks(ctx, container.LabelRole+"="+container.RoleEgress); len(shared) != 1 {
		t.Errorf("shared egress networks after a second start = %+v", shared)
	}
}

func TestStartAllowlistRollsBack(t *testing.T) {
	for _, step := range []string{"internal network", "proxy", "container"} {
		t.Run(step, func(t *testing.T) {
			te := allowlistEnv(t)
			te.env.failStep = func(s string) error {
				if s == step {
					return errors.New("injected")
				}
				return nil
			}
			if _, err := te.env.Start(context.Background(), detached("t1")); err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("start = %v", err)
			}
			te.assertNothingLeft("t1", false)
		})
	}
	t.Run("engine refuses the network", func(t *testing.T) {
		te := allowlistEnv(t)
		te.fake.Fail("CreateNetwork", errors.New("pool overlaps"))
		if _, err := te.env.Start(context.Background(), detached("t1")); err == nil || !strings.Contains(err.Error(), "pool overlaps") {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
	})
	t.Run("proxy exits", func(t *testing.T) {
		te := allowlistEnv(t)
		te.fake.Output = "exec format error\n"
		te.fake.OnStart = func(c enginefake.Container) (int, bool) {
			return 1, c.Spec.Labels[container.LabelRole] == container.RoleProxy
		}
		_, err := te.env.Start(context.Background(), detached("t1"))
		if err == nil || !strings.Contains(err.Error(), "the egress proxy did not start: exec format error") {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
	})
}

func TestAllowlistStopResumeRemove(t *testing.T) {
	te := allowlistEnv(t)
	sb := te.start("t1")
	ctx := context.Background()
	first := te.role("t1", container.RoleProxy)[0].ID

	if _, err := te.find("t1").Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if p := te.role("t1", container.RoleProxy); len(p) != 0 {
		t.Errorf("proxy after stop: %+v", p)
	}
	if nets, _ := te.fake.ListNetworks(ctx, container.LabelBranch+"=t1"); len(nets) != 1 {
		t.Errorf("networks after stop = %d, want the internal one kept for the agent's container", len(nets))
	}
	// The shared egress network pruned while stopped: resume makes it again.
	for _, n := range mustNets(t, te, container.LabelRole+"="+container.RoleEgress) {
		if err := te.fake.RemoveNetwork(ctx, n.ID); err != nil {
			t.Fatal(err)
		}
	}

	// A repository's config changed since: resume keeps the record's policy.
	te.env.Config.Allow = []string{"other.example.com"}
	if _, err := te.env.Start(ctx, detached("t1")); err != nil {
		t.Fatal(err)
	}
	p := te.role("t1", container.RoleProxy)
	if len(p) != 1 || p[0].ID == first || p[0].Status != enginefake.StatusRunning {
		t.Fatalf("proxy after resume: %+v", p)
	}
	cfg, err := egress.LoadConfig(filepath.Join(te.env.Layout.ProxyDir("t1"), proxyConfigFile))
	if err != nil || slices.ContainsFunc(cfg.Allow, func(r egress.Rule) bool { return r.Entry == "other.example.com" }) {
		t.Errorf("resume changed the policy: %+v %v", cfg, err)
	}

	// Resume of a sandbox whose networks are gone says how to recover.
	if _, err := te.find("t1").Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	nets, _ := te.fake.ListNetworks(ctx, container.LabelBranch+"=t1")
	for _, n := range nets {
		if n.Name == sb.Egress.InternalNetwork {
			if err := te.fake.RemoveNetwork(ctx, n.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := te.env.Start(ctx, detached("t1")); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("resume without its network = %v", err)
	}
	if p := te.role("t1", container.RoleProxy); len(p) != 0 {
		t.Errorf("proxy left by a failed resume: %+v", p)
	}

	if _, err := te.find("t1").Remove(ctx, RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	te.assertNothingLeft("t1", true)
}

func TestEgressPolicySources(t *testing.T) {
	te := newTestEnv(t)
	cfg := te.env.Config
	cfg.Allow = []string{"registry.example.com"}
	cfg.Deny = []string{"claude.ai"}
	cfg.RepoDeny = []string{"*.example.com"}
	p, err := EgressPolicy(cfg, "claude", []string{"extra.example.org:8443"})
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]egress.Source{}
	for _, e := range p.Allow {
		src[e.String()] = e.Source
	}
	want := map[string]egress.Source{
		"api.anthropic.com": egress.AdapterSource("claude"), "registry.example.com": egress.FromUser,
		"extra.example.org:8443": egress.FromFlag,
	}
	for k, v := range want {
		if src[k] != v {
			t.Errorf("%s from %q, want %q", k, src[k], v)
		}
	}
	if r, ok := p.Removed(egress.Entry{Host: "registry.example.com"}); !ok || r.Source != egress.FromRepository {
		t.Errorf("the repository's wildcard deny does not remove registry.example.com: %+v", r)
	}
	if _, err := EgressPolicy(cfg, "shell", []string{"https://x/"}); err == nil {
		t.Error("a bad --allow entry was accepted")
	}
	if v, err := VerifyPolicy(cfg); v != nil || err != nil {
		t.Errorf("verify policy without verify_allow = %+v, %v", v, err)
	}
}

func TestVerifyNetwork(t *testing.T) {
	ctx := context.Background()
	t.Run("none without verify_allow", func(t *testing.T) {
		te := allowlistEnv(t)
		te.env.Config.Verify = "make test"
		te.start("t1")
		var verifySpec container.Spec
		te.fake.OnStart = func(c enginefake.Container) (int, bool) {
			if c.Spec.Labels[container.LabelRole] == container.RoleVerify {
				verifySpec = c.Spec
				return 0, true
			}
			return 0, false
		}
		sb, err := te.env.Find("t1")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := sb.VerifyNow(ctx, IO{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}}); err != nil {
			t.Fatal(err)
		}
		if verifySpec.Network != container.NetworkNone || verifySpec.NetworkName != "" {
			t.Errorf("verify network %s %q, want none", verifySpec.Network, verifySpec.NetworkName)
		}
		if got := len(te.role("t1", container.RoleProxy)); got != 1 {
			t.Errorf("proxies = %d, want only the sandbox's", got)
		}
	})
	t.Run("verify_allow gets its own proxy removed after the run", func(t *testing.T) {
		te := allowlistEnv(t)
		te.env.Config.Verify = "make test"
		te.env.Config.VerifyAllow = []string{"proxy.golang.org"}
		te.start("t1")
		sandboxProxy := te.role("t1", container.RoleProxy)[0].Spec.Name
		var verifySpec, verifyProxy container.Spec
		te.fake.OnStart = func(c enginefake.Container) (int, bool) {
			switch {
			case c.Spec.Labels[container.LabelRole] == container.RoleVerify:
				verifySpec = c.Spec
				return 0, true
			case c.Spec.Labels[container.LabelRole] == container.RoleProxy && c.Spec.Name != sandboxProxy:
				verifyProxy = c.Spec
			}
			return 0, false
		}
		sb, err := te.env.Find("t1")
		if err != nil {
			t.Fatal(err)
		}
		v, _, err := sb.VerifyNow(ctx, IO{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}})
		if err != nil || !v.OK {
			t.Fatalf("verify = %+v, %v", v, err)
		}
		if verifySpec.Network != container.NetworkAllowlist || !strings.HasSuffix(verifySpec.NetworkName, "-verify-net") {
			t.Errorf("verify network %s %q", verifySpec.Network, verifySpec.NetworkName)
		}
		if verifyProxy.Name == "" || !slices.ContainsFunc(verifySpec.Env, func(s string) bool { return s == "HTTPS_PROXY=http://"+verifyProxy.Name+":"+proxyPort }) {
			t.Errorf("verify env %v, proxy %q", verifySpec.Env, verifyProxy.Name)
		}
		cfg, err := egress.LoadConfig(filepath.Join(te.env.Layout.Dir("t1"), "verify-proxy", proxyConfigFile))
		if err != nil || len(cfg.Allow) != 1 || cfg.Allow[0].Entry != "proxy.golang.org" {
			t.Errorf("verify proxy config %+v %v", cfg, err)
		}
		if got := len(te.role("t1", container.RoleProxy)); got != 1 {
			t.Errorf("proxies after verify = %d, want only the sandbox's", got)
		}
		if nets, _ := te.fake.ListNetworks(ctx, container.LabelBranch+"=t1"); len(nets) != 1 {
			t.Errorf("networks after verify = %d, want the sandbox's one", len(nets))
		}
	})
}

// TestCLIDenialHints: a denied host in the agent CLI's domain gets a hint
// naming --allow; one a deny list removed says so; other hosts none.
func TestCLIDenialHints(t *testing.T) {
	te := allowlistEnv(t)
	te.fake.AddImage(te.env.Config.Image, "claude")
	o := detached("t1")
	o.Agent, o.Args, o.Prompt = "claude", nil, "fix it"
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sb := res.Sandbox
	lines := `{"time":"2026-12-01T00:00:00Z","kind":"connect","host":"mcp-proxy.anthropic.com","port":443,"decision":"denied","reason":"not in the allow list"}
{"time":"2026-12-01T00:00:01Z","kind":"connect","host":"api.anthropic.com","port":8443,"decision":"denied","reason":"removed by repository (api.anthropic.com)"}
{"time":"2026-12-01T00:00:02Z","kind":"connect","host":"example.org","port":443,"decision":"denied","reason":"not in the allow list"}
`
	if err := os.MkdirAll(filepath.Dir(sb.NetLog()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sb.NetLog(), []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	d := sb.CLIDenials()
	if len(d) != 2 {
		t.Fatalf("denials = %+v", d)
	}
	te.err.Reset()
	HintCLIDenials(te.env.UI, d)
	out := te.err.String()
	for _, want := range []string{
		"the claude CLI was denied mcp-proxy.anthropic.com:443",
		"--allow mcp-proxy.anthropic.com ",
		"the claude CLI was denied api.anthropic.com:8443",
		"a deny list removed it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("hints lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "example.org") {
		t.Errorf("a host the CLI does not need got a hint:\n%s", out)
	}
}

func mustNets(t *testing.T, te *testEnv, labels ...string) []container.Network {
	t.Helper()
	nets, err := te.fake.ListNetworks(context.Background(), labels...)
	if err != nil {
		t.Fatal(err)
	}
	return nets
}

// TestInternalNetworkTakesTheNextFreeRange: a range the engine has given
// out already is skipped, and every range is a /27 of the pool.
func TestInternalNetworkTakesTheNextFreeRange(t *testing.T) {
	te := allowlistEnv(t)
	ctx := context.Background()
	name := "git-sandbox-x-net"
	if _, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: "someone-elses", Subnet: internalSubnet(name, 0)}); err != nil {
		t.Fatal(err)
	}
	n, err := createInternalNetwork(ctx, te.fake, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := te.fake.NetworkSpec(n.ID).Subnet, internalSubnet(name, 1); got != want {
		t.Errorf("subnet = %s, want the next one %s", got, want)
	}
	seen := map[string]bool{}
	for i := 0; i < 1<<(internalBits-internalPool.Bits()); i++ {
		p := netip.MustParsePrefix(internalSubnet(name, i))
		if !internalPool.Contains(p.Addr()) || p.Bits() != internalBits || p.Masked() != p || seen[p.String()] {
			t.Fatalf("range %d = %s", i, p)
		}
		seen[p.String()] = true
	}
}

// TestRacingStartsShareTheOldestEgressNetwork: two egress networks of one
// name (two starts made one each at the same moment) — every proxy joins
// the oldest, by id, and the other goes.
func TestRacingStartsShareTheOldestEgressNetwork(t *testing.T) {
	te := allowlistEnv(t)
	ctx := context.Background()
	te.fake.DuplicateNetworkNames = true
	labels := map[string]string{container.LabelRole: container.RoleEgress}
	first, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: SharedEgressNetwork, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: SharedEgressNetwork, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	te.start("t1")
	p := te.role("t1", container.RoleProxy)
	if len(p) != 1 || p[0].Spec.NetworkName != first.ID {
		t.Fatalf("proxy joins %q, want the oldest network %s by id", p[0].Spec.NetworkName, first.ID)
	}
	if nets := mustNets(t, te, container.LabelRole+"="+container.RoleEgress); len(nets) != 1 || nets[0].ID != first.ID {
		t.Errorf("egress networks left = %+v, want only the oldest", nets)
	}
}
