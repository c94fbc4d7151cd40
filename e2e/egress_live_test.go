package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// getScript asks the sandbox's proxy for http://$1/ and prints the status
// line and the body.
const getScript = `p=${http_proxy#http://}; exec 3<>/dev/tcp/${p%:*}/${p##*:} || exit 1
printf 'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" "$1" >&3; timeout 10 cat <&3`

// TestEgressLivePolicy: net allow lets a refused host through on the
// agent's next try, with neither the agent nor its proxy restarted; net
// deny cuts a host the config allowed; both survive stop and start (and
// net allow on the stopped sandbox holds at its next start) and are
// in the log; net suggest folds three names of one domain; a repository
// cannot add entries through the user's [[repository]] tables.
func TestEgressLivePolicy(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.egressConfig("api.allowed.test")
	e.MustSandbox("start", "live", "-d", "--agent", "shell", "--", "sleep", "600")
	startUpstream(t, e.egressNetwork(), "api.allowed.test", "late.test", "a.sub.test", "b.sub.test", "c.sub.test", "stopped.test")

	get := func(host string) string {
		t.Helper()
		return e.MustSandbox("exec", "live", "--", "bash", "-c", getScript, "get", host).Stdout
	}
	ok := func(host string) bool {
		out := get(host)
		return strings.Contains(out, " 200 ") && strings.Contains(out, "hello from ") && strings.Contains(out, "("+host+")")
	}
	refused := func(host string) bool { return strings.Contains(get(host), " 403 ") }

	for _, h := range []string{"a.sub.test", "b.sub.test", "c.sub.test"} {
		if !refused(h) {
			t.Errorf("%s reached before it was allowed", h)
		}
	}
	if !refused("late.test") || !ok("api.allowed.test") {
		t.Fatalf("before the change: late.test %q, api.allowed.test %q", get("late.test"), get("api.allowed.test"))
	}
	proxy := e.sandboxContainers("live", "proxy")
	started := func(name string) string {
		out, _ := exec.Command("docker", "inspect", "--format", "{{.Id}} {{.State.StartedAt}}", name).Output()
		return strings.TrimSpace(string(out))
	}
	agentBefore, proxyBefore := started(e.PsOf("live").Container), started(proxy[0])

	r := e.MustSandbox("net", "allow", "live", "late.test")
	if !strings.Contains(r.Stderr, "allowed on live: late.test") {
		t.Errorf("net allow:\n%s", r)
	}
	if !ok("late.test") {
		t.Errorf("late.test after net allow: %q", get("late.test"))
	}
	e.MustSandbox("net", "deny", "live", "api.allowed.test")
	if out := get("api.allowed.test"); !strings.Contains(out, " 403 ") || !strings.Contains(out, "removed by live change") {
		t.Errorf("api.allowed.test after net deny: %q", out)
	}
	if a, p := started(e.PsOf("live").Container), started(proxy[0]); a != agentBefore || p != proxyBefore {
		t.Errorf("restarted: agent %q → %q, proxy %q → %q", agentBefore, a, proxyBefore, p)
	}

	r = e.MustSandbox("net", "live", "--policy")
	for _, want := range []string{`^late\.test\s+allow\s+live change`, `^api\.allowed\.test\s+allow\s+user config\s+removed by api\.allowed\.test \(live change\)`, `^api\.allowed\.test\s+deny\s+live change`} {
		if !regexpLine(r.Stdout, want) {
			t.Errorf("net --policy lacks %s:\n%s", want, r.Stdout)
		}
	}
	r = e.MustSandbox("net", "live", "--json")
	for _, want := range []string{`"kind":"allow","host":"late.test","port":0,"decision":"policy"`, `"kind":"deny","host":"api.allowed.test","port":0,"decision":"policy"`} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the log lacks %s:\n%s", want, r.Stdout)
		}
	}

	// A new proxy (stop, start) gets the changes from the record.
	// A stopped sandbox takes a change too, for its next start.
	e.MustSandbox("stop", "live")
	e.MustSandbox("net", "allow", "live", "stopped.test")
	e.MustSandbox("start", "live", "-d")
	if p := e.sandboxContainers("live", "proxy"); len(p) != 1 || started(p[0]) == proxyBefore {
		t.Errorf("no new proxy after stop and start: %q", p)
	}
	if !ok("late.test") || !refused("api.allowed.test") || !ok("stopped.test") {
		t.Errorf("after stop and start: late.test %q, api.allowed.test %q, stopped.test %q", get("late.test"), get("api.allowed.test"), get("stopped.test"))
	}

	r = e.MustSandbox("net", "suggest", "live")
	t.Logf("suggest:\n%s", r.Stdout)
	if !regexpLine(r.Stdout, `^\s*"\*\.sub\.test", # a\.sub\.test, b\.sub\.test, c\.sub\.test`) || strings.Contains(r.Stdout, `"a.sub.test"`) ||
		!regexpLine(r.Stdout, `^\s*"late\.test",`) || !regexpLine(r.Stdout, `^allow = \[$`) {
		t.Errorf("net suggest:\n%s", r)
	}

	// A repository's own file cannot add entries, by any key.
	e.WriteFile(".sandbox.toml", "[[repository]]\npath = "+`"`+e.Repo+`"`+"\nallow = [\"evil.test\"]\n")
	r = e.Sandbox("start", "widen", "-d", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, `sets "repository": a repository's config may not ask for hosts on the network allow list`) {
		t.Errorf("a repository added entries:\n%s", r)
	}
	if err := os.Remove(filepath.Join(e.Repo, ".sandbox.toml")); err != nil {
		t.Fatal(err)
	}
	// The user can, with --repo: sandboxes started afterwards get it.
	r = e.MustSandbox("net", "allow", "--repo", "a.sub.test")
	if !strings.Contains(r.Stderr, "config.toml") {
		t.Errorf("net allow --repo:\n%s", r)
	}
	e.MustSandbox("start", "next", "-d", "--agent", "shell", "--", "sleep", "600")
	if r = e.MustSandbox("net", "next", "--policy"); !regexpLine(r.Stdout, `^a\.sub\.test\s+allow\s+user config`) {
		t.Errorf("a sandbox started after --repo:\n%s", r.Stdout)
	}
	r = e.MustSandbox("exec", "next", "--", "bash", "-c", getScript, "get", "a.sub.test")
	if !strings.Contains(r.Stdout, "(a.sub.test)") {
		t.Errorf("a.sub.test from a sandbox started after --repo:\n%s", r)
	}
}

// TestNetNamesWhyAnAllowedHostFailed: the agent gets a 502 from its proxy
// for an allowed host it could not reach, and net says why, per host: a
// port nothing listens on is refused, a name nothing answers to does not
// resolve.
func TestNetNamesWhyAnAllowedHostFailed(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.egressConfig("up.test:81", "down.test")
	e.MustSandbox("start", "fails", "-d", "--agent", "shell", "--", "sleep", "600")
	startUpstream(t, e.egressNetwork(), "up.test")
	for _, host := range []string{"up.test:81", "down.test"} {
		if out := e.MustSandbox("exec", "fails", "--", "bash", "-c", getScript, "get", host).Stdout; !strings.Contains(out, " 502 ") {
			t.Errorf("%s: the agent got %q, want a 502", host, out)
		}
	}
	r := e.MustSandbox("net", "fails")
	for _, want := range []string{`^up\.test\s+81\s+1\s+0\s+.*\s1 failed: connection refused$`, `^down\.test\s+80\s+1\s+0\s+.*\s1 failed: the name does not resolve$`} {
		if !regexpLine(r.Stdout, want) {
			t.Errorf("net lacks %s:\n%s", want, r.Stdout)
		}
	}
	e.MustSandbox("rm", "--force", "fails")
}
