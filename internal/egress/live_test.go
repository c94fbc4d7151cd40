package egress

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
	"github.com/git-sandbox/git-sandbox/internal/egress/dnscache"
)

func TestLivePolicyChange(t *testing.T) {
	var l LivePolicy
	a := MustParseEntries(FromLive, "a.test", "b.test:8443")
	if got := l.Change(false, a); len(got) != 2 || len(l.Allow) != 2 {
		t.Fatalf("allow: changed %v, live %+v", got, l)
	}
	if got := l.Change(false, a[:1]); len(got) != 0 {
		t.Fatalf("allowing again changed %v", got)
	}
	// A denial takes the entry out of the allowed ones, and back.
	if got := l.Change(true, a[:1]); len(got) != 1 || len(l.Allow) != 1 || len(l.Deny) != 1 || l.Deny[0].Entry != "a.test" {
		t.Fatalf("deny: changed %v, live %+v", got, l)
	}
	if got := l.Change(false, a[:1]); len(got) != 1 || len(l.Deny) != 0 || len(l.Allow) != 2 {
		t.Fatalf("allow after deny: changed %v, live %+v", got, l)
	}
	if l.Allow[0].Source != FromLive {
		t.Fatalf("source %q", l.Allow[0].Source)
	}
}

func TestPolicyWithLive(t *testing.T) {
	base := &Policy{Allow: MustParseEntries(FromUser, "*.example.com", "kept.test")}
	p, err := base.With(&LivePolicy{
		Allow: []Rule{{Entry: "new.test"}},
		Deny:  []Rule{{Entry: "api.example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Allow) != 2 || len(base.Remove) != 0 {
		t.Fatalf("base changed: %+v", base)
	}
	for host, want := range map[string]bool{"new.test": true, "kept.test": true, "api.example.com": false, "www.example.com": true, "other.test": false} {
		_, err := p.Check(Target{Host: host, Port: 443}, Connect)
		if (err == nil) != want {
			t.Errorf("%s: allowed %v, want %v (%v)", host, err == nil, want, err)
		}
	}
	if _, err := p.Check(Target{Host: "api.example.com", Port: 443}, Connect); err == nil || !strings.Contains(err.Error(), "live change") {
		t.Errorf("denial's reason: %v", err)
	}
	if _, err := base.With(&LivePolicy{Allow: []Rule{{Entry: "http://x"}}}); err == nil {
		t.Error("a bad live entry was taken")
	}
}

// The proxy reads its live file again when it changes: a host allowed
// there answers on the next request, one denied there is refused on the
// next, without a restart; a broken file keeps the last good policy.
func TestProxyLiveReload(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	dir := t.TempDir()
	live := filepath.Join(dir, LiveFile)
	var errs bytes.Buffer
	p, err := New(Options{
		// The loopback address itself is named, so that the name's
		// resolution to it is not what refuses.
		Policy:   &Policy{Allow: MustParseEntries(FromUser, "127.0.0.1:"+port)},
		Live:     live,
		Resolver: newResolver("late.test", "127.0.0.1"),
		Errors:   &errs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.policy.dir == nil {
		t.Fatal("the live file's directory is not kept open: each connection would look the file up from the root")
	}
	pu := &url.URL{Scheme: "http", Host: serve(t, p)}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}}
	status := func() int {
		t.Helper()
		resp, err := c.Get("http://late.test:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(); s != 403 {
		t.Fatalf("before: %d", s)
	}
	var l LivePolicy
	l.Change(false, MustParseEntries(FromLive, "late.test:"+port))
	if err := WriteLive(live, &l); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != 200 {
		t.Fatalf("after a live allow: %d", s)
	}
	if err := atomicfile.Write(live, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != 200 || !strings.Contains(errs.String(), "live policy") {
		t.Fatalf("after a broken file: %d, errors %q", s, errs.String())
	}
	l.Change(true, MustParseEntries(FromLive, "late.test"))
	if err := WriteLive(live, &l); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != 403 {
		t.Fatalf("after a live deny: %d", s)
	}
}

// A live deny reaches a tunnel the proxy terminates that is kept open:
// the next request inside it is refused, without a new connection.
func TestLiveDenyReachesAnOpenTunnel(t *testing.T) {
	e := newTestEnv(t)
	for _, h2 := range []bool{false, true} {
		c := e.client(t, h2)
		u := "https://api.test:" + e.port + "/v1/messages"
		if resp, _ := do(t, c, "GET", u, nil); resp.StatusCode != 200 {
			t.Fatalf("h2 %v: before: %d", h2, resp.StatusCode)
		}
		var l LivePolicy
		l.Change(true, MustParseEntries(FromLive, "api.test"))
		if err := WriteLive(e.live, &l); err != nil {
			t.Fatal(err)
		}
		if resp, _ := do(t, c, "GET", u, nil); resp.StatusCode != 403 {
			t.Errorf("h2 %v: after a live deny, on the open tunnel: %d", h2, resp.StatusCode)
		}
		if err := os.Remove(e.live); err != nil {
			t.Fatal(err)
		}
	}
}

// A name's answer kept by the resolver's cache (as New puts it in front of
// the system's) is vetted against the policy of each connection: a live
// deny of the address it names, or of the name, refuses the next
// connection although the name is not asked again.
func TestLiveDenyWithCachedAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	live := filepath.Join(t.TempDir(), LiveFile)
	res := newResolver("late.test", "127.0.0.1")
	p, err := New(Options{
		// The loopback address is named too: a name may not reach it
		// otherwise.
		Policy:   &Policy{Allow: MustParseEntries(FromUser, "late.test:"+port, "127.0.0.1:"+port)},
		Live:     live,
		Resolver: dnscache.New(res),
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, p)
	var l LivePolicy
	for i, step := range []struct {
		deny  string // the live deny before the request; "" for none
		allow string // the live allow, likewise
		want  int
	}{{"", "", 200}, {"", "", 200}, {"127.0.0.1", "", 403}, {"", "127.0.0.1", 200}, {"late.test", "", 403}} {
		if step.deny != "" || step.allow != "" {
			l.Change(step.deny != "", MustParseEntries(FromLive, step.deny+step.allow))
			if err := WriteLive(live, &l); err != nil {
				t.Fatal(err)
			}
		}
		if got := rawRequest(t, addr, "CONNECT late.test:"+port+" HTTP/1.1", "late.test:"+port); got != step.want {
			t.Errorf("step %d (deny %q, allow %q): %d, want %d", i, step.deny, step.allow, got, step.want)
		}
	}
	if n := res.asked("late.test"); n != 1 {
		t.Errorf("the name was asked %d times, want once (kept)", n)
	}
}
