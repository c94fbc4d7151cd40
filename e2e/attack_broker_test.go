package e2e

// The adversarial suite, third round, hole 2: the credential broker handed
// the real value back. A secret's own host echoing a request header is the
// attack (error pages, debugging endpoints and proxies in front of APIs do
// exactly that): the agent asks the host to send the value back in a way
// the proxy's scrub did not read — a gzip body, a trailer, a 103 Early
// Hints answer, the Basic token the proxy made, a 101 Switching Protocols
// answer and the stream after it. Each test arms the attack inside the
// container (the host does receive the real value) and asserts that
// nothing the agent sees holds the value in any encoding.

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// atkRevealed reports whether the agent's output holds the secret marker
// in a way it could read back: as it is, URL-unescaped (line by line), or
// base64-decoded, in either alphabet, at each of the four character
// offsets of every run of base64 characters — and again in what those
// decode to (an echo of a Basic token, base64 of base64).
func atkRevealed(out, marker string) bool { return atkReveals(out, marker, 2) }

func atkReveals(out, marker string, depth int) bool {
	texts := []string{out}
	for _, line := range strings.Split(out, "\n") {
		if u, err := url.QueryUnescape(line); err == nil && u != line {
			texts = append(texts, u)
		}
		if u, err := url.PathUnescape(line); err == nil && u != line {
			texts = append(texts, u)
		}
	}
	for _, t := range texts {
		if strings.Contains(t, marker) {
			return true
		}
	}
	if depth == 0 {
		return false
	}
	isB64 := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '/'
	}
	for _, t := range texts {
		norm := strings.NewReplacer("-", "+", "_", "/", "=", "").Replace(t)
		for _, run := range strings.FieldsFunc(norm, func(r rune) bool { return !isB64(r) }) {
			for o := 0; o < 4 && o < len(run); o++ {
				r := run[o:]
				if len(r)%4 == 1 {
					r = r[:len(r)-1]
				}
				if dec, err := base64.RawStdEncoding.DecodeString(r); err == nil && atkReveals(string(dec), marker, depth-1) {
					return true
				}
			}
		}
	}
	return false
}

func TestAtkRevealed(t *testing.T) {
	m := "REALabc123def456"
	v := "sk-ant-api03-" + m
	for _, s := range []string{
		v, url.QueryEscape("a b/" + v), base64.StdEncoding.EncodeToString([]byte("x-access-token:" + v)),
		"Basic " + base64.URLEncoding.EncodeToString([]byte("xx"+v+"!")), "see " + base64.RawStdEncoding.EncodeToString([]byte("x"+v)) + ".",
		base64.StdEncoding.EncodeToString([]byte("authorization=Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+v)))),
	} {
		if !atkRevealed(s, m) {
			t.Errorf("%q: not seen", s)
		}
	}
	if atkRevealed("sk-ant-api03-gsbxPLACEHOLDER "+base64.StdEncoding.EncodeToString([]byte("u:sk-ant-api03-gsbxPLACE")), m) {
		t.Error("a placeholder seen as the value")
	}
}

// atkBroker is a sandbox with the secret API_KEY bound to api.secret.test
// (ports 8443, and 8444 for HTTP/1.1 only), whose upstream echoes the
// credentials it receives (e2e/testupstream's /echo/).
type atkBroker struct {
	e        *Env
	upstream string // its container
	marker   string // the random part of the value: what the agent must never read
	value    string
	ph       string // the placeholder the agent has
}

func newAtkBroker(t *testing.T) *atkBroker {
	e := NewEnv(t)
	dir := filepath.Join(e.Root, "secrets")
	testTLS(t, filepath.Join(dir, "tls"), "api.secret.test")
	rnd := make([]byte, 12)
	_, _ = rand.Read(rnd)
	a := &atkBroker{e: e, marker: "REAL" + hex.EncodeToString(rnd)}
	a.value = "sk-ant-api03-" + a.marker
	must(t, os.WriteFile(filepath.Join(dir, "api-key"), []byte(a.value), 0o600))
	e.WriteConfig(`egress_network = %q
base_image = %q
upstream_ca = %q
[[secret]]
name = "API_KEY"
hosts = ["api.secret.test:8443", "api.secret.test:8444"]
from_file = %q
[[mount]]
source = %q
target = %q
readonly = true
[limits]
memory = "1g"
pids = 256
`, e.egressNetwork(), baseImage, filepath.Join(dir, "tls", "ca.pem"), filepath.Join(dir, "api-key"),
		filepath.Join(binDir, "test-upstream"), brokerClient)
	e.MustSandbox("start", "echo", "-d", "--agent", "shell", "--", "sleep", "600")
	tls := filepath.Join(dir, "tls")
	a.upstream, _ = startUpstreamWith(t, e.egressNetwork(), []string{"-v", tls + ":/tls:ro", "-e", "UPSTREAM_TLS_CERT=/tls/cert.pem", "-e", "UPSTREAM_TLS_KEY=/tls/key.pem"},
		"api.secret.test")
	a.ph = e.MustSandbox("exec", "echo", "--", "sh", "-c", `printf %s "$API_KEY"`).Stdout
	if !strings.HasPrefix(a.ph, "sk-ant-api03-gsbx") {
		t.Fatalf("the agent's API_KEY = %q, want a placeholder", a.ph)
	}
	return a
}

// logs is what the upstream printed: a line per request with the
// credentials it received.
func (a *atkBroker) logs() string {
	out, _ := exec.Command("docker", "logs", a.upstream).CombinedOutput()
	return string(out)
}

// attack runs script in the sandbox ($S is the show client, $U the
// upstream's URL) and returns what the agent saw, failing the test if
// that reveals the value. For each path of reached, the host must have
// received the real value there (the attack is armed), or not.
func (a *atkBroker) attack(t *testing.T, script string, reached map[string]bool) string {
	t.Helper()
	r := a.e.Sandbox("exec", "echo", "--", "bash", "-c", "S='"+brokerClient+" show'; U=https://api.secret.test\n"+script)
	t.Logf("the agent saw:\n%s%s", r.Stdout, r.Stderr)
	if r.Code != 0 {
		t.Fatalf("the attack script failed: %s", r)
	}
	if atkRevealed(r.Stdout+r.Stderr, a.marker) {
		t.Errorf("ATTACK SUCCEEDED: the agent read the real value")
	}
	logs := a.logs()
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + a.value))
	for path, want := range reached {
		got := strings.Contains(logs, path+" x-api-key="+a.value) || strings.Contains(logs, path+" authorization=Basic "+basic)
		if got != want {
			t.Errorf("the host received the real value on %s: %v, want %v:\n%s", path, got, want, logs)
		}
	}
	return r.Stdout
}

// atkWant checks that a section of what the agent saw holds each of wants.
func atkWant(t *testing.T, out, name string, wants ...string) {
	t.Helper()
	s := section(out, name)
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s: the agent did not see %q:\n%s", name, w, s)
		}
	}
}

// refusalsLogged checks that git sandbox net lists the refusals with
// their statuses, and holds no value.
func (a *atkBroker) refusalsLogged(t *testing.T, statuses ...int) {
	t.Helper()
	r := a.e.MustSandbox("net", "echo", "--json")
	if strings.Contains(r.Stdout, a.marker) {
		t.Errorf("git sandbox net --json holds the real value:\n%s", r.Stdout)
	}
	refusals := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rec struct {
			Status int
			Error  string
		}
		must(t, json.Unmarshal([]byte(line), &rec))
		if strings.HasPrefix(rec.Error, "refused") {
			refusals[rec.Status] = true
		}
	}
	for _, s := range statuses {
		if !refusals[s] {
			t.Errorf("no refusal with status %d in the log:\n%s", s, r.Stdout)
		}
	}
}

// TestAttackBrokerEchoesTheValue: the secret's own host echoes the value
// back; one subtest per way back the scrub did not read.
func TestAttackBrokerEchoesTheValue(t *testing.T) {
	t.Parallel()
	a := newAtkBroker(t)
	ph := a.ph

	t.Run("gzip", func(t *testing.T) {
		out := a.attack(t, `
echo "== gzip"; $S $U:8443/echo/gzip "x-api-key: $API_KEY" "Accept-Encoding: gzip"
echo "== deflate"; $S $U:8443/echo/deflate "x-api-key: $API_KEY"
echo "== br"; $S $U:8443/echo/br "x-api-key: $API_KEY" "Accept-Encoding: br"
echo "== end"`, map[string]bool{"/echo/gzip": true, "/echo/deflate": true, "/echo/br": true})
		atkWant(t, out, "gzip", "status 200", "echo x-api-key="+ph)
		atkWant(t, out, "deflate", "status 200", "echo x-api-key="+ph)
		atkWant(t, out, "br", "status 502", `content encoding "br"`)
		if strings.Contains(out, "Content-Encoding") {
			t.Errorf("a body was passed on encoded:\n%s", out)
		}
	})

	t.Run("trailer", func(t *testing.T) {
		out := a.attack(t, `echo "== trailer"; $S $U:8443/echo/trailer "x-api-key: $API_KEY"; echo "== h1"; $S $U:8444/echo/trailer "x-api-key: $API_KEY"; echo "== end"`,
			map[string]bool{"/echo/trailer": true})
		for _, s := range []string{"trailer", "h1"} {
			atkWant(t, out, s, "status 200", "trailers\nX-Echo: x-api-key="+ph, "X-Late-Echo: x-api-key="+ph)
		}
	})

	t.Run("103", func(t *testing.T) {
		out := a.attack(t, `echo "== 103"; $S $U:8443/echo/103 "x-api-key: $API_KEY"; echo "== h1"; $S $U:8444/echo/103 "x-api-key: $API_KEY"; echo "== end"`,
			map[string]bool{"/echo/103": true})
		for _, s := range []string{"103", "h1"} {
			atkWant(t, out, s, "informational 103", "X-Echo: x-api-key="+ph, url.QueryEscape("x-api-key="+ph), "status 200")
		}
	})

	t.Run("basic", func(t *testing.T) {
		// The agent decodes the echoed token itself, as well as the host's
		// own base64 of it at each byte offset.
		out := a.attack(t, `tok=$(printf 'x-access-token:%s' "$API_KEY" | base64 -w0)
echo "== basic"; $S $U:8443/echo/plain "Authorization: Basic $tok" | tee /tmp/basic
echo "== decoded"; sed -n 's/.*authorization=Basic //p' /tmp/basic | base64 -d; echo
echo "== b64"; $S $U:8443/echo/b64 "Authorization: Basic $tok" | tee /tmp/b64
echo "== b64 decoded"; grep -E '^[A-Za-z0-9+/=]{40,}$' /tmp/b64 | while read l; do printf %s "$l" | base64 -d; echo; done
echo "== end"`, map[string]bool{"/echo/plain": true, "/echo/b64": true})
		atkWant(t, out, "decoded", "x-access-token:"+ph)
		atkWant(t, out, "b64", "status 200")
	})

	t.Run("101", func(t *testing.T) {
		out := a.attack(t, `
echo "== upgrade"; $S $U:8444/echo/101 "x-api-key: $API_KEY" "Connection: Upgrade" "Upgrade: websocket" "Sec-WebSocket-Version: 13" "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="
echo "== unasked"; $S $U:8444/echo/101 "x-api-key: $API_KEY"
echo "== end"`, nil)
		atkWant(t, out, "upgrade", "status 501", "does not switch protocols")
		atkWant(t, out, "unasked", "status 502", "the host switched protocols")
		// The upgrade never reached the host; the request that did not ask
		// for one did, with the real value.
		if logs := a.logs(); strings.Count(logs, "/echo/101 x-api-key="+a.value) != 1 {
			t.Errorf("the host received the value on /echo/101 other than once (the unasked request):\n%s", logs)
		}
	})

	a.refusalsLogged(t, 501, 502)
	a.e.MustSandbox("rm", "--force", "echo")
}
