package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// egressConfig is the test's user config with an allow list in front.
func (e *Env) egressConfig(allow ...string) {
	quoted := make([]string, len(allow))
	for i, a := range allow {
		quoted[i] = strconv.Quote(a)
	}
	e.WriteConfig("allow = [%s]\negress_network = %q\nbase_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n",
		strings.Join(quoted, ", "), e.egressNetwork(), baseImage)
}

// egressNetwork is the test's own network for its proxies to leave by
// (egress_network), so that the upstream servers it starts there under
// shared names (api.allowed.test) are never another test's. Removed at
// the end of the test with whatever is still attached.
func (e *Env) egressNetwork() string {
	name := "git-sandbox-e2e-egress-" + e.RepoID()
	e.t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "network="+name).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
		_ = exec.Command("docker", "network", "rm", name).Run()
	})
	return name
}

// sandboxNetworks lists the networks made for a sandbox, by name.
func (e *Env) sandboxNetworks(branch string) []string {
	e.t.Helper()
	out, err := exec.Command("docker", "network", "ls", "--format", "{{.Name}}",
		"--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.branch="+branch).Output()
	if err != nil {
		e.t.Fatalf("docker network ls: %v", err)
	}
	return strings.Fields(string(out))
}

// sandboxContainers lists a sandbox's containers of a role, by name.
func (e *Env) sandboxContainers(branch, role string) []string {
	e.t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--format", "{{.Names}}",
		"--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.branch="+branch,
		"--filter", "label=git-sandbox.role="+role).Output()
	if err != nil {
		e.t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

func networkWithSuffix(t testing.TB, names []string, suffix string) string {
	t.Helper()
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			return n
		}
	}
	t.Fatalf("no network *%s in %q", suffix, names)
	return ""
}

// startUpstream runs the test upstream server on a network under the given
// names and returns its container's name and its address there.
func startUpstream(t testing.TB, network string, aliases ...string) (string, string) {
	t.Helper()
	return startUpstreamWith(t, network, nil, aliases...)
}

// startUpstreamWith is startUpstream with more docker run arguments (a
// TLS certificate, say).
func startUpstreamWith(t testing.TB, network string, extra []string, aliases ...string) (string, string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "git-sandbox-e2e-upstream-" + hex.EncodeToString(b)
	args := []string{"run", "-d", "--name", name, "--network", network, "--user", "65534:65534",
		"-e", "UPSTREAM_NAME=" + aliases[0], "-v", filepath.Join(binDir, "test-upstream") + ":/upstream:ro"}
	args = append(args, extra...)
	for _, a := range aliases {
		args = append(args, "--network-alias", a)
	}
	args = append(args, baseImage, "/upstream")
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker run upstream: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	return name, containerIP(t, name, network)
}

func containerIP(t testing.TB, name, network string) string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "--format", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", name).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("address of %s on %s: %v %s", name, network, err, out)
	}
	return strings.TrimSpace(string(out))
}

func networkGateway(t *testing.T, network string) string {
	t.Helper()
	out, _ := exec.Command("docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", network).Output()
	return strings.TrimSpace(string(out))
}

// probeScript runs inside a sandbox: requests through the proxy (bash's
// /dev/tcp: the test image has no curl) and direct connections that must
// fail. $1 is the upstream's address, $2 the host's listening port, the
// rest addresses that must be unreachable directly.
const probeScript = `
p=${http_proxy#http://}; ph=${p%:*}; pp=${p##*:}
get() {
	exec 3<>/dev/tcp/$ph/$pp || { echo "no proxy"; return; }
	printf 'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" "$1" >&3
	timeout 10 cat <&3 | head -n 1; timeout 10 cat <&3 >/dev/null
	exec 3<&-
}
direct() {
	if timeout 5 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; then echo "REACHED $1:$2"; else echo "unreachable $1:$2"; fi
}
up=$1; port=$2; shift 2
echo "== allowed"; exec 3<>/dev/tcp/$ph/$pp; printf 'GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n' >&3; timeout 10 cat <&3; exec 3<&-
echo "== denied"; get api.denied.test
echo "== ip literal"; get $up
echo "== metadata"; get 169.254.169.254
echo "== connect"
exec 3<>/dev/tcp/$ph/$pp
printf 'CONNECT api.allowed.test:443 HTTP/1.1\r\nHost: api.allowed.test:443\r\n\r\n' >&3
timeout 10 cat <&3
exec 3<&-
echo "== direct"
direct api.allowed.test 80
direct $up 80
for a in "$@"; do direct $a $port; done
echo "== end"
`

func section(out, name string) string {
	_, rest, ok := strings.Cut(out, "== "+name+"\n")
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, "\n== ")
	return s
}

// TestEgressAllowlist: in the default mode the agent reaches an allowed
// host through its proxy and nothing else — not a denied host, not an IP
// literal, not the metadata address, not a host directly, not this
// machine's ports, not another sandbox's containers — and every decision
// is in git sandbox net. The proxy goes with stop and comes back with the
// sandbox; rm removes the networks.
func TestEgressAllowlist(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.egressConfig("api.allowed.test")
	e.MustSandbox("start", "egress", "-d", "--agent", "shell", "--", "sleep", "600")
	e.MustSandbox("start", "other", "-d", "--agent", "shell", "--", "sleep", "600")

	// One network of the sandbox's own; the proxy leaves by the shared one.
	nets := e.sandboxNetworks("egress")
	if len(nets) != 1 {
		t.Fatalf("networks of the sandbox = %q, want its internal one only", nets)
	}
	internal, egressNet := networkWithSuffix(t, nets, "-net"), e.egressNetwork()
	doc := Inspect(t, e.PsOf("egress").Container)
	if nm := doc["HostConfig"].(map[string]any)["NetworkMode"]; nm != internal {
		t.Errorf("agent's network = %v, want %s", nm, internal)
	}
	if attached := doc["NetworkSettings"].(map[string]any)["Networks"].(map[string]any); len(attached) != 1 {
		t.Errorf("agent joins %d networks, want only its internal one", len(attached))
	}
	out, _ := exec.Command("docker", "network", "inspect", "--format", "{{.Internal}} {{index .Options \"com.docker.network.bridge.inhibit_ipv4\"}}", internal).Output()
	if got := strings.TrimSpace(string(out)); got != "true true" {
		t.Errorf("internal network: internal, no host address = %q, want \"true true\"", got)
	}
	// Its range is numbered by git sandbox, not taken from the engine's
	// few pools.
	out, _ = exec.Command("docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", internal).Output()
	if sub, err := netip.ParsePrefix(strings.TrimSpace(string(out))); err != nil || sub.Bits() != 27 || !netip.MustParsePrefix("10.213.0.0/16").Contains(sub.Addr()) {
		t.Errorf("internal network's range = %q, want a /27 of 10.213.0.0/16", out)
	}
	proxies := e.sandboxContainers("egress", "proxy")
	if len(proxies) != 1 {
		t.Fatalf("proxy containers = %q", proxies)
	}
	pdoc := Inspect(t, proxies[0])
	phc := pdoc["HostConfig"].(map[string]any)
	if phc["ReadonlyRootfs"] != true || phc["Privileged"] != false || len(phc["CapDrop"].([]any)) != 1 {
		t.Errorf("proxy container not hardened: %v", phc)
	}

	// The agent finds its proxy in its hosts file, no name server asked,
	// at the last address of the internal range, which the network keeps
	// for the proxy (its members are numbered in the lower half).
	sub := netip.MustParsePrefix(strings.TrimSpace(string(out)))
	proxyIP := containerIP(t, proxies[0], internal)
	if a, err := netip.ParseAddr(proxyIP); err != nil || !sub.Contains(a) || a.As4()[3]&31 != 30 {
		t.Errorf("proxy at %q on %s, want the range's last host address", proxyIP, sub)
	}
	out, _ = exec.Command("docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.IPRange}}{{end}}", internal).Output()
	if r := strings.TrimSpace(string(out)); r != netip.PrefixFrom(sub.Addr(), 28).String() {
		t.Errorf("internal network's member range = %q, want the lower half of %s", r, sub)
	}
	// Its environment gives that address: no client looks it up.
	findsProxy := func(when string) {
		t.Helper()
		name := strings.TrimPrefix(pdoc["Name"].(string), "/")
		r := e.MustSandbox("exec", "egress", "--", "sh", "-c", `grep -w "$1" /etc/hosts; getent hosts "$1"; echo "$HTTPS_PROXY $http_proxy"`, "hosts", name)
		at := "http://" + proxyIP + ":3128"
		if lines := strings.Fields(r.Stdout); len(lines) != 6 || lines[0] != proxyIP || lines[2] != proxyIP || lines[4] != at || lines[5] != at {
			t.Errorf("%s: the agent's hosts file and lookup of %s, and its proxy variables:\n%s\nwant %s", when, name, r.Stdout, at)
		}
	}
	findsProxy("start")

	upstream, upIP := startUpstream(t, egressNet, "api.allowed.test", "api.denied.test")

	// This machine listens on a port; the agent must not reach it at any
	// of its addresses.
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	var targets []string
	for _, n := range []string{egressNet, "bridge"} {
		if g := networkGateway(t, n); g != "" {
			targets = append(targets, g)
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
				targets = append(targets, p.Addr().String())
			}
		}
	}
	// Another sandbox's proxy listens on its own internal network.
	otherNets := e.sandboxNetworks("other")
	otherProxy := e.sandboxContainers("other", "proxy")
	if len(otherProxy) != 1 {
		t.Fatalf("other sandbox's proxy = %q", otherProxy)
	}
	otherIP := containerIP(t, otherProxy[0], networkWithSuffix(t, otherNets, "-net"))

	r := e.MustSandbox(append([]string{"exec", "egress", "--", "bash", "-c", probeScript, "probe", upIP, port}, targets...)...)
	got := r.Stdout
	t.Logf("probe:\n%s", got)
	if s := section(got, "allowed"); !strings.Contains(s, "200 OK") || !strings.Contains(s, "hello from api.allowed.test") {
		t.Errorf("allowed host through the proxy:\n%s", s)
	}
	for _, name := range []string{"denied", "ip literal", "metadata"} {
		if s := section(got, name); !strings.Contains(s, " 403 ") {
			t.Errorf("%s: want 403 from the proxy:\n%s", name, s)
		}
	}
	if s := section(got, "connect"); !strings.Contains(s, " 200 ") || !strings.Contains(s, "tunnel to api.allowed.test") {
		t.Errorf("CONNECT to the allowed host:\n%s", s)
	}
	if s := section(got, "direct"); strings.Contains(s, "REACHED") || strings.Count(s, "unreachable") != 2+len(targets) {
		t.Errorf("direct connections (must all fail):\n%s", s)
	}
	if !strings.Contains(got, "== end") {
		t.Errorf("probe did not finish:\n%s", r)
	}
	// Another sandbox's container, by address and by name.
	r = e.MustSandbox("exec", "egress", "--", "bash", "-c",
		`for a in "$@"; do if timeout 5 bash -c "exec 3<>/dev/tcp/$a/3128" 2>/dev/null; then echo "REACHED $a"; else echo "unreachable $a"; fi; done`,
		"probe", otherIP, otherProxy[0])
	if strings.Contains(r.Stdout, "REACHED") || strings.Count(r.Stdout, "unreachable") != 2 {
		t.Errorf("another sandbox's proxy from this sandbox:\n%s", r)
	}
	// The other sandbox reaches its own proxy (the address is right).
	r = e.MustSandbox("exec", "other", "--", "bash", "-c", `exec 3<>/dev/tcp/$1/3128 && echo REACHED`, "probe", otherIP)
	if !strings.Contains(r.Stdout, "REACHED") {
		t.Errorf("the other sandbox cannot reach its own proxy:\n%s", r)
	}

	// git sandbox net: the summary, the raw log, and ps's count.
	r = e.MustSandbox("net", "egress")
	if !regexpLine(r.Stdout, `^api\.allowed\.test\s+80\s+1\s+0\s`) || !regexpLine(r.Stdout, `^api\.allowed\.test\s+443\s+1\s+0\s`) ||
		!regexpLine(r.Stdout, `^api\.denied\.test\s+80\s+0\s+1\s.*not in the allow list`) {
		t.Errorf("net:\n%s", r)
	}
	r = e.MustSandbox("net", "egress", "--json")
	denied := 0
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rec struct {
			Host, Decision string
			Port           int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("net --json line %q: %v", line, err)
		}
		if rec.Decision == "denied" {
			denied++
		}
	}
	if denied != 3 {
		t.Errorf("net --json: %d denials, want 3 (name, IP literal, metadata):\n%s", denied, r.Stdout)
	}
	if p := e.PsOf("egress"); p.Network != "allowlist" || p.Denied != 3 {
		t.Errorf("ps: network %q denied %d", p.Network, p.Denied)
	}

	// stop removes the proxy; resume brings a new one that works.
	e.MustSandbox("stop", "egress")
	if p := e.sandboxContainers("egress", "proxy"); len(p) != 0 {
		t.Errorf("proxy after stop: %q", p)
	}
	e.MustSandbox("start", "egress", "-d")
	r = e.MustSandbox("exec", "egress", "--", "bash", "-c", probeScript, "probe", upIP, port)
	if s := section(r.Stdout, "allowed"); !strings.Contains(s, "hello from api.allowed.test") {
		t.Errorf("allowed host after resume:\n%s", r)
	}
	if p := e.sandboxContainers("egress", "proxy"); len(p) != 1 || containerIP(t, p[0], internal) != proxyIP {
		t.Errorf("resumed proxy %q not at %s", p, proxyIP)
	}
	findsProxy("resume")

	// rm takes the proxy and the networks with it (the test's upstream
	// leaves the egress network first: the engine keeps a network in use).
	if out, err := exec.Command("docker", "rm", "-f", upstream).CombinedOutput(); err != nil {
		t.Fatalf("remove upstream: %v %s", err, out)
	}
	e.MustSandbox("rm", "--force", "egress")
	if n := e.sandboxNetworks("egress"); len(n) != 0 {
		t.Errorf("networks after rm: %q", n)
	}
	if p := e.sandboxContainers("egress", "proxy"); len(p) != 0 {
		t.Errorf("proxy after rm: %q", p)
	}
}

// regexpLine reports whether any line of s matches the expression.
func regexpLine(s, expr string) bool {
	re := regexp.MustCompile(expr)
	for _, line := range strings.Split(s, "\n") {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

// TestEgressModesAndSources: open warns; none makes no network and no
// proxy; config show names where each entry came from; a repository's
// config can take hosts away but never add one, and what it removed is
// refused by the proxy.
func TestEgressModesAndSources(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.egressConfig("api.allowed.test", "*.cdn.test")

	r := e.MustSandbox("start", "wide", "--network", "open", "--agent", "shell", "--dry-run", "--", "true")
	if !strings.Contains(r.Stderr, "warning: network is open: the agent can reach any host") {
		t.Errorf("open mode without a warning:\n%s", r)
	}
	r = e.MustSandbox("start", "wide", "--network", "open", "-d", "--agent", "shell", "--", "sleep", "60")
	if !strings.Contains(r.Stderr, "warning: network is open") {
		t.Errorf("open mode start without a warning:\n%s", r)
	}
	// Open mode: one network of the sandbox's own, no other sandbox on it.
	n := e.sandboxNetworks("wide")
	if len(n) != 1 || !strings.HasSuffix(n[0], "-open") {
		t.Errorf("open mode networks = %q, want one of its own", n)
	} else if nm := Inspect(t, e.PsOf("wide").Container)["HostConfig"].(map[string]any)["NetworkMode"]; nm != n[0] {
		t.Errorf("open mode network = %v, want %s", nm, n[0])
	}

	e.MustSandbox("start", "closed", "-d", "--network", "none", "--agent", "shell", "--", "sleep", "60")
	if n := e.sandboxNetworks("closed"); len(n) != 0 {
		t.Errorf("none mode made networks %q", n)
	}
	if p := e.sandboxContainers("closed", "proxy"); len(p) != 0 {
		t.Errorf("none mode made a proxy %q", p)
	}
	r = e.MustSandbox("exec", "closed", "--", "sh", "-c", "env; cat /proc/net/route")
	if strings.Contains(r.Stdout, "PROXY") || strings.Contains(r.Stdout, "eth0") {
		t.Errorf("none mode: proxy variables or an interface:\n%s", r.Stdout)
	}
	r = e.Sandbox("net", "closed")
	if r.Code == 0 || !strings.Contains(r.Stderr, "has no egress proxy: its network is none") {
		t.Errorf("net of a none sandbox:\n%s", r)
	}

	// Sources, then a repository that tries to widen and one that narrows.
	r = e.MustSandbox("config", "show")
	for _, want := range []string{`api\.allowed\.test\s+from user config$`, `\*\.cdn\.test\s+from user config$`} {
		if !regexpLine(r.Stdout, want) {
			t.Errorf("config show lacks %s:\n%s", want, r.Stdout)
		}
	}
	e.WriteFile(".sandbox.toml", "allow = [\"evil.test\"]\n")
	r = e.Sandbox("start", "widen", "-d", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, `sets "allow": a repository's config may not ask for hosts on the network allow list`) {
		t.Errorf("a repository widened the allow list:\n%s", r)
	}
	if b := e.Git("branch", "--list", "widen"); b != "" {
		t.Errorf("a sandbox branch was made with the repository's allow list: %q", b)
	}
	e.WriteFile(".sandbox.toml", "agent = \"claude\"\ndeny = [\"api.allowed.test\", \"api.anthropic.com\"]\n")
	r = e.MustSandbox("config", "show")
	for _, want := range []string{
		`api\.allowed\.test\s+from user config; removed by repository \(deny api\.allowed\.test\)$`,
		`api\.anthropic\.com\s+from agent claude; removed by repository`,
		`console\.anthropic\.com\s+from agent claude$`,
	} {
		if !regexpLine(r.Stdout, want) {
			t.Errorf("config show lacks %s:\n%s", want, r.Stdout)
		}
	}
	e.MustSandbox("start", "narrow", "-d", "--agent", "shell", "--", "sleep", "600")
	egressNet := e.egressNetwork()
	upstream, _ := startUpstream(t, egressNet, "api.allowed.test")
	r = e.MustSandbox("exec", "narrow", "--", "bash", "-c", `p=${http_proxy#http://}; exec 3<>/dev/tcp/${p%:*}/${p##*:}
printf 'GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n' >&3; timeout 10 cat <&3`)
	if !strings.Contains(r.Stdout, " 403 ") || strings.Contains(r.Stdout, "hello from") {
		t.Errorf("a host the repository denied was reached:\n%s", r)
	}
	r = e.MustSandbox("net", "narrow", "--json")
	if !strings.Contains(r.Stdout, `removed by repository`) {
		t.Errorf("the denial does not name the repository:\n%s", r.Stdout)
	}
	_ = exec.Command("docker", "rm", "-f", upstream).Run()
}

// TestDeniedCLIHostHint: when the agent's own CLI is denied a host of its
// domain, the attached start prints a hint naming --allow, and net does
// too; a host of no agent's gets the generic hint only.
func TestDeniedCLIHostHint(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	img := fakeClaudeImage(t)
	r := e.MustSandbox("start", "hint", "--agent", "claude", "--image", img, "-p", `p=${http_proxy#http://}
for h in telemetry.anthropic.com example.org; do
exec 3<>/dev/tcp/${p%:*}/${p##*:}; printf 'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' $h $h >&3; timeout 10 head -n 1 <&3; exec 3<&-
done`)
	if strings.Count(r.Stdout, " 403 ") != 2 {
		t.Fatalf("requests not denied:\n%s", r)
	}
	for _, want := range []string{"warning: the claude CLI was denied telemetry.anthropic.com:80 (not in the allow list)", "hint: git sandbox net allow hint telemetry.anthropic.com lets this sandbox reach it at once; a new sandbox reaches it with git sandbox start NEW-BRANCH --allow telemetry.anthropic.com"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("start's output lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.Stderr, "denied example.org") {
		t.Errorf("a host the CLI does not need got the hint:\n%s", r)
	}
	r = e.MustSandbox("net", "hint")
	if !strings.Contains(r.Stderr, "--allow telemetry.anthropic.com") {
		t.Errorf("net lacks the hint:\n%s", r)
	}
}

// TestVerifyReachesItsAllowedHost: verify_allow gives verify a proxy of
// its own, which its container finds in its hosts file (no name server
// asked) and through which the allowed host answers and another is
// refused; both are gone after the run.
func TestVerifyReachesItsAllowedHost(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("allow = [\"api.allowed.test\"]\nverify_allow = [\"api.allowed.test\"]\negress_network = %q\nbase_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n",
		e.egressNetwork(), baseImage)
	const probe = `p=${HTTP_PROXY#http://}; host=${p%:*}
echo "hosts: $(grep -w "$host" /etc/hosts | tr -s '\t ' ' ')"
for h in api.allowed.test api.denied.test; do
  exec 3<>/dev/tcp/$host/3128 && printf 'GET http://%s/ HTTP/1.0\r\nHost: %s\r\n\r\n' $h $h >&3 && echo "$h: $(head -1 <&3)"; exec 3<&-
done`
	e.MustSandbox("start", "v", "-d", "--agent", "shell", "--verify", "bash probe.sh", "--", "sleep", "600")
	startUpstream(t, e.egressNetwork(), "api.allowed.test", "api.denied.test")
	must(t, os.WriteFile(filepath.Join(e.Worktree("v"), "probe.sh"), []byte(probe+"\n"), 0o644))
	r := e.Sandbox("verify", "v")
	if r.Code != 0 {
		t.Fatalf("verify: %s", r)
	}
	out := r.Stdout + r.Stderr
	hosts := regexp.MustCompile(`hosts: (\S+) (git-sandbox-proxy-[0-9a-f]+)`).FindStringSubmatch(out)
	if hosts == nil {
		t.Fatalf("verify's hosts file does not name its proxy:\n%s", out)
	}
	if a, err := netip.ParseAddr(hosts[1]); err != nil || a.As4()[3]&31 != 30 {
		t.Errorf("verify's proxy at %q, want its network's last host address", hosts[1])
	}
	if !strings.Contains(out, "api.allowed.test: HTTP/1.0 200") || !strings.Contains(out, "api.denied.test: HTTP/1.0 403") {
		t.Errorf("verify through its proxy: want the allowed host's 200 and the other's 403:\n%s", out)
	}
	if exec.Command("docker", "inspect", hosts[2]).Run() == nil {
		t.Errorf("verify's proxy %s is still there after the run", hosts[2])
	}
}
