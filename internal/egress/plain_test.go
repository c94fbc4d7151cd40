package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// plainEnv is a proxy allowing one plain HTTP upstream, up.test, served
// by handler; conns counts the connections the upstream accepted.
type plainEnv struct {
	base   string // http://up.test:<port>
	client *http.Client
	proxy  string // the proxy's host:port
	up     *httptest.Server
	conns  atomic.Int32
	rec    *recorder
}

func newPlainEnv(t *testing.T, handler http.HandlerFunc) *plainEnv {
	t.Helper()
	e := &plainEnv{rec: newRecorder()}
	e.up = httptest.NewUnstartedServer(handler)
	e.up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.up.Start()
	t.Cleanup(e.up.Close)
	_, port, _ := net.SplitHostPort(e.up.Listener.Addr().String())
	e.base = "http://up.test:" + port
	p, err := New(Options{
		// The address is named too: a name resolving to loopback is refused
		// unless an entry names it.
		Policy:      &Policy{Allow: MustParseEntries(FromUser, "up.test:"+port, "127.0.0.1:"+port)},
		Resolver:    newResolver("up.test", "127.0.0.1"),
		Log:         NewLog(e.rec, nil),
		DialTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = serve(t, p)
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.proxy})}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

func TestPlainKeepsUpstreamConnections(t *testing.T) {
	e := newPlainEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
		if n > 0 {
			fmt.Fprintf(w, " %d", n)
		}
	})
	for i := range 5 {
		resp, body := do(t, e.client, "GET", fmt.Sprintf("%s/%d", e.base, i), nil)
		if resp.StatusCode != 200 || body != fmt.Sprintf("GET /%d", i) {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("five requests in a row took %d upstream connections, want 1", n)
	}

	// An idle connection the upstream closed is not used again.
	e.up.CloseClientConnections()
	if resp, body := do(t, e.client, "GET", e.base+"/after", nil); resp.StatusCode != 200 || body != "GET /after" {
		t.Fatalf("after the upstream closed its connections: %d %q", resp.StatusCode, body)
	}
	if n := e.conns.Load(); n != 2 {
		t.Fatalf("%d upstream connections, want 2", n)
	}

	// Neither is one the upstream said it closes.
	do(t, e.client, "GET", e.base+"/close", nil)
	do(t, e.client, "GET", e.base+"/next", nil)
	if n := e.conns.Load(); n != 3 {
		t.Fatalf("%d upstream connections, want 3 (a new one after Connection: close)", n)
	}

	// A request with a body goes upstream whole, and the response comes back.
	body := strings.Repeat("x", 1<<20)
	resp, got := do(t, e.client, "POST", e.base+"/post", strings.NewReader(body))
	want := fmt.Sprintf("POST /post %d", len(body))
	if resp.StatusCode != 200 || got != want {
		t.Fatalf("POST: %d %q, want %q", resp.StatusCode, got, want)
	}
	rec := e.rec.wait(t, func(r Record) bool { return r.Method == "POST" })
	if rec.BytesUp != int64(len(body)) || rec.BytesDown != int64(len(want)) || rec.Decision != Allowed || rec.Addr != "127.0.0.1" {
		t.Fatalf("log record %+v", rec)
	}
}

func TestPlainLengthsAndHeaders(t *testing.T) {
	e := newPlainEnv(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			w.Header().Set("Content-Length", "1234")
			if r.Method != http.MethodHead {
				w.Write(make([]byte, 1234))
			}
		case "/304":
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case "/hop":
			w.Header().Set("Connection", "X-Up-Hop")
			w.Header().Set("X-Up-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("X-Up-Kept", "1")
			io.WriteString(w, r.Header.Get("User-Agent")+"|"+r.Header.Get("Expect"))
		}
	})
	resp, _ := do(t, e.client, "HEAD", e.base+"/head", nil)
	if resp.StatusCode != 200 || resp.ContentLength != 1234 {
		t.Fatalf("HEAD: %d, length %d, want 1234", resp.StatusCode, resp.ContentLength)
	}
	resp, _ = do(t, e.client, "GET", e.base+"/304", nil)
	if resp.StatusCode != 304 || resp.Header.Get("Etag") != `"v1"` {
		t.Fatalf("304: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ := http.NewRequest("GET", e.base+"/hop", nil)
	req.Header.Set("User-Agent", "")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("X-Up-Hop") != "" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-Up-Kept") != "1" {
		t.Fatalf("response headers %v", resp.Header)
	}
	if string(b) != "|" {
		t.Fatalf("upstream saw User-Agent|Expect %q: the proxy added its own", b)
	}
}

func TestPlainStreamsAndKeepsTrailers(t *testing.T) {
	next := make(chan struct{})
	e := newPlainEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "second\n")
		w.Header().Set("X-Sum", "42")
	})
	resp, err := e.client.Get(e.base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The first piece arrives while the upstream still holds the second.
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first piece: %q %v", line, err)
	}
	close(next)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("rest: %q %v", rest, err)
	}
	if resp.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("trailer %v", resp.Trailer)
	}
}

func TestPlainCutResponseIsNotWhole(t *testing.T) {
	e := newPlainEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		} else {
			w.Header().Set("Content-Length", "100000")
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
		}
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	})
	for _, path := range []string{"/length", "/chunked"} {
		resp, err := e.client.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("%s: the agent read a cut response to its end without an error", path)
		}
		rec := e.rec.wait(t, func(r Record) bool { return strings.HasPrefix(r.Error, "copying the response") })
		e.rec.mu.Lock()
		e.rec.recs = nil
		e.rec.mu.Unlock()
		if rec.Status != 200 || rec.Decision != Allowed {
			t.Fatalf("%s: log record %+v", path, rec)
		}
	}
}

func TestPlainUpgradeGoesThrough(t *testing.T) {
	e := newPlainEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", 400)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo "+line)
	})
	c, err := net.Dial("tcp", e.proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	host := strings.TrimPrefix(e.base, "http://")
	fmt.Fprintf(c, "GET %s/ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", e.base, host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo ping\n" {
		t.Fatalf("after the upgrade: %q %v", line, err)
	}
}
