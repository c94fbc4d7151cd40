package egress

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseAllowEntryRules(t *testing.T) {
	for in, want := range map[string]string{
		"api.github.com GET,HEAD /repos/acme/":            "api.github.com GET,HEAD /repos/acme/",
		"github.com  POST /acme/app.git/git-receive-pack": "github.com POST /acme/app.git/git-receive-pack",
		"x.test:8443 /a /b":                               "x.test:8443 /a /b",
		"x.test":                                          "x.test",
	} {
		e, err := ParseAllowEntry(in, FromUser)
		if err != nil || e.String() != want {
			t.Errorf("%q: %q %v, want %q", in, e.String(), err, want)
			continue
		}
		if again, err := ParseAllowEntry(e.String(), FromUser); err != nil || again.String() != want {
			t.Errorf("%q does not read back: %v", in, err)
		}
	}
	for _, in := range []string{"x.test get", "x.test /a/../b", "x.test /a%2fb", "x.test /a?b", "x.test GET;POST", "http://x /a"} {
		if _, err := ParseAllowEntry(in, FromUser); err == nil {
			t.Errorf("%q was taken", in)
		}
	}
	if _, err := ParseEntry("x.test GET", FromUser); err == nil {
		t.Error("ParseEntry (hosts only: removals, secrets) took rules")
	}
}

func TestCheckRequest(t *testing.T) {
	p := &Policy{Allow: []Entry{
		mustAllow(t, "api.test GET,HEAD /repos/acme/"),
		mustAllow(t, "api.test POST /graphql"),
		mustAllow(t, "open.test"),
		mustAllow(t, "open.test PUT /x"),
	}}
	api := Target{Host: "api.test", Port: 443}
	d, err := p.Check(api, Connect)
	if err != nil || len(d.Ruled) != 2 {
		t.Fatalf("decision %+v %v", d, err)
	}
	for _, c := range []struct {
		method, path string
		ok           bool
	}{
		{"GET", "/repos/acme/app", true},
		{"HEAD", "/repos/acme/", true},
		{"POST", "/graphql", true},
		{"POST", "/graphql/x", true},
		{"POST", "/graphqlx", false},
		{"POST", "/repos/acme/app", false},
		{"GET", "/repos/acmeco/app", false},
		{"GET", "/repos/acme/../other/app", false},
		{"GET", "/repos/acme/%2e%2e/other", false},
		{"GET", "//repos/acme/x", false},
		{"GET", "/repos/acme/..;/other", false},
		{"GET", "/repos/acme/app;jsessionid=1", false},
		{"GET", "", false},
	} {
		err := d.CheckRequest(api, c.method, c.path)
		if (err == nil) != c.ok {
			t.Errorf("%s %s: %v, want allowed %v", c.method, c.path, err, c.ok)
		}
	}
	if err := d.CheckRequest(api, "DELETE", "/repos/acme/x"); err == nil || !strings.Contains(err.Error(), `"api.test GET,HEAD /repos/acme/"`) {
		t.Errorf("the refusal does not name the rules: %v", err)
	}
	// Where rules apply, a protocol switch and a method-override header
	// are refused: either would leave the rules behind.
	get := func(h ...string) *http.Request {
		r := httptest.NewRequest("GET", "http://api.test/repos/acme/app", nil)
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	if err := d.CheckHTTP(api, get()); err != nil {
		t.Errorf("a plain GET inside the rules: %v", err)
	}
	for _, h := range [][]string{{"Connection", "Upgrade", "Upgrade", "h2c"}, {"X-HTTP-Method-Override", "DELETE"}, {"X-Method-Override", "PUT"}} {
		if err := d.CheckHTTP(api, get(h...)); err == nil {
			t.Errorf("%q inside the rules was let through", h)
		}
	}
	// A secret's host entry does not lift the rules the user wrote for it.
	ps := &Policy{Allow: append([]Entry{mustAllow(t, "api.test GET /ok/")}, MustParseEntries(SecretSource("K"), "api.test")...)}
	if d, err := ps.Check(api, Connect); err != nil || d.CheckRequest(api, "POST", "/ok/") == nil {
		t.Errorf("a secret's entry lifted the rules: %+v %v", d, err)
	}
	// An entry without rules for the same host allows every request.
	d, err = p.Check(Target{Host: "open.test", Port: 443}, Connect)
	if err != nil || len(d.Ruled) != 0 || d.CheckRequest(Target{Host: "open.test"}, "DELETE", "/y") != nil {
		t.Fatalf("open.test: %+v %v", d, err)
	}
}

func mustAllow(t *testing.T, s string) Entry {
	t.Helper()
	e, err := ParseAllowEntry(s, FromUser)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The proxy applies rules to plain HTTP and inside the broker's tunnels,
// and refuses a tunnel it would not see into.
func TestProxyRules(t *testing.T) {
	e := newTestEnv(t)
	_, plainPort, _ := strings.Cut(e.plainHP, ":")
	e.proxy.policy.cur.Store(&Policy{Allow: []Entry{
		mustAllow(t, e.plainHP+" GET /ok/"), mustAllow(t, "127.0.0.1:"+plainPort),
		mustAllow(t, "api.test:"+e.port+" GET /ok/"), mustAllow(t, "tunnel.test:"+e.port+" GET"), mustAllow(t, "127.0.0.1:"+e.port),
	}})
	c := e.client(t, false)
	if resp, body := do(t, c, "GET", "http://"+e.plainHP+"/ok/1", nil); resp.StatusCode != 200 {
		t.Errorf("plain GET inside the rule: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(t, c, "POST", "http://"+e.plainHP+"/ok/1", strings.NewReader("x")); resp.StatusCode != 403 || !strings.Contains(body, "outside the rules") {
		t.Errorf("plain POST outside the rule: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(t, c, "GET", "https://api.test:"+e.port+"/ok/2", nil, "X-Api-Key", e.api.Placeholder); resp.StatusCode != 200 || !strings.Contains(body, "hello from api.test") {
		t.Errorf("broker GET inside the rule: %d %q", resp.StatusCode, body)
	}
	resp, body := do(t, c, "POST", "https://api.test:"+e.port+"/ok/2", strings.NewReader("x"))
	if resp.StatusCode != 403 || !strings.Contains(body, "POST /ok/2 is outside the rules for api.test") {
		t.Errorf("broker POST outside the rule: %d %q", resp.StatusCode, body)
	}
	rec := e.rec.wait(t, func(r Record) bool { return r.Kind == "intercept" && r.Method == "POST" && r.Decision == Denied })
	if !strings.Contains(rec.Reason, "outside the rules") {
		t.Errorf("log record %+v", rec)
	}
	if status, body := e.connectStatus(t, "tunnel.test:"+e.port); status != 403 || !strings.Contains(body, "method or path rules") {
		t.Errorf("CONNECT to a host with rules the proxy does not terminate: %d %q", status, body)
	}
}

// A host marked inspect = true has its TLS terminated though no secret is
// bound to it: its rules apply inside, a request outside them is refused
// naming the rule, and no placeholder of a secret reaches it.
func TestProxyRulesOnAnInspectedHost(t *testing.T) {
	e := newTestEnv(t)
	e.proxy.policy.cur.Store(&Policy{Allow: []Entry{mustAllow(t, "tunnel.test:"+e.port+" GET,HEAD /ok/"), mustAllow(t, "127.0.0.1:"+e.port)}})
	if status, body := e.connectStatus(t, "tunnel.test:"+e.port); status != 403 || !strings.Contains(body, "inspect = true") {
		t.Fatalf("CONNECT to a ruled host not inspected: %d %q, want a refusal saying how to inspect it", status, body)
	}
	ca, err := NewCA([]string{"api.test", "other.test", "tunnel.test"})
	if err != nil {
		t.Fatal(err)
	}
	e.ca, e.proxy.ca = ca, ca
	e.proxy.inspect = []Entry{mustAllow(t, "tunnel.test:"+e.port)}
	c := e.client(t, false)
	if resp, body := do(t, c, "GET", "https://tunnel.test:"+e.port+"/ok/1", nil); resp.StatusCode != 200 || !strings.Contains(body, "hello from tunnel.test") {
		t.Errorf("GET inside the rule on an inspected host: %d %q", resp.StatusCode, body)
	}
	resp, body := do(t, c, "POST", "https://tunnel.test:"+e.port+"/ok/1", strings.NewReader("x"))
	if resp.StatusCode != 403 || !strings.Contains(body, "POST /ok/1 is outside the rules for tunnel.test") {
		t.Errorf("POST outside the rule on an inspected host: %d %q", resp.StatusCode, body)
	}
	rec := e.rec.wait(t, func(r Record) bool { return r.Kind == "intercept" && r.Host == "tunnel.test" && r.Method == "POST" })
	if rec.Decision != Denied || !strings.Contains(rec.Reason, "outside the rules") {
		t.Errorf("log record %+v", rec)
	}
	if resp, body := do(t, c, "GET", "https://tunnel.test:"+e.port+"/ok/2", nil, "X-Api-Key", e.api.Placeholder); resp.StatusCode != 403 || !strings.Contains(body, "ANTHROPIC_API_KEY") {
		t.Errorf("a placeholder to an inspected host its secret is not bound to: %d %q", resp.StatusCode, body)
	}
}
