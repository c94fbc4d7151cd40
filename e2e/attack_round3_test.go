package e2e

// The adversarial suite, third round: the open items of the second
// review — the network between sandboxes and to this machine, nested
// repositories in a worktree, and what snapshots may cost the host. Each
// test arms its attack inside the container first, then asserts that the
// host-side effect is absent.

import (
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// atkListener is an agent that listens on TCP port 8080 of every address
// it has and answers each connection with a line, then waits.
const atkListener = `perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "HELLO\n"; close $c }' &
sleep 1
echo LISTENING
exec sleep 600
`

// atkReach is a probe run in a sandbox: for each ADDR:PORT argument it
// prints REACHED or unreachable.
const atkReach = `for a in "$@"; do if timeout 5 bash -c "exec 3<>/dev/tcp/${a%:*}/${a##*:}" 2>/dev/null; then echo "REACHED $a"; else echo "unreachable $a"; fi; done`

// atkHostTargets listens on a port of this machine (every address) and
// returns the addresses:port a container could try to reach it at: the
// gateways of the given networks and of the default bridge, and every
// address of this machine's interfaces.
func atkHostTargets(t *testing.T, networks ...string) []string {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
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
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a+":"+port)
		}
	}
	for _, n := range append(networks, "bridge") {
		add(networkGateway(t, n))
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
				add(p.Addr().String())
			}
		}
	}
	return out
}

// atkNetworkOf returns the one network a sandbox's agent container joins
// and its address there.
func (e *Env) atkNetworkOf(branch string) (name, ip string) {
	e.t.Helper()
	c := e.PsOf(branch).Container
	out, err := exec.Command("docker", "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}\n{{end}}", c).Output()
	if err != nil {
		e.t.Fatalf("docker inspect %s: %v", c, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 {
		e.t.Fatalf("%s joins %d networks, want one: %q", branch, len(lines), lines)
	}
	f := strings.Fields(lines[0])
	if len(f) != 2 {
		e.t.Fatalf("%s: no address on its network: %q", branch, lines[0])
	}
	return f[0], f[1]
}

// ---------------------------------------------------------------------------
// 5. The network: from a sandbox the agent reached a service of this
// machine through the gateway, and another sandbox's listener (open mode
// put every sandbox on the engine's default bridge, inter-container
// traffic on). In allowlist mode neither is reachable; in open mode no
// sandbox shares a network with another, so no other sandbox is.

func TestAttackNetworkReachesNoOtherSandboxNorHost(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// Two victims listening, one per mode, and one attacker per mode.
	for _, s := range []struct{ name, network string }{
		{"victim-allow", "allowlist"}, {"victim-open", "open"}, {"atk-allow", "allowlist"}, {"atk-open", "open"},
	} {
		agent := atkListener
		if strings.HasPrefix(s.name, "atk-") {
			// No listener of its own that a probe could find instead.
			agent = "echo LISTENING; exec sleep 600"
		}
		e.MustSandbox("start", s.name, "-d", "--network", s.network, "--agent", "shell", "--", "sh", "-c", agent)
	}
	for _, v := range []string{"victim-allow", "victim-open", "atk-allow", "atk-open"} {
		Eventually(t, 60*time.Second, v+" listening", func() bool {
			return strings.Contains(e.Sandbox("logs", v).Stdout, "LISTENING")
		})
	}
	victims := map[string]string{}
	for _, v := range []string{"victim-allow", "victim-open"} {
		n, ip := e.atkNetworkOf(v)
		victims[v] = ip + ":8080"
		// Armed: each victim's listener answers at that address.
		if r := e.MustSandbox("exec", v, "--", "bash", "-c", atkReach, "probe", victims[v]); !strings.Contains(r.Stdout, "REACHED") {
			t.Fatalf("%s does not reach its own listener at %s: the test would prove nothing:\n%s", v, victims[v], r)
		}
		if v == "victim-open" {
			if n == "bridge" {
				t.Errorf("ATTACK SURFACE: the open-mode sandbox is on the engine's default bridge, shared with every container")
			}
			out, _ := exec.Command("docker", "network", "inspect", "--format", "{{.Internal}} {{index .Options \"com.docker.network.bridge.enable_icc\"}}", n).Output()
			if got := strings.TrimSpace(string(out)); got != "false false" {
				t.Errorf("open network %s: internal, inter-container traffic = %q, want \"false false\"", n, got)
			}
		}
	}
	for _, atk := range []string{"atk-allow", "atk-open"} {
		n, ip := e.atkNetworkOf(atk)
		t.Logf("%s: %s on %s; victims %v", atk, ip, n, victims)
		for v, addr := range victims {
			r := e.MustSandbox("exec", atk, "--", "bash", "-c", atkReach, "probe", addr)
			if !strings.Contains(r.Stdout, "unreachable "+addr) || strings.Contains(r.Stdout, "REACHED") {
				t.Errorf("ATTACK SUCCEEDED: %s reached %s's listener at %s:\n%s", atk, v, addr, r)
			}
		}
		host := atkHostTargets(t, n)
		r := e.MustSandbox(append([]string{"exec", atk, "--", "bash", "-c", atkReach, "probe"}, host...)...)
		if atk == "atk-allow" {
			if strings.Contains(r.Stdout, "REACHED") || strings.Count(r.Stdout, "unreachable") != len(host) {
				t.Errorf("ATTACK SUCCEEDED: the allowlist sandbox reached this machine's port:\n%s", r)
			}
		} else {
			// Documented in SECURITY.md: the engine cannot keep a routed
			// bridge from the host's own addresses.
			t.Logf("open mode, this machine's addresses (reachable by design):\n%s", r.Stdout)
		}
	}
	// rm takes the open sandbox's own network with it.
	openNet, _ := e.atkNetworkOf("victim-open")
	e.MustSandbox("rm", "--force", "victim-open")
	if out, err := exec.Command("docker", "network", "inspect", openNet).CombinedOutput(); err == nil {
		t.Errorf("rm left the open network %s:\n%s", openNet, out)
	}
}
