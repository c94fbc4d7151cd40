package sandbox

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// allowlistEnv is a test env in allowlist mode whose proxy containers say
// they listen.
func allowlistEnv(t *testing.T) *testEnv {
	te := newTestEnv(t)
	te.env.Config.Network = container.NetworkAllowlist
	te.env.Config.Allow = []string{"api.example.com"}
	te.env.Config.RepoDeny = []string{"bad.example.com"}
	te.fake.Output = "git sandbox: " + network.ProxyReadyText + " [::]:3128\n"
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
	if sub, err := netip.ParsePrefix(spec.Subnet); err != nil || !network.InternalPool.Contains(sub.Addr()) || sub.Bits() != network.InternalBits || !spec.HostUnreachable {
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
	if !p.Spec.ReadOnlyRoot || p.Spec.CapDrop[0] != "ALL" || p.Spec.Argv[0] != "__proxy" {
		t.Errorf("proxy spec = %+v", p.Spec)
	}
	for _, m := range p.Spec.Mounts {
		if m.Target == network.ProxyConfigDir && !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Target)
		}
	}
	// Its image was made once, from the binary: a second start finds it.
	if n := te.fake.Count("LoadImage"); n != 1 {
		t.Errorf("the proxy's image was loaded %d times, want once", n)
	}

	agent, _ := te.fake.Get(sb.Container)
	if agent.Spec.Network != container.NetworkAllowlist || agent.Spec.NetworkName != eg.InternalNetwork || len(agent.Networks) != 0 {
		t.Errorf("agent network %s %q %v", agent.Spec.Network, agent.Spec.NetworkName, agent.Networks)
	}
	// The agent finds its proxy in its hosts file, at the address the
	// internal network keeps for it (out of the range its members are
	// numbered in), with no name server asked.
	members := netip.MustParsePrefix(spec.MemberRange)
	if a := p.Addrs[in.ID]; !a.IsValid() || a != eg.ProxyAddr || members.Contains(a) || !netip.MustParsePrefix(spec.Subnet).Contains(a) {
		t.Errorf("proxy at %v on the internal network, record says %v, members in %s", a, eg.ProxyAddr, members)
	}
	if want := []container.Host{{Name: eg.Proxy, Addr: eg.ProxyAddr}}; !slices.Equal(agent.Spec.Hosts, want) || !slices.Equal(sb.Spec.Hosts, want) {
		t.Errorf("agent's hosts %v, recorded %v, want %v", agent.Spec.Hosts, sb.Spec.Hosts, want)
	}
	// Its environment names the proxy by that address: no client looks
	// it up.
	url := "http://" + net.JoinHostPort(eg.ProxyAddr.String(), network.ProxyPort)
	for _, k := range []string{"HTTP_PROXY", "https_proxy", "ALL_PROXY"} {
		if !slices.Contains(agent.Spec.Env, k+"="+url) {
			t.Errorf("agent env lacks %s=%s: %v", k, url, agent.Spec.Env)
		}
	}

	// The proxy's configuration: owner-only, the record's policy.
	cfgPath := filepath.Join(te.env.Layout.ProxyDir("t1"), network.ProxyConfigFile)
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("proxy config %v %v", fi, err)
	}
	cfg, err := egress.LoadConfig(cfgPath)
	if err != nil || len(cfg.Allow) != len(eg.Allow) || cfg.Log != network.ProxyLogDir+"/"+network.ProxyLogFile {
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
	if n := te.fake.Count("LoadImage"); n != 1 {
		t.Errorf("the proxy's image was loaded %d times over two starts, want once", n)
	}
}

// The proxy never runs from the sandbox's image, whoever chose it: its
// image is git-sandbox's own, and its entrypoint, command, environment,
// user and healthcheck (none) are all the spec's, so nothing of an image
// runs or applies in it.
func TestProxyRunsItsOwnImage(t *testing.T) {
	te := allowlistEnv(t)
	te.fake.AddImage("repo-chose:this")
	o := detached("own")
	o.Image = "repo-chose:this"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	agent := te.role("own", container.RoleAgent)
	proxies := te.role("own", container.RoleProxy)
	if len(agent) != 1 || len(proxies) != 1 {
		t.Fatalf("%d agents, %d proxies", len(agent), len(proxies))
	}
	if agent[0].Spec.Image != "repo-chose:this" {
		t.Fatalf("the agent runs %s", agent[0].Spec.Image)
	}
	s := proxies[0].Spec
	wantEnv := []string{"HOME=/nonexistent"}
	if network.HostRoots() != nil {
		wantEnv = append(wantEnv, "SSL_CERT_FILE="+network.ProxyConfigDir+"/"+network.ProxyRoots, "SSL_CERT_DIR=/nonexistent")
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	switch {
	case s.Image != testProxyBinary.Tag() || !strings.HasPrefix(s.Image, proxyimage.Repository+":"):
		t.Errorf("the proxy runs %s, want its own image %s", s.Image, testProxyBinary.Tag())
	case !s.ToolImage:
		t.Error("the proxy's image is not marked as the tool's")
	case !slices.Equal(s.Entrypoint, []string{proxyimage.Path}):
		t.Errorf("entrypoint %q", s.Entrypoint)
	case !slices.Equal(s.Argv, []string{"__proxy", "--config", network.ProxyConfigDir + "/" + network.ProxyConfigFile}):
		t.Errorf("command %q", s.Argv)
	case !slices.Equal(s.Env, wantEnv):
		t.Errorf("environment %q, want exactly %q", s.Env, wantEnv)
	case !s.NoHealthcheck:
		t.Error("the image's healthcheck is not turned off")
	case s.User != user:
		t.Errorf("user %q, want %s", s.User, user)
	}
	for _, m := range s.Mounts {
		if m.Target != network.ProxyConfigDir && m.Target != network.ProxyLogDir {
			t.Errorf("the proxy mounts %s at %s", m.Source, m.Target)
		}
	}
	if ok, _ := te.fake.Images().Exists(context.Background(), testProxyBinary.Tag()); !ok {
		t.Error("the proxy's image was not made on the engine")
	}
}

// A git-sandbox that cannot run alone in the proxy's image (dynamically
// linked) is refused before anything is made, with a hint; the other
// network modes need no proxy and go on.
func TestDynamicBinaryRefusedBeforeAnything(t *testing.T) {
	te := allowlistEnv(t)
	refusal := proxyimage.CheckStatic(bytes.NewReader(dynamicELF()), "git-sandbox")
	if refusal == nil {
		t.Fatal("a dynamically linked binary passed the check")
	}
	te.env.ProxyBinary = ProxyBinaryFunc(func() (proxyimage.Binary, error) { return proxyimage.Binary{}, refusal })
	_, err := te.env.Start(context.Background(), detached("dyn"))
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(ue.Msg, "dynamically linked") || !strings.Contains(strings.Join(ue.Hints, "\n"), "CGO_ENABLED=0") {
		t.Fatalf("start = %v, want the refusal with a hint", err)
	}
	if n := len(te.fake.Calls()); n != 0 {
		t.Errorf("the engine was asked %d things: %v", n, te.fake.Methods())
	}
	te.assertNothingLeft("dyn", false)
	o := detached("none")
	o.Network = "none"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Errorf("--network none: %v", err)
	}
}

// dynamicELF is the smallest ELF header a loader would take for a
// dynamically linked program: one PT_INTERP program header.
func dynamicELF() []byte {
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	_ = binary.Write(&b, binary.LittleEndian, hdr)
	_ = binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_INTERP), Off: 120, Filesz: 28, Memsz: 28})
	b.WriteString("/lib64/ld-linux-x86-64.so.2\x00")
	return b.Bytes()
}

func TestStartAllowlistRollsBack(t *testing.T) {
	for _, step := range []string{"internal network", "proxy", "container"} {
		t.Run(step, func(t *testing.T) {
			te := allowlistEnv(t)
			te.env.Faults = failAt{step, errors.New("injected")}
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

// isolatingEngine is the fake engine with a say on whether its networks
// hold, as a Kubernetes engine has (RequireIsolation).
type isolatingEngine struct {
	*enginefake.Engine
	warning string
	err     error
	asked   []string
}

func (e *isolatingEngine) RequireIsolation(_ context.Context, image string) (string, error) {
	e.asked = append(e.asked, image)
	return e.warning, e.err
}

// An engine that says its networks do not hold refuses allowlist mode
// before anything is made; one that warns is heard, and the start goes
// on. The engine is asked with the proxy's image (its probe runs that).
func TestAllowlistAsksTheEngineWhetherItsNetworksHold(t *testing.T) {
	te := allowlistEnv(t)
	ie := &isolatingEngine{Engine: te.fake, err: usererr.New("the cluster does not enforce NetworkPolicy")}
	te.env.Engines = ConnectorFunc(func(context.Context, string) (Engine, error) { return ie, nil })
	if _, err := te.env.Start(context.Background(), detached("t1")); err == nil || !strings.Contains(err.Error(), "does not enforce NetworkPolicy") {
		t.Fatalf("start = %v", err)
	}
	te.assertNothingLeft("t1", false)
	if len(ie.asked) != 1 || ie.asked[0] != testProxyBinary.Tag() {
		t.Errorf("the engine was asked %q, want once with the proxy's image %s", ie.asked, testProxyBinary.Tag())
	}

	ie.err, ie.warning = nil, "the agent can connect past the egress proxy"
	te.start("t2")
	if !strings.Contains(te.err.String(), "the agent can connect past the egress proxy") {
		t.Errorf("the engine's warning was not shown:\n%s", te.err.String())
	}
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
	// At the address of the start, which the agent's hosts file names.
	if !sb.Egress.ProxyAddr.IsValid() || !slices.Contains(slices.Collect(maps.Values(p[0].Addrs)), sb.Egress.ProxyAddr) {
		t.Errorf("resumed proxy's addresses %v, want %v", p[0].Addrs, sb.Egress.ProxyAddr)
	}
	cfg, err := egress.LoadConfig(filepath.Join(te.env.Layout.ProxyDir("t1"), network.ProxyConfigFile))
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
	p, err := network.EgressPolicy(cfg, "claude", []string{"extra.example.org:8443"})
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
	if _, err := network.EgressPolicy(cfg, "shell", []string{"https://x/"}); err == nil {
		t.Error("a bad --allow entry was accepted")
	}
	if v, err := network.VerifyPolicy(cfg); v != nil || err != nil {
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
		if len(verifySpec.Hosts) != 1 || verifySpec.Hosts[0].Name != verifyProxy.Name || !verifySpec.Hosts[0].Addr.IsValid() {
			t.Fatalf("verify's hosts %v, want its proxy %q at its address", verifySpec.Hosts, verifyProxy.Name)
		}
		at := "http://" + net.JoinHostPort(verifySpec.Hosts[0].Addr.String(), network.ProxyPort)
		if !slices.Contains(verifySpec.Env, "HTTPS_PROXY="+at) {
			t.Errorf("verify env %v, want its proxy at %s", verifySpec.Env, at)
		}
		cfg, err := egress.LoadConfig(filepath.Join(te.env.Layout.Dir("t1"), "verify-proxy", network.ProxyConfigFile))
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
	network.HintCLIDenials(te.env.UI, d)
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

// TestRacingStartsShareTheOldestEgressNetwork: two egress networks of one
// name (two starts made one each at the same moment) — every proxy joins
// the oldest, by id, and the other goes.
func TestRacingStartsShareTheOldestEgressNetwork(t *testing.T) {
	te := allowlistEnv(t)
	ctx := context.Background()
	te.fake.DuplicateNetworkNames = true
	labels := map[string]string{container.LabelRole: container.RoleEgress}
	first, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: network.SharedEgressNetwork, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: network.SharedEgressNetwork, Labels: labels}); err != nil {
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

// A second egress network of the same name made while a start is under
// way (another start raced it) makes the engine refuse the proxy's start
// by that name: the start removes the newer network and tries again. A
// user's own network of that name (no label of ours) is never removed:
// the start gives up with what to do, leaving nothing behind.
func TestProxyStartOutlivesARacingNetwork(t *testing.T) {
	for _, ours := range []bool{true, false} {
		t.Run(map[bool]string{true: "ours", false: "the user's"}[ours], func(t *testing.T) {
			te := allowlistEnv(t)
			ctx := context.Background()
			te.fake.DuplicateNetworkNames = true
			labels := map[string]string{container.LabelRole: container.RoleEgress}
			if !ours {
				labels = nil
				te.env.Config.EgressNetwork = "users-egress"
				if _, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: "users-egress"}); err != nil {
					t.Fatal(err)
				}
			}
			name := te.env.Config.EgressNetwork
			if name == "" {
				name = network.SharedEgressNetwork
			}
			var once sync.Once
			te.fake.OnCall = func(c enginefake.Call) {
				if c.Method == "ConnectNetwork" {
					once.Do(func() {
						if _, err := te.fake.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: labels}); err != nil {
							t.Error(err)
						}
					})
				}
			}
			_, err := te.env.Start(ctx, detached("t1"))
			if !ours {
				ue, ok := usererr.As(err)
				if !ok || !strings.Contains(ue.Msg, "more than one network is called users-egress") || !strings.Contains(strings.Join(ue.Hints, "\n"), "docker network rm") {
					t.Fatalf("start with two networks of the user's name = %v, want the refusal with a hint", err)
				}
				te.assertNothingLeft("t1", false)
				return
			}
			if err != nil {
				t.Fatalf("start while a racing start made a second egress network: %v", err)
			}
			if nets := mustNets(t, te, container.LabelRole+"="+container.RoleEgress); len(nets) != 1 {
				t.Errorf("egress networks left = %+v, want one", nets)
			}
		})
	}
}
