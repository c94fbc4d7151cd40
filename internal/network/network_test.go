package network

import (
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// TestInternalNetworkTakesTheNextFreeRange: a range the engine has given
// out already is skipped, and every range is a /27 of the pool; its
// members are numbered in its lower half, and the proxy's address is its
// last, outside it.
func TestInternalNetworkTakesTheNextFreeRange(t *testing.T) {
	f := fake.New()
	ctx := context.Background()
	name := "git-sandbox-x-net"
	if _, err := f.CreateNetwork(ctx, container.NetworkSpec{Name: "someone-elses", Subnet: internalSubnet(name, 0).String()}); err != nil {
		t.Fatal(err)
	}
	n, proxy, err := createInternalNetwork(ctx, f, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := internalSubnet(name, 1)
	spec := f.NetworkSpec(n.ID)
	if spec.Subnet != want.String() {
		t.Errorf("subnet = %s, want the next one %s", spec.Subnet, want)
	}
	members := netip.MustParsePrefix(spec.MemberRange)
	if members.Bits() != InternalBits+1 || members.Addr() != want.Addr() || !want.Contains(proxy) || members.Contains(proxy) || proxy.Next() == want.Addr() {
		t.Errorf("members in %s, proxy at %v: want the lower half of %s and its last host address", members, proxy, want)
	}
	if b := proxy.As4(); b[3]&31 != 30 {
		t.Errorf("proxy at %v: want the range's .30", proxy)
	}
	seen := map[string]bool{}
	for i := 0; i < 1<<(InternalBits-InternalPool.Bits()); i++ {
		p := internalSubnet(name, i)
		if !InternalPool.Contains(p.Addr()) || p.Bits() != InternalBits || p.Masked() != p || seen[p.String()] {
			t.Fatalf("range %d = %s", i, p)
		}
		seen[p.String()] = true
	}
}

// TestCopyLoginRefusesWhatIsNotAFile: symlinks out of the home, FIFOs and
// huge files are refused without hanging, and nothing is written through
// a symlink in the destination either.
func TestCopyLoginRefusesWhatIsNotAFile(t *testing.T) {
	outside := t.TempDir()
	writeTestFile(t, filepath.Join(outside, "auth.json"), "host secret")
	src, dst := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "auth.json"), filepath.Join(src, "final")); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(src, "huge"))
	_ = f.Truncate(maxLoginFile + 1)
	f.Close()
	for _, p := range []string{"link/auth.json", "fifo", "final", "huge"} {
		if err := copyLogin(src, dst, []string{p}); err == nil {
			t.Errorf("%s was copied", p)
		}
		if _, err := os.Lstat(filepath.Join(dst, p)); err == nil {
			t.Errorf("%s exists in the destination", p)
		}
	}
	// A destination directory replaced by a symlink out of it.
	writeTestFile(t, filepath.Join(src, "d", "auth.json"), "login")
	if err := os.Symlink(outside, filepath.Join(dst, "d")); err != nil {
		t.Fatal(err)
	}
	if err := copyLogin(src, dst, []string{"d/auth.json"}); err == nil {
		t.Errorf("copied through a symlink out of the destination")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "auth.json")); string(b) != "host secret" {
		t.Errorf("a file outside was overwritten: %q", b)
	}
	// Missing is fine.
	if err := copyLogin(src, dst, []string{"missing"}); err != nil {
		t.Errorf("missing: %v", err)
	}
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The container that loads a copy-mode proxy's configuration runs the
// proxy's own image and git-sandbox's own loader, never the sandbox's
// image and its shell (which would run next to the configuration); what it
// reads is the configuration directory's files, which the loader writes
// back as they were.
func TestCopyModeProxyLoaderRunsTheProxyImage(t *testing.T) {
	e, bin := testEnv(t)
	eg, err := e.PlanEgress(EgressInput{Name: "git-sandbox-repo-c", Branch: "c", Agent: "shell", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ProxyOnVolumes(eg); err != nil {
		t.Fatal(err)
	}
	load := e.proxyLoadSpec("c", eg)
	if load.Image != bin.Tag() || !load.ToolImage || !load.NoHealthcheck || !load.ReadOnlyRoot ||
		strings.Join(load.Entrypoint, " ") != proxyBinary || load.Argv[0] != "__proxy-load" ||
		load.Network != container.NetworkNone || strings.Join(load.Env, " ") != "HOME=/nonexistent" || load.CapDrop[0] != "ALL" {
		t.Errorf("loader spec: %+v", load)
	}
	if err := load.Validate(); err != nil {
		t.Errorf("loader spec: %v", err)
	}
	src := t.TempDir()
	for name, data := range map[string]string{ProxyConfigFile: `{"listen":":3128"}`, ProxyRoots: "roots", ".tmp-proxy.json-123": "partial"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeConfigTar(pw, src)) }()
	dst, logDir := t.TempDir(), t.TempDir()
	if err := egress.LoadConfigFiles(pr, dst, logDir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadDir(dst)
	var names []string
	for _, g := range got {
		names = append(names, g.Name())
	}
	if strings.Join(names, " ") != ProxyConfigFile+" "+ProxyRoots {
		t.Errorf("loaded %q, want the configuration and the roots only", names)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, ProxyConfigFile)); string(b) != `{"listen":":3128"}` {
		t.Errorf("loaded configuration %q", b)
	}
}

// testEnv is a network Env of a repository that is not there (planning
// reads none of it), whose proxy image holds a stand-in binary.
func testEnv(t *testing.T) (*Env, proxyimage.Binary) {
	t.Helper()
	root := t.TempDir()
	file := filepath.Join(root, "proxy-bin")
	writeTestFile(t, file, "not really git-sandbox\n")
	bin := proxyimage.Binary{File: file, SHA256: strings.Repeat("ab", 32), Size: 23}
	e := &Env{
		Repo:        &worktree.Repo{ID: "repo-1", Name: "repo"},
		Layout:      worktree.Layout{Root: filepath.Join(root, "state"), RepoID: "repo-1"},
		Config:      &config.Loaded{Config: config.Defaults()},
		UI:          ui.Discard(),
		ProxyBinary: ProxyBinaryFunc(func() (proxyimage.Binary, error) { return bin, nil }),
	}
	return e, bin
}

// The agent's environment points at its proxy's address once the proxy
// has one, and by name on an engine that gives none; nothing else in it
// changes.
func TestAgentEnvPointsAtTheProxysAddress(t *testing.T) {
	p := &EgressPlan{ProxyURL: "http://git-sandbox-x-proxy:" + ProxyPort, Proxy: &container.Spec{Name: "git-sandbox-x-proxy"}}
	env := append([]string{"HOME=/home/sandbox", "FOO=http://git-sandbox-x-proxy:3128"}, ProxyEnv(p.ProxyURL)...)
	env = append(env, "NO_PROXY=localhost,.corp.example") // the user's -e
	p.setProxyAddr(netip.Addr{})
	if got := p.AgentEnv(env); !slices.Equal(got, env) {
		t.Errorf("with no address: %v, want %v", got, env)
	}
	p.setProxyAddr(netip.MustParseAddr("10.213.4.30"))
	got := p.AgentEnv(env)
	want := append([]string{"HOME=/home/sandbox", "FOO=http://git-sandbox-x-proxy:3128"}, ProxyEnv("http://10.213.4.30:"+ProxyPort)...)
	want = append(want, "NO_PROXY=localhost,.corp.example")
	if !slices.Equal(got, want) {
		t.Errorf("at an address: %v, want %v", got, want)
	}
	if env[2] != "HTTP_PROXY=http://git-sandbox-x-proxy:3128" {
		t.Errorf("the planned environment was changed in place: %v", env)
	}
}
