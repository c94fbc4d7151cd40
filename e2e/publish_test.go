package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/portfwd"
)

// serveScript runs a server on each port given that greets every
// connection with its port (perl: the test image has neither nc nor
// busybox) and waits.
const serveScript = `for p in "$@"; do perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => $ARGV[0], Listen => 5, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "hello from port $ARGV[0]\n"; close $c }' $p & done; wait`

// reachScript connects to $1:$2 and prints "connected" and what it read
// there, or "unreachable".
const reachScript = `out=$(timeout 10 bash -c 'exec 3<>/dev/tcp/$0/$1 || exit 1; echo connected; timeout 3 cat <&3' "$1" "$2" 2>/dev/null); echo "${out:-unreachable}"`

// awaitAnswer waits until 127.0.0.1:port answers and returns what it says.
func awaitAnswer(t *testing.T, port int) string {
	t.Helper()
	var got string
	Eventually(t, 60*time.Second, fmt.Sprintf("an answer on 127.0.0.1:%d", port), func() bool {
		got = dialRead("127.0.0.1", port)
		return got != ""
	})
	return got
}

// TestPublishUnderAllowlist: in the default mode a server the agent starts
// is reached from this machine at 127.0.0.1 through the sandbox's proxy,
// while the agent still reaches nothing directly — not an upstream on the
// egress network, not its proxy's forwarded port — and a container beside
// the proxy on the egress network cannot use the forwarded port. The port
// is the same after stop and start; rm leaves nothing.
func TestPublishUnderAllowlist(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.egressConfig("api.allowed.test")
	egressNet := e.egressNetwork()
	fixed, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	r := e.MustSandbox("start", "srv", "-d", "--publish", "3000", "--publish", strconv.Itoa(fixed)+":4000",
		"--agent", "shell", "--", "bash", "-c", serveScript, "serve", "3000", "4000")
	if !strings.Contains(r.Stderr, "port 3000 published on 127.0.0.1:") {
		t.Errorf("start does not say where the port went: %s", r)
	}
	var ports []struct {
		HostIP   string `json:"host_ip"`
		HostPort int    `json:"host_port"`
		Port     int    `json:"port"`
	}
	must(t, json.Unmarshal([]byte(e.MustSandbox("ports", "srv", "--json").Stdout), &ports))
	if len(ports) != 2 || ports[0].Port != 3000 || ports[0].HostIP != "127.0.0.1" || ports[0].HostPort == 0 || ports[1].HostPort != fixed {
		t.Fatalf("ports --json: %+v", ports)
	}
	auto := ports[0].HostPort
	if p := e.PsOf("srv"); p.Network != "allowlist" {
		t.Errorf("network %q, want allowlist", p.Network)
	}
	if ps := e.MustSandbox("ps").Stdout; !strings.Contains(ps, " PORTS") || !strings.Contains(ps, fmt.Sprintf("%d->3000,%d->4000", auto, fixed)) {
		t.Errorf("ps does not show the published ports:\n%s", ps)
	}
	for port, host := range map[int]int{3000: auto, 4000: fixed} {
		if got := awaitAnswer(t, host); got != fmt.Sprintf("hello from port %d\n", port) {
			t.Errorf("127.0.0.1:%d answered %q", host, got)
		}
		for _, ip := range hostAddresses(t) {
			if got := dialRead(ip, host); got != "" {
				t.Errorf("%s:%d answered %q: published beyond loopback", ip, host, got)
			}
		}
	}

	// The agent's network is still closed: an upstream on the egress
	// network is out of its reach, and so is the proxy's forwarded port
	// (the forwarder refuses a container of the proxy's networks).
	_, upIP := startUpstream(t, egressNet, "api.allowed.test")
	proxies := e.sandboxContainers("srv", "proxy")
	if len(proxies) != 1 {
		t.Fatalf("proxies %q", proxies)
	}
	listen := strconv.Itoa(portfwd.ListenPort(0))
	r = e.MustSandbox("exec", "srv", "--", "bash", "-c", reachScript, "reach", upIP, "80")
	if got := strings.TrimSpace(r.Stdout); got != "unreachable" {
		t.Errorf("the agent reached the upstream %s:80 directly: %q", upIP, got)
	}
	// Connected and closed unanswered, or not connected at all.
	r = e.MustSandbox("exec", "srv", "--", "bash", "-c", reachScript, "reach", proxies[0], listen)
	if got := strings.TrimSpace(r.Stdout); got != "connected" && got != "unreachable" {
		t.Errorf("the agent got an answer from its proxy's forwarded port: %q", got)
	}
	// Another container on the shared egress network (as another
	// sandbox's proxy is) gets nothing from the forwarded port.
	proxyIP := containerIP(t, proxies[0], egressNet)
	out, _ := exec.Command("docker", "run", "--rm", "--network", egressNet, "--user", "65534:65534", baseImage,
		"bash", "-c", reachScript, "reach", proxyIP, listen).CombinedOutput()
	if got := strings.TrimSpace(string(out)); got != "connected" && got != "unreachable" {
		t.Errorf("a neighbour on the egress network got an answer from the forwarded port: %q", got)
	}
	// The probe itself works: from the egress network the upstream answers.
	out, _ = exec.Command("docker", "run", "--rm", "--network", egressNet, "--user", "65534:65534", baseImage,
		"bash", "-c", `exec 3<>/dev/tcp/$0/80 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && timeout 5 cat <&3`, upIP).CombinedOutput()
	if !strings.Contains(string(out), "hello from api.allowed.test") {
		t.Errorf("the upstream does not answer on the egress network: %q", out)
	}
	// And this machine still does (the gate let nothing else in).
	if got := dialRead("127.0.0.1", auto); got != "hello from port 3000\n" {
		t.Errorf("127.0.0.1:%d after the probes answered %q", auto, got)
	}

	// stop takes the proxy and its ports; start brings them back, the same.
	e.MustSandbox("stop", "srv")
	if got := dialRead("127.0.0.1", auto); got != "" {
		t.Errorf("127.0.0.1:%d answers while the sandbox is stopped: %q", auto, got)
	}
	if out := e.MustSandbox("ports", "srv"); out.Stdout != fmt.Sprintf("3000 -> 127.0.0.1:%d\n4000 -> 127.0.0.1:%d\n", auto, fixed) {
		t.Errorf("ports of the stopped sandbox: %q", out.Stdout)
	}
	// (The shell agent resumed without a command is a shell: the server
	// is the follow-up's command, in a container made again from the
	// record.)
	e.MustSandbox("start", "srv", "-d", "--", "bash", "-c", serveScript, "serve", "3000")
	if got := awaitAnswer(t, auto); got != "hello from port 3000\n" {
		t.Errorf("127.0.0.1:%d after start answered %q", auto, got)
	}

	// rm: nothing answers, no proxy, no network of the sandbox's.
	e.MustSandbox("rm", "--force", "srv")
	if got := dialRead("127.0.0.1", auto); got != "" {
		t.Errorf("127.0.0.1:%d answers after rm: %q", auto, got)
	}
	if p := e.sandboxContainers("srv", "proxy"); len(p) != 0 {
		t.Errorf("proxy after rm: %q", p)
	}
	if n := e.sandboxNetworks("srv"); len(n) != 0 {
		t.Errorf("networks after rm: %q", n)
	}
}

// TestPublishWithNoNetwork: --network none has nothing to publish on, and
// says which mode does; nothing is made.
func TestPublishWithNoNetwork(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Sandbox("start", "srv", "-d", "--network", "none", "--publish", "3000", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--publish needs a network") || !strings.Contains(r.Stderr, "the default, allowlist, publishes") {
		t.Errorf("start: %s", r)
	}
	if e.hasSandbox("srv") {
		t.Error("a sandbox was made")
	}
}

// TestDevcontainerForwardPortsUnderAllowlist: a devcontainer's
// forwardPorts are published as --publish is, through the proxy in the
// default mode.
func TestDevcontainerForwardPortsUnderAllowlist(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".devcontainer/devcontainer.json", `{"build": {"dockerfile": "Dockerfile"}, "forwardPorts": [3000]}`)
	// The comment makes this run's image its own (see TestDevcontainerStart).
	e.WriteFile(".devcontainer/Dockerfile", fmt.Sprintf("# run %d\nFROM %s\n", time.Now().UnixNano(), baseImage))
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "devcontainer")
	r := e.MustSandbox("start", "dev", "-d", "--agent", "shell", "--", "bash", "-c", serveScript, "serve", "3000")
	devTag(t, e, r.Stderr)
	var ports []struct {
		HostPort int `json:"host_port"`
		Port     int `json:"port"`
	}
	must(t, json.Unmarshal([]byte(e.MustSandbox("ports", "dev", "--json").Stdout), &ports))
	if len(ports) != 1 || ports[0].Port != 3000 || ports[0].HostPort == 0 {
		t.Fatalf("ports --json: %+v", ports)
	}
	if p := e.PsOf("dev"); p.Network != "allowlist" {
		t.Errorf("network %q, want allowlist", p.Network)
	}
	if got := awaitAnswer(t, ports[0].HostPort); got != "hello from port 3000\n" {
		t.Errorf("127.0.0.1:%d answered %q", ports[0].HostPort, got)
	}
}
