package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress/sandboxca"
)

// recorder keeps the log's records for the test to wait on.
type recorder struct {
	mu   sync.Mutex
	cond *sync.Cond
	recs []Record
}

func newRecorder() *recorder {
	r := &recorder{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *recorder) Write(p []byte) (int, error) {
	var rec Record
	if err := json.Unmarshal(p, &rec); err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	r.cond.Broadcast()
	return len(p), nil
}

// wait returns the first record that match accepts, waiting for it to be
// written (a tunnel's record is written when it closes).
func (r *recorder) wait(t *testing.T, match func(Record) bool) Record {
	t.Helper()
	timer := time.AfterFunc(5*time.Second, r.cond.Broadcast)
	defer timer.Stop()
	deadline := time.Now().Add(5 * time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for _, rec := range r.recs {
			if match(rec) {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such log record; have %+v", r.recs)
		}
		r.cond.Wait()
	}
}

func host(h string) func(Record) bool {
	return func(r Record) bool { return r.Host == h }
}

func hostKind(h, kind string) func(Record) bool {
	return func(r Record) bool { return r.Host == h && r.Kind == kind }
}

// seen is what a fake upstream received.
type seen struct {
	host   string
	header http.Header
	body   string
	proto  string
}

type testEnv struct {
	proxy    *Proxy
	proxyURL *url.URL
	logPath  string
	live     string // the proxy's live policy file
	rec      *recorder
	plain    *httptest.Server // http://plain.test:<port>
	secure   *httptest.Server // https://{api,other,tunnel}.test:<port>
	pki      *testPKI
	ca       *sandboxca.CA
	api      Secret // bound to api.test
	other    Secret // bound to other.test
	resolver *fakeResolver
	plainHP  string  // plain.test:<port>
	port     string  // the TLS upstream's port
	opts     Options // the proxy's

	mu   sync.Mutex
	reqs []seen
}

const (
	realAPIKey   = "sk-ant-api03-REALvalueOFtheAPIkeyTHATmustNEVERreachTHEagent0123456789abcdefghijklmnopqrstuvwxyzAA"
	realOtherTok = "ghp_REALotherTOKENthatMUSTstayOUTofTHEagent01"
)

func (e *testEnv) saw() []seen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]seen(nil), e.reqs...)
}

func (e *testEnv) lastSeen(t *testing.T) seen {
	t.Helper()
	s := e.saw()
	if len(s) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return s[len(s)-1]
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	e := &testEnv{rec: newRecorder()}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
			serveBytes(w, n)
			return
		}
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.reqs = append(e.reqs, seen{host: r.Host, header: r.Header.Clone(), body: string(body), proto: r.Proto})
		e.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/sse/") {
			serveSSE(w, r.URL.Query().Get("bytes"))
			return
		}
		// Echo the credential back, as a careless API might.
		w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, "hello from %s; key=%s", r.Host, r.Header.Get("X-Api-Key"))
	})
	e.plain = httptest.NewServer(record)
	t.Cleanup(e.plain.Close)
	e.pki = newTestPKI(t, "api.test", "other.test", "tunnel.test")
	e.secure = httptest.NewUnstartedServer(record)
	e.secure.TLS = &tls.Config{Certificates: []tls.Certificate{e.pki.server}}
	e.secure.EnableHTTP2 = true
	e.secure.StartTLS()
	t.Cleanup(e.secure.Close)

	_, plainPort, _ := net.SplitHostPort(e.plain.Listener.Addr().String())
	_, e.port, _ = net.SplitHostPort(e.secure.Listener.Addr().String())
	e.plainHP = "plain.test:" + plainPort

	var err error
	e.api, err = NewSecret("ANTHROPIC_API_KEY", []string{"api.test:" + e.port}, realAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	e.other, err = NewSecret("GH_TOKEN", []string{"other.test:" + e.port}, realOtherTok)
	if err != nil {
		t.Fatal(err)
	}
	e.ca, err = NewCA([]string{"api.test", "other.test"})
	if err != nil {
		t.Fatal(err)
	}
	policy := &Policy{
		Allow: MustParseEntries(FromUser,
			e.plainHP, "127.0.0.1:"+plainPort,
			"api.test:"+e.port, "other.test:"+e.port, "tunnel.test:"+e.port, "127.0.0.1:"+e.port,
			"*.example.com", "meta.test", "private.test:"+e.port,
		),
	}
	e.resolver = newResolver(
		"plain.test", "127.0.0.1",
		"api.test", "127.0.0.1",
		"other.test", "127.0.0.1",
		"tunnel.test", "127.0.0.1",
		"rebind.example.com", "10.0.0.5",
		"mixed.example.com", "169.254.169.254,127.0.0.1",
		"meta.test", "169.254.169.254",
		"private.test", "192.168.7.7",
		"denied.test", "93.184.216.34",
	)
	e.logPath = filepath.Join(t.TempDir(), "egress.log")
	f, err := os.OpenFile(e.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	e.live = filepath.Join(t.TempDir(), LiveFile)
	e.opts = Options{
		Policy:        policy,
		Live:          e.live,
		Secrets:       []Secret{e.api, e.other},
		CA:            e.ca,
		Resolver:      e.resolver,
		UpstreamRoots: e.pki.pool,
		Log:           NewLog(io.MultiWriter(f, e.rec), []Secret{e.api, e.other}),
		DialTimeout:   2 * time.Second,
	}
	e.proxy, err = New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	e.proxyURL = &url.URL{Scheme: "http", Host: serve(t, e.proxy)}
	return e
}

// serve serves p on a loopback port until the test ends, and returns the
// port's address.
func serve(t testing.TB, p *Proxy) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// serveBytes answers n bytes, for the benchmarks.
func serveBytes(w http.ResponseWriter, n string) {
	size, _ := strconv.Atoi(n)
	w.Header().Set("Content-Length", n)
	chunk := bytes.Repeat([]byte("a"), 256*1024)
	for size > 0 {
		k := min(size, len(chunk))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		size -= k
	}
}

// client goes through the proxy and trusts the sandbox's CA and the
// upstream test CA, as the agent's container would trust the system roots
// plus the sandbox's CA.
func (e *testEnv) client(t testing.TB, h2 bool) *http.Client {
	pool := e.pki.pool.Clone()
	pool.AddCert(e.ca.Cert)
	tr := &http.Transport{
		Proxy:             http.ProxyURL(e.proxyURL),
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func do(t *testing.T, c *http.Client, method, u string, body io.Reader, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// connectStatus sends a raw CONNECT and returns the proxy's status line.
func (e *testEnv) connectStatus(t *testing.T, authority string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", e.proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

func TestProxyPlainHTTP(t *testing.T) {
	e := newTestEnv(t)
	c := e.client(t, false)

	t.Run("allowed host answers", func(t *testing.T) {
		resp, body := do(t, c, "GET", "http://"+e.plainHP+"/hello", nil)
		if resp.StatusCode != 200 || !strings.Contains(body, "hello from "+e.plainHP) {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		rec := e.rec.wait(t, hostKind("plain.test", "http"))
		if rec.Decision != Allowed || rec.Status != 200 || rec.BytesDown == 0 || rec.Addr != "127.0.0.1" || rec.Method != "GET" {
			t.Fatalf("log record %+v", rec)
		}
	})

	t.Run("denied host gets 403 and is logged", func(t *testing.T) {
		resp, body := do(t, c, "GET", "http://denied.test/x", nil)
		if resp.StatusCode != 403 || !strings.Contains(body, "not in the allow list") || !strings.Contains(body, "--allow denied.test,") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		rec := e.rec.wait(t, host("denied.test"))
		if rec.Decision != Denied || rec.Port != 80 || rec.Kind != "http" {
			t.Fatalf("log record %+v", rec)
		}
		if e.resolver.asked("denied.test") != 0 {
			t.Error("a denied name was resolved")
		}
	})

	t.Run("IP literal refused unless listed", func(t *testing.T) {
		resp, body := do(t, c, "GET", "http://192.0.2.1/", nil)
		if resp.StatusCode != 403 || !strings.Contains(body, "IP address not in the allow list") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		e.rec.wait(t, func(r Record) bool { return r.Host == "192.0.2.1" && r.Decision == Denied })
	})

	t.Run("hop-by-hop headers and Proxy-Authorization stripped", func(t *testing.T) {
		resp, _ := do(t, c, "GET", "http://"+e.plainHP+"/hop", nil,
			"Proxy-Authorization", "Basic dXNlcjpwYXNz", "Connection", "X-Hop", "X-Hop", "1", "X-Kept", "1")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		got := e.lastSeen(t)
		if got.header.Get("Proxy-Authorization") != "" || got.header.Get("X-Hop") != "" || got.header.Get("X-Kept") != "1" {
			t.Fatalf("upstream headers %v", got.header)
		}
		if got.header.Get("X-Forwarded-For") != "" {
			t.Error("the proxy added X-Forwarded-For")
		}
	})

	t.Run("origin-form request refused", func(t *testing.T) {
		resp, err := http.Get(e.proxyURL.String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func TestProxyConnect(t *testing.T) {
	e := newTestEnv(t)
	c := e.client(t, false)

	t.Run("tunnel to an allowed host", func(t *testing.T) {
		resp, body := do(t, c, "GET", "https://tunnel.test:"+e.port+"/t", nil, "X-Api-Key", e.api.Placeholder)
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "hello from tunnel.test") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		// Not intercepted: the upstream's own certificate, the placeholder
		// untouched (it is useless there).
		if resp.TLS.PeerCertificates[0].Issuer.CommonName != "upstream test CA" {
			t.Fatalf("issuer %q", resp.TLS.PeerCertificates[0].Issuer.CommonName)
		}
		if got := e.lastSeen(t).header.Get("X-Api-Key"); got != e.api.Placeholder {
			t.Fatalf("upstream got %q", got)
		}
		c.CloseIdleConnections()
		rec := e.rec.wait(t, hostKind("tunnel.test", "connect"))
		if rec.Decision != Allowed || rec.Status != 200 || rec.BytesUp == 0 || rec.BytesDown == 0 {
			t.Fatalf("log record %+v", rec)
		}
	})

	t.Run("denied host", func(t *testing.T) {
		status, body := e.connectStatus(t, "denied.test:443")
		if status != 403 || !strings.Contains(body, "not in the allow list") {
			t.Fatalf("got %d %q", status, body)
		}
		e.rec.wait(t, func(r Record) bool { return r.Host == "denied.test" && r.Kind == "connect" && r.Decision == Denied })
	})

	t.Run("allowed name on another port", func(t *testing.T) {
		status, body := e.connectStatus(t, "tunnel.test:443")
		if status != 403 || !strings.Contains(body, "--allow tunnel.test,") {
			t.Fatalf("got %d %q", status, body)
		}
		status, body = e.connectStatus(t, "tunnel.test:8443")
		if status != 403 || !strings.Contains(body, "--allow tunnel.test:8443,") {
			t.Fatalf("got %d %q", status, body)
		}
	})

	for _, target := range []string{"192.0.2.1:443", "[2001:db8::1]:443", "169.254.169.254:80", "127.0.0.1:22"} {
		t.Run("IP literal "+target, func(t *testing.T) {
			status, body := e.connectStatus(t, target)
			if status != 403 || !strings.Contains(body, "IP address not in the allow list") {
				t.Fatalf("got %d %q", status, body)
			}
		})
	}

	t.Run("name resolving to a private address through a wildcard", func(t *testing.T) {
		status, body := e.connectStatus(t, "rebind.example.com:443")
		if status != 403 || !strings.Contains(body, "10.0.0.5 (private)") {
			t.Fatalf("got %d %q", status, body)
		}
		rec := e.rec.wait(t, host("rebind.example.com"))
		if rec.Decision != Denied || rec.Addr != "" {
			t.Fatalf("log record %+v", rec)
		}
	})

	t.Run("exact name resolving to the metadata address", func(t *testing.T) {
		status, body := e.connectStatus(t, "meta.test:443")
		if status != 403 || !strings.Contains(body, "169.254.169.254 (local)") {
			t.Fatalf("got %d %q", status, body)
		}
	})

	t.Run("only vetted addresses are dialled", func(t *testing.T) {
		// A wildcard name answering with the metadata address and
		// loopback: both refused, nothing dialled.
		status, body := e.connectStatus(t, "mixed.example.com:443")
		if status != 403 || !strings.Contains(body, "169.254.169.254 (local), 127.0.0.1 (local)") {
			t.Fatalf("got %d %q", status, body)
		}
	})

	t.Run("placeholder in the host name", func(t *testing.T) {
		// A DNS lookup would carry it out.
		status, body := e.connectStatus(t, e.other.Placeholder+".x.example.com:443")
		if status != 403 || !strings.Contains(body, "placeholder of GH_TOKEN in host name") {
			t.Fatalf("got %d %q", status, body)
		}
		if e.resolver.asked(strings.ToLower(e.other.Placeholder)+".x.example.com") != 0 {
			t.Fatal("resolved")
		}
	})

	t.Run("unknown name", func(t *testing.T) {
		status, body := e.connectStatus(t, "nowhere.example.com:443")
		if status != 502 || !strings.Contains(body, "no such host") {
			t.Fatalf("got %d %q", status, body)
		}
	})
}

func TestProxyCredentialBroker(t *testing.T) {
	e := newTestEnv(t)
	for _, h2 := range []bool{false, true} {
		c := e.client(t, h2)
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name+" real value swapped in on the bound host", func(t *testing.T) {
			resp, body := do(t, c, "POST", "https://api.test:"+e.port+"/v1/messages", strings.NewReader(`{"prompt":"hi"}`),
				"X-Api-Key", e.api.Placeholder, "Authorization", "Bearer "+e.api.Placeholder)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %q", resp.StatusCode, body)
			}
			if resp.TLS.PeerCertificates[0].Issuer.CommonName != e.ca.Cert.Subject.CommonName {
				t.Fatalf("not intercepted: issuer %q", resp.TLS.PeerCertificates[0].Issuer.CommonName)
			}
			wantProto := map[bool]int{false: 1, true: 2}[h2]
			if resp.ProtoMajor != wantProto {
				t.Fatalf("agent side spoke %s", resp.Proto)
			}
			got := e.lastSeen(t)
			if got.header.Get("X-Api-Key") != realAPIKey || got.header.Get("Authorization") != "Bearer "+realAPIKey {
				t.Fatalf("upstream got %v", got.header)
			}
			if got.body != `{"prompt":"hi"}` {
				t.Fatalf("upstream body %q", got.body)
			}
			if got.proto != "HTTP/2.0" {
				t.Fatalf("upstream side spoke %s, want HTTP/2.0 (the upstream offers it)", got.proto)
			}
			// The upstream echoed the real value; the agent sees only the
			// placeholder.
			if strings.Contains(body, realAPIKey) || resp.Header.Get("X-Echo") != e.api.Placeholder || !strings.Contains(body, "key="+e.api.Placeholder) {
				t.Fatalf("echo not scrubbed: %q %q", resp.Header.Get("X-Echo"), body)
			}
			rec := e.rec.wait(t, func(r Record) bool { return r.Kind == "intercept" && r.Host == "api.test" && r.Method == "POST" })
			if rec.Decision != Allowed || rec.Secret != "ANTHROPIC_API_KEY" || rec.Status != 200 || rec.BytesUp != int64(len(`{"prompt":"hi"}`)) {
				t.Fatalf("log record %+v", rec)
			}
		})
	}
	c := e.client(t, false)

	t.Run("Basic credentials", func(t *testing.T) {
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+e.other.Placeholder))
		resp, _ := do(t, c, "GET", "https://other.test:"+e.port+"/repo.git/info/refs", nil, "Authorization", basic)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+realOtherTok))
		if got := e.lastSeen(t).header.Get("Authorization"); got != want {
			t.Fatalf("upstream got %q", got)
		}
	})

	leaks := []struct {
		name, method, url string
		body              string
		hdr               []string
		secret            string
	}{
		{"to another intercepted host", "GET", "https://other.test:%s/", "", []string{"X-Api-Key", "%A"}, "ANTHROPIC_API_KEY"},
		{"to a plain HTTP host", "GET", "http://%P/", "", []string{"Authorization", "Bearer %A"}, "ANTHROPIC_API_KEY"},
		{"to the bound host over plain HTTP", "GET", "http://api.test:%s/", "", []string{"X-Api-Key", "%A"}, "ANTHROPIC_API_KEY"},
		{"to a denied host", "GET", "http://denied.test/", "", []string{"X-Api-Key", "%A"}, "ANTHROPIC_API_KEY"},
		{"in the URL", "GET", "http://%P/?key=%A", "", nil, "ANTHROPIC_API_KEY"},
		{"in Basic credentials", "GET", "http://%P/", "", []string{"Authorization", "%B"}, "GH_TOKEN"},
		{"in a plain HTTP body", "POST", "http://%P/upload", "data=%A&more", nil, "ANTHROPIC_API_KEY"},
		{"in an intercepted body", "POST", "https://api.test:%s/v1/messages", `{"steal":"%O"}`, []string{"X-Api-Key", "%A"}, "GH_TOKEN"},
	}
	for _, tc := range leaks {
		t.Run("leak "+tc.name, func(t *testing.T) {
			fill := func(s string) string {
				s = strings.ReplaceAll(s, "%s", e.port)
				s = strings.ReplaceAll(s, "%P", e.plainHP)
				s = strings.ReplaceAll(s, "%A", e.api.Placeholder)
				s = strings.ReplaceAll(s, "%O", e.other.Placeholder)
				return strings.ReplaceAll(s, "%B", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+e.other.Placeholder)))
			}
			before := len(e.saw())
			var body io.Reader
			if tc.body != "" {
				// Larger than one read, so the placeholder is in the middle
				// of the stream.
				body = strings.NewReader(strings.Repeat("x", 100_000) + fill(tc.body))
			}
			var hdr []string
			for _, h := range tc.hdr {
				hdr = append(hdr, fill(h))
			}
			u := fill(tc.url)
			resp, text := do(t, c, tc.method, u, body, hdr...)
			if resp.StatusCode != 403 || !strings.Contains(text, "placeholder of "+tc.secret) {
				t.Fatalf("got %d %q", resp.StatusCode, text)
			}
			for _, s := range e.saw()[before:] {
				if strings.Contains(s.body, e.api.Placeholder) || strings.Contains(s.body, e.other.Placeholder) {
					t.Fatal("the upstream received a placeholder")
				}
				if s.host != "api.test:"+e.port && strings.Contains(fmt.Sprint(s.header), realAPIKey) {
					t.Fatalf("%s received the real value", s.host)
				}
			}
			e.rec.wait(t, func(r Record) bool {
				return r.Decision == Leak && r.Secret == tc.secret && r.Time.After(time.Now().Add(-5*time.Second))
			})
		})
	}

	t.Run("Host header must match the tunnel", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "https://api.test:"+e.port+"/", nil)
		req.Host = "evil.test"
		req.Header.Set("X-Api-Key", e.api.Placeholder)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})

	t.Run("the log never holds a real value", func(t *testing.T) {
		c.CloseIdleConnections()
		log := readFile(t, e.logPath)
		if strings.Contains(log, realAPIKey) || strings.Contains(log, realOtherTok) {
			t.Fatal("a real value is in the log")
		}
		if !strings.Contains(log, `"decision":"leak"`) {
			t.Fatal("no leak in the log")
		}
	})
}

// An agent that does not trust the sandbox's CA (or pins its own) cannot
// talk to an intercepted host, and the failure is logged.
func TestProxyInterceptUntrusted(t *testing.T) {
	e := newTestEnv(t)
	tr := &http.Transport{Proxy: http.ProxyURL(e.proxyURL), TLSClientConfig: &tls.Config{RootCAs: e.pki.pool}}
	defer tr.CloseIdleConnections()
	_, err := (&http.Client{Transport: tr}).Get("https://api.test:" + e.port + "/")
	if err == nil {
		t.Fatal("an agent that does not trust the CA got through")
	}
	rec := e.rec.wait(t, hostKind("api.test", "intercept"))
	if !strings.Contains(rec.Error, "TLS handshake with the agent failed") {
		t.Fatalf("log record %+v", rec)
	}
	if len(e.saw()) != 0 {
		t.Fatal("the upstream was reached")
	}
}

// An upstream whose certificate the proxy cannot verify is not reached.
func TestProxyInterceptVerifiesUpstream(t *testing.T) {
	e := newTestEnv(t)
	e.proxy.transport[1].TLSClientConfig.RootCAs = newTestPKI(t, "x.test").pool
	resp, body := do(t, e.client(t, false), "GET", "https://api.test:"+e.port+"/", nil, "X-Api-Key", e.api.Placeholder)
	if resp.StatusCode != 502 || !strings.Contains(body, "certificate") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if len(e.saw()) != 0 {
		t.Fatal("the upstream was reached")
	}
}

// A tunnel passes a half-close on: the agent stops sending, the upstream
// still answers.
func TestTunnelHalfClose(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c) // until the agent's half-close
		fmt.Fprintf(c, "got %d bytes", len(got))
	}()
	_, port, _ := net.SplitHostPort(up.Addr().String())
	p, err := New(Options{
		Policy:   &Policy{Allow: MustParseEntries(FromFlag, "echo.test:"+port, "127.0.0.1:"+port)},
		Resolver: newResolver("echo.test", "127.0.0.1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT echo.test:%s HTTP/1.1\r\nHost: echo.test:%s\r\n\r\n", port, port)
	payload := bytes.Repeat([]byte("z"), 300_000)
	c.Write(payload) // right behind the CONNECT, before its answer
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connect: %v %v", resp, err)
	}
	c.(*net.TCPConn).CloseWrite()
	answer, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(answer) != "got 300000 bytes" {
		t.Fatalf("answer %q", answer)
	}
}

// A tunnel nothing crosses is closed after the idle timeout; Serve's end
// closes the rest.
func TestTunnelIdleAndShutdown(t *testing.T) {
	up, _ := net.Listen("tcp", "127.0.0.1:0")
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(up.Addr().String())
	open := func(idle time.Duration) (net.Conn, context.CancelFunc, chan error) {
		p, err := New(Options{
			Policy:      &Policy{Allow: MustParseEntries(FromFlag, "127.0.0.1:"+port)},
			IdleTimeout: idle,
		})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx, l) }()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: x\r\n\r\n", port)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connect: %v %v", resp, err)
		}
		return c, cancel, done
	}

	c, cancel, done := open(300 * time.Millisecond)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle tunnel: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
	cancel()
	<-done
	c.Close()

	c, cancel, done = open(time.Hour)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after shutdown: %v", err)
	}
	c.Close()
}
