package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEgressMethodPathRules: an allow entry with methods and a path
// prefix, on a host the credential broker terminates: GET inside the
// prefix goes through with the real key, POST to the same host and a GET
// outside the prefix are refused with a 403 naming the rule, and logged;
// a host with rules whose TLS the proxy does not terminate refuses the
// tunnel; a repository cannot add rules.
func TestEgressMethodPathRules(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	dir := filepath.Join(e.Root, "secrets")
	tls := filepath.Join(dir, "tls")
	testTLS(t, tls, "api.secret.test", "plain.rules.test")
	must(t, os.WriteFile(filepath.Join(dir, "api-key"), []byte("sk-ant-api03-RULESvalue0123456789\n"), 0o600))
	e.WriteConfig(`allow = ["api.secret.test:8443 GET /ok/", "plain.rules.test:8443 GET"]
egress_network = %q
base_image = %q
upstream_ca = %q
[[secret]]
name = "API_KEY"
hosts = ["api.secret.test:8443"]
from_file = %q
[[mount]]
source = %q
target = %q
readonly = true
[limits]
memory = "1g"
pids = 256
`, e.egressNetwork(), baseImage, filepath.Join(tls, "ca.pem"), filepath.Join(dir, "api-key"), filepath.Join(binDir, "test-upstream"), brokerClient)
	e.MustSandbox("start", "rules", "-d", "--agent", "shell", "--", "sleep", "600")
	startUpstreamWith(t, e.egressNetwork(), []string{"-v", tls + ":/tls:ro", "-e", "UPSTREAM_TLS_CERT=/tls/cert.pem", "-e", "UPSTREAM_TLS_KEY=/tls/key.pem"},
		"api.secret.test", "plain.rules.test")

	call := func(method, url string) string {
		t.Helper()
		return e.MustSandbox("exec", "rules", "--", "sh", "-c", `CLIENT_METHOD=$1 `+brokerClient+` client "$2" "x-api-key: $API_KEY"`, "call", method, url).Stdout
	}
	if out := call("GET", "https://api.secret.test:8443/ok/1"); !strings.Contains(out, "status 200") {
		t.Errorf("GET inside the rule:\n%s", out)
	}
	for _, c := range [][2]string{{"POST", "/ok/1"}, {"GET", "/other"}} {
		out := call(c[0], "https://api.secret.test:8443"+c[1])
		if !strings.Contains(out, "status 403") || !strings.Contains(out, `outside the rules for api.secret.test: "api.secret.test:8443 GET /ok/"`) {
			t.Errorf("%s %s outside the rule:\n%s", c[0], c[1], out)
		}
	}
	// Go's client reports the refused CONNECT by its status text.
	r := e.Sandbox("exec", "rules", "--", brokerClient, "client", "https://plain.rules.test:8443/")
	if !strings.Contains(r.Stdout, "Forbidden") || strings.Contains(r.Stdout, "status 200") {
		t.Errorf("a tunnel to a host with rules the proxy does not terminate:\n%s", r)
	}
	r = e.MustSandbox("net", "rules", "--json")
	if !strings.Contains(r.Stdout, `"kind":"intercept","method":"POST","host":"api.secret.test"`) || !strings.Contains(r.Stdout, "method or path rules") {
		t.Errorf("the log lacks the refusals:\n%s", r.Stdout)
	}

	e.WriteFile(".sandbox.toml", "deny = [\"api.secret.test GET /ok/\"]\n")
	r = e.Sandbox("start", "widen", "-d", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, `deny: allow entry "api.secret.test GET /ok/": write the host without a path`) {
		t.Errorf("a repository's deny entry with rules:\n%s", r)
	}
}

// TestEgressRulesOnAnInspectedHost: the same rules on a host no secret
// goes to, marked inspect = true in the user's config: the proxy
// terminates its TLS with the sandbox's CA, which the agent trusts, so GET
// inside the rule answers and POST is refused with a 403 naming the rule
// over TLS; a repository cannot mark a host for inspection.
func TestEgressRulesOnAnInspectedHost(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	tls := filepath.Join(e.Root, "tls")
	testTLS(t, tls, "api.inspect.test")
	e.WriteConfig(`allow = ["api.inspect.test:8443 GET /ok/"]
egress_network = %q
base_image = %q
upstream_ca = %q
[[host]]
name = "api.inspect.test:8443"
inspect = true
[[mount]]
source = %q
target = %q
readonly = true
[limits]
memory = "1g"
pids = 256
`, e.egressNetwork(), baseImage, filepath.Join(tls, "ca.pem"), filepath.Join(binDir, "test-upstream"), brokerClient)
	e.MustSandbox("start", "insp", "-d", "--agent", "shell", "--", "sleep", "600")
	startUpstreamWith(t, e.egressNetwork(), []string{"-v", tls + ":/tls:ro", "-e", "UPSTREAM_TLS_CERT=/tls/cert.pem", "-e", "UPSTREAM_TLS_KEY=/tls/key.pem"},
		"api.inspect.test")
	call := func(method, url string) string {
		t.Helper()
		return e.MustSandbox("exec", "insp", "--", "sh", "-c", `CLIENT_METHOD=$1 `+brokerClient+` client "$2"`, "call", method, url).Stdout
	}
	if out := call("GET", "https://api.inspect.test:8443/ok/1"); !strings.Contains(out, "status 200") {
		t.Errorf("GET inside the rule on an inspected host:\n%s", out)
	}
	out := call("POST", "https://api.inspect.test:8443/ok/1")
	if !strings.Contains(out, "status 403") || !strings.Contains(out, `outside the rules for api.inspect.test: "api.inspect.test:8443 GET /ok/"`) {
		t.Errorf("POST outside the rule on an inspected host:\n%s", out)
	}
	if r := e.MustSandbox("net", "insp", "--json"); !strings.Contains(r.Stdout, `"kind":"intercept","method":"POST","host":"api.inspect.test"`) {
		t.Errorf("the log lacks the refusal:\n%s", r.Stdout)
	}
	// The agent trusts the sandbox's CA; its key is nowhere the agent reads.
	if out := e.MustSandbox("exec", "insp", "--", "sh", "-c", `ls /etc/git-sandbox/trust; grep -rls "PRIVATE KEY" /etc/git-sandbox "$HOME" /tmp "$PWD" 2>/dev/null; true`).Stdout; !strings.Contains(out, "ca.pem") || strings.Contains(out, "/") {
		t.Errorf("what the agent reads of the sandbox's CA:\n%s", out)
	}
	e.WriteFile(".sandbox.toml", "[[host]]\nname = \"evil.test\"\ninspect = true\n")
	if r := e.Sandbox("start", "widen", "-d", "--agent", "shell", "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, `sets "host"`) {
		t.Errorf("a repository marking a host for inspection:\n%s", r)
	}
}
