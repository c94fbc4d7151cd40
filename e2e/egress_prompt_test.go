package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// heldGetScript is getScript with time to wait for an answer: it asks the
// proxy for http://$1/ and prints the status line and the body.
const heldGetScript = `p=${http_proxy#http://}; exec 3<>/dev/tcp/${p%:*}/${p##*:} || exit 1
printf 'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" "$1" >&3; timeout 90 cat <&3`

// TestEgressPrompt: with network_prompt in the user's config, a connection
// to a host off the list waits; the dashboard shows it at once and its o
// key lets it through; two connections to one host are one
// line of net pending, and net allow lets both through; an unanswered one
// is refused when its time runs out, saying so, and notify announced it;
// each is in the log; a
// repository cannot turn prompting on.
func TestEgressPrompt(t *testing.T) {
	e := NewEnv(t)
	notified := filepath.Join(e.Root, "notify.log")
	e.WriteConfig("allow = [\"api.allowed.test\"]\negress_network = %q\nbase_image = %q\nnetwork_prompt = true\nnetwork_prompt_timeout = \"15s\"\nnotify = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n",
		e.egressNetwork(), baseImage, `echo "$SANDBOX $EVENT" >> `+notified)

	// A repository's own file cannot turn prompting on.
	e.WriteFile(".sandbox.toml", "network_prompt = true\n")
	r := e.Sandbox("start", "widen", "-d", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, `sets "network_prompt": a repository's config may not ask for holding unlisted connections`) {
		t.Errorf("a repository turned prompting on:\n%s", r)
	}
	must(t, os.Remove(filepath.Join(e.Repo, ".sandbox.toml")))

	e.MustSandbox("start", "held", "-d", "--agent", "shell", "--", "sleep", "600")
	startUpstream(t, e.egressNetwork(), "late.test", "cli.test", "slow.test")
	get := func(host string) <-chan string {
		c := make(chan string, 1)
		go func() { c <- e.Sandbox("exec", "held", "--", "bash", "-c", heldGetScript, "get", host).Stdout }()
		return c
	}
	answered := func(c <-chan string, host string) string {
		t.Helper()
		select {
		case out := <-c:
			return out
		case <-time.After(2 * time.Minute):
			t.Fatalf("no answer to %s", host)
			return ""
		}
	}
	ok := func(out, host string) bool {
		return strings.Contains(out, " 200 ") && strings.Contains(out, "("+host+")")
	}

	// The dashboard: the held connection shows, o lets it through.
	x := newTmux(t, e)
	x.keys("git sandbox dash", "Enter")
	x.waitScreen(30*time.Second, "the sandbox", func(s string) bool { return strings.Contains(row(s, "held"), "running") })
	late := get("late.test")
	x.waitScreen(20*time.Second, "the held connection", func(s string) bool { return strings.Contains(s, "HELD held → late.test (1, ") })
	x.keys("o")
	if out := answered(late, "late.test"); !ok(out, "late.test") {
		t.Errorf("late.test after o in the dashboard: %q", out)
	}
	x.waitScreen(10*time.Second, "the answer's outcome", func(s string) bool { return strings.Contains(s, "allowed once on held") })
	x.keys("q")

	// Without the dashboard: two connections to one host are one line.
	c1, c2 := get("cli.test"), get("cli.test")
	Eventually(t, 20*time.Second, "net pending to show both", func() bool {
		return regexpLine(e.Sandbox("net", "pending").Stdout, `^held\s+cli\.test\s+http\s+2\s+\d+s$`)
	})
	if r := e.MustSandbox("net", "pending", "held"); strings.Count(r.Stdout, "cli.test") != 1 {
		t.Errorf("net pending held:\n%s", r)
	}
	e.MustSandbox("net", "allow", "held", "cli.test")
	for _, c := range []<-chan string{c1, c2} {
		if out := answered(c, "cli.test"); !ok(out, "cli.test") {
			t.Errorf("cli.test after net allow: %q", out)
		}
	}
	if r := e.MustSandbox("net", "pending", "held"); !strings.Contains(r.Stderr, "no connection waits") {
		t.Errorf("net pending after the answers:\n%s", r)
	}

	// Unanswered: refused when the time runs out, as without prompting.
	if out := answered(get("slow.test"), "slow.test"); !strings.Contains(out, " 403 ") || !strings.Contains(out, "held 15s for an answer; none came") {
		t.Errorf("slow.test unanswered: %q", out)
	}
	// The supervisor announced the question that waited (one answered
	// within its look every second may go unannounced).
	Eventually(t, 30*time.Second, "notify of the held connection", func() bool {
		b, _ := os.ReadFile(notified)
		return strings.Contains(string(b), "held egress-held")
	})
	// Allowed once is not kept; allowed for the sandbox is.
	r = e.MustSandbox("net", "held", "--policy")
	if !regexpLine(r.Stdout, `^cli\.test\s+allow\s+live change`) || strings.Contains(r.Stdout, "late.test") {
		t.Errorf("net --policy:\n%s", r.Stdout)
	}
	r = e.MustSandbox("net", "held", "--json")
	for _, want := range []string{`"host":"late.test","port":80,"addr":`, `"kind":"allow once","host":"late.test"`, `"host":"slow.test","port":80,"decision":"denied"`} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the log lacks %s:\n%s", want, r.Stdout)
		}
	}
	if strings.Count(r.Stdout, `"held_ms":`) < 4 {
		t.Errorf("the log does not say which connections were held:\n%s", r.Stdout)
	}
}

// TestEgressPromptCopyMode: the same prompting for a sandbox whose files
// and proxy's log are on its engine (copy mode): the connection held there
// shows in net pending here, net allow lets it through, and net shows the
// proxy's records.
func TestEgressPromptCopyMode(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("allow = [\"api.allowed.test\"]\negress_network = %q\nbase_image = %q\nnetwork_prompt = true\nnetwork_prompt_timeout = \"60s\"\n[rescue]\ninterval = \"1h\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"here\"\nhost = %q\nmode = \"copy\"\n",
		e.egressNetwork(), baseImage, mainDockerHost())
	r := e.MustSandbox("start", "held", "-d", "--engine", "here", "--agent", "shell", "--", "sleep", "600")
	if strings.Contains(r.Stderr, "network_prompt") {
		t.Errorf("start in copy mode warns about prompting:\n%s", r)
	}
	startUpstream(t, e.egressNetwork(), "copy.test")
	c := make(chan string, 1)
	go func() { c <- e.Sandbox("exec", "held", "--", "bash", "-c", heldGetScript, "get", "copy.test").Stdout }()
	Eventually(t, 30*time.Second, "net pending to show the held connection", func() bool {
		return regexpLine(e.Sandbox("net", "pending").Stdout, `^held\s+copy\.test\s+http\s+1\s+\d+s$`)
	})
	e.MustSandbox("net", "allow", "held", "copy.test")
	select {
	case out := <-c:
		if !strings.Contains(out, " 200 ") || !strings.Contains(out, "(copy.test)") {
			t.Errorf("copy.test after net allow: %q", out)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no answer to copy.test")
	}
	// The proxy's log, on the engine, is copied here for net.
	Eventually(t, 30*time.Second, "the proxy's records in net's log", func() bool {
		out := e.Sandbox("net", "held", "--json").Stdout
		return strings.Contains(out, `"host":"copy.test","port":80,"addr":`) && strings.Contains(out, `"held_ms":`)
	})
	e.MustSandbox("rm", "--force", "held")
}
