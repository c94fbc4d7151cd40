package egress

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
)

// revealsValue is the agent's side: it looks for v in s as it is,
// URL-unescaped, JSON-unescaped, and base64-decoded at each of the four
// character offsets in either alphabet, and again in what those give. It
// knows nothing of how the scrub works.
func revealsValue(s, v string) bool { return reveals(s, v, 2) }

func reveals(s, v string, depth int) bool {
	texts := []string{s}
	if u, err := url.QueryUnescape(s); err == nil {
		texts = append(texts, u)
	}
	if u, err := url.PathUnescape(s); err == nil {
		texts = append(texts, u)
	}
	var j string
	if json.Unmarshal([]byte(`"`+s+`"`), &j) == nil {
		texts = append(texts, j)
	}
	for _, t := range texts {
		if strings.Contains(t, v) {
			return true
		}
	}
	if depth == 0 {
		return false
	}
	for _, t := range texts {
		norm := strings.NewReplacer("-", "+", "_", "/", "=", "").Replace(t)
		for _, run := range strings.FieldsFunc(norm, func(r rune) bool { return !isAlnum(byte(r)) && r != '+' && r != '/' || r > 127 }) {
			for o := 0; o < 4 && o < len(run); o++ {
				r := run[o:]
				if len(r)%4 == 1 {
					r = r[:len(r)-1]
				}
				dec, err := base64.RawStdEncoding.DecodeString(r)
				if err == nil && reveals(string(dec), v, depth-1) {
					return true
				}
			}
		}
	}
	return false
}

// Every base64 text that holds v at a byte offset ≡ k (mod 3) holds
// base64Core(v, k).
func TestBase64Core(t *testing.T) {
	v := "sk-ant-api03-Zz9_value+/"
	for n := range 8 {
		for _, tail := range []int{0, 1, 2, 3} {
			head, rest := make([]byte, n), make([]byte, tail)
			rand.Read(head)
			rand.Read(rest)
			text := string(head) + v + string(rest)
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
				core := base64Core(v, n%3, enc.WithPadding(base64.NoPadding))
				if len(core) < 4*len(v)/3-2 {
					t.Fatalf("offset %d: core %q is short", n, core)
				}
				if s := enc.EncodeToString([]byte(text)); !strings.Contains(s, core) {
					t.Errorf("offset %d, %d after: %q lacks %q", n, tail, s, core)
				}
			}
		}
	}
}

// scrubCases are the texts an upstream may send back, each holding the
// real value v in one encoding.
func scrubCases(v string) map[string]string {
	b64 := func(enc *base64.Encoding, s string) string { return enc.EncodeToString([]byte(s)) }
	cases := map[string]string{
		"raw":             v,
		"query escaped":   url.QueryEscape(v),
		"path escaped":    url.PathEscape(v),
		"lower hex":       regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(v), strings.ToLower),
		"json":            strings.Trim(string(must(json.Marshal(v))), `"`),
		"base64":          b64(base64.StdEncoding, v),
		"base64 url":      b64(base64.URLEncoding, v),
		"base64 raw":      b64(base64.RawStdEncoding, v),
		"base64 raw url":  b64(base64.RawURLEncoding, v),
		"Basic token":     "Basic " + b64(base64.StdEncoding, "x-access-token:"+v),
		"two values":      v + " and " + b64(base64.StdEncoding, v),
		"JSON web token":  b64(base64.RawURLEncoding, `{"alg":"none"}`) + "." + b64(base64.RawURLEncoding, `{"sub":"`+v+`"}`) + ".",
		"HTML-escaped js": strings.Trim(string(must(json.Marshal("<"+v+">"))), `"`),
		"escaped base64":  url.QueryEscape(b64(base64.StdEncoding, "\xff"+v)),
		"escaped Basic":   "/login?auth=" + url.QueryEscape("Basic "+b64(base64.StdEncoding, "x-access-token:"+v)),
		"Basic in base64": b64(base64.StdEncoding, "Authorization: Basic "+b64(base64.StdEncoding, "x-access-token:"+v)),
		"Basic path":      "/echo/" + url.PathEscape(b64(base64.StdEncoding, "x-access-token:"+v)),
	}
	for n := range 6 {
		cases["base64 after "+strings.Repeat("x", n)] = b64(base64.StdEncoding, strings.Repeat("x", n)+v+"tail")
		cases["base64 url after "+strings.Repeat("x", n)] = b64(base64.RawURLEncoding, strings.Repeat("x", n)+v+"tail")
	}
	return cases
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestScrubberEveryForm(t *testing.T) {
	for _, v := range []string{
		"sk-ant-api03-REALvalue0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH_-xy",
		"p@ss/w+rd=&<odd> value~é",
		"12345678",
	} {
		s := &Secret{Name: "K", Value: v, Placeholder: "gsbx" + strings.Repeat("P", 40)}
		for name, form := range scrubCases(v) {
			text := "before " + form + " after"
			// In the Basic case the proxy knows the token it made.
			sc := newScrubber([]*Secret{s}).withBasic([][2]string{{"x-access-token:" + v, "x-access-token:" + s.Placeholder}})
			if !revealsValue(text, v) {
				t.Fatalf("%q %s: the test's own check does not see the value in %q", v, name, text)
			}
			if out := sc.pats.replace(text); revealsValue(out, v) {
				t.Errorf("%q %s: header value %q scrubbed to %q", v, name, text, out)
			}
			for _, size := range []int{1, 7, 64 << 10} {
				wrap := func(r *strings.Reader) *streamReplacer {
					if size == 1 {
						return newPatternReplacer(iotest.OneByteReader(r), sc.pats, nil)
					}
					return newPatternReplacer(r, sc.pats, nil)
				}
				out, err := readAllWith(wrap(strings.NewReader(text)), size)
				if err != nil || revealsValue(string(out), v) {
					t.Errorf("%q %s, reads of %d: body %q scrubbed to %q (%v)", v, name, size, text, out, err)
				}
			}
		}
		// Without the Basic token the value inside it is still replaced
		// (all but the few bits it shares a character with its
		// neighbours).
		other := "Basic " + base64.StdEncoding.EncodeToString([]byte("someone:"+v))
		if out := newScrubber([]*Secret{s}).pats.replace(other); revealsValue(out, v) {
			t.Errorf("%q: an unknown Basic token %q scrubbed to %q", v, other, out)
		}
	}
}

// The placeholder's form takes the value's: the agent decoding an echo
// gets its own placeholder back.
func TestScrubberPutsPlaceholderBack(t *testing.T) {
	s := &Secret{Name: "K", Value: "sk-REAL-value/with+odd=chars", Placeholder: "sk-gsbxPLACEHOLDERplaceholder0123"}
	sc := newScrubber([]*Secret{s}).withBasic([][2]string{{"u:" + s.Value, "u:" + s.Placeholder}})
	for _, tc := range []struct{ in, want string }{
		{s.Value, s.Placeholder},
		{url.QueryEscape(s.Value), s.Placeholder},
		{base64.StdEncoding.EncodeToString([]byte(s.Value)), base64.StdEncoding.EncodeToString([]byte(s.Placeholder))},
		{base64.RawURLEncoding.EncodeToString([]byte(s.Value)), base64.RawURLEncoding.EncodeToString([]byte(s.Placeholder))},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+s.Value)), "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+s.Placeholder))},
		{"nothing here", "nothing here"},
	} {
		if got := sc.pats.replace(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScrubHeaderNamesAndValues(t *testing.T) {
	s := &Secret{Name: "K", Value: "sk-ant-api03-SecretValue0123456789", Placeholder: "sk-ant-api03-gsbxPLACEHOLDER012345"}
	sc := newScrubber([]*Secret{s})
	h := http.Header{}
	h.Set("X-Echo", "key="+s.Value)
	h["X-"+http.CanonicalHeaderKey(s.Value)] = []string{"1"}      // as Go's client writes names
	h["x-b64-"+strings.ToLower(s.Value)] = []string{s.Value, "2"} // as HTTP/2 does
	h.Set("X-B64", base64.StdEncoding.EncodeToString([]byte("u:"+s.Value)))
	sc.header(h)
	for k, vs := range h {
		if strings.Contains(strings.ToLower(k), strings.ToLower(s.Value)) || revealsValue(strings.Join(vs, " "), s.Value) {
			t.Errorf("%s: %q", k, vs)
		}
	}
	if h.Get("X-Echo") != "key="+s.Placeholder || len(h) != 4 {
		t.Errorf("scrubbed header %v", h)
	}
}

func TestPatterns(t *testing.T) {
	ps := newPatterns([][]byte{[]byte("abcdefgh"), []byte("xabcdefghy"), []byte("+/+/"), []byte("defghijk")},
		[][]byte{[]byte("1"), []byte("2"), []byte("3"), []byte("4")})
	if len(ps.anchors) != 3 {
		t.Errorf("%d anchors: the longer pattern should share the shorter one's", len(ps.anchors))
	}
	for _, tc := range []struct{ in, want string }{
		{"abcdefgh", "1"},
		{"xabcdefghy", "2"},      // it starts first
		{"xabcdefghz", "x1z"},    // only the shorter one is there
		{"abcdefghijk", "1ijk"},  // the first to start wins
		{"zdefghijk+/+/", "z43"}, // an anchor of its own for a pattern without letters
		{"abcdefg", "abcdefg"},
	} {
		if got := ps.replace(tc.in); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
	same := newPatterns([][]byte{[]byte("abcdefgh"), []byte("abcdefghij")}, [][]byte{[]byte("1"), []byte("2")})
	if got := same.replace("abcdefghij"); got != "2" {
		t.Errorf("two starting at one place: %q, want the longer", got)
	}
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"zzz", 0}, {"zzxab", 3}, {"zzxabcdefgh", 9}, {"zz+/+", 3}, {"abcdefg", 7}, {"defghij", 7},
	} {
		if got := ps.partialSuffix([]byte(tc.in)); got != tc.want {
			t.Errorf("partialSuffix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A gzip stream is decoded whatever its pieces.
func TestDecodeBody(t *testing.T) {
	var z bytes.Buffer
	gz := gzip.NewWriter(&z)
	gz.Write([]byte("hello SECRET"))
	gz.Close()
	for _, tc := range []struct {
		enc, body, want string
		refused         bool
	}{
		{"gzip", z.String(), "hello SECRET", false},
		{"x-gzip", z.String(), "hello SECRET", false},
		{"identity", "plain", "plain", false},
		{"", "plain", "plain", false},
		{"br", "x", "", true},
		{"gzip, br", "x", "", true},
	} {
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: readCloser{strings.NewReader(tc.body), http.NoBody},
			ContentLength: int64(len(tc.body)), Request: &http.Request{Method: "GET"}}
		resp.Header.Set("Content-Encoding", tc.enc)
		r, err := decodeBody(resp)
		if tc.refused {
			if _, ok := err.(*refusedResponse); !ok {
				t.Errorf("%s: %v, want a refusal", tc.enc, err)
			}
			continue
		}
		got, err := readAllWith(iotest.OneByteReader(r), 3)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q %v", tc.enc, got, err)
		}
		if tc.enc != "" && tc.enc != "identity" && (resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != -1) {
			t.Errorf("%s: header %v", tc.enc, resp.Header)
		}
	}
}

// echoHandler is a careless upstream: it sends the credential it
// received back in the way the path names.
func echoHandler(reached *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		echo := r.Header.Get("X-Api-Key") + " " + r.Header.Get("Authorization")
		w.Header().Set("X-Saw-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		switch strings.TrimPrefix(r.URL.Path, "/echo/") {
		case "gzip", "x-gzip", "deflate", "br":
			enc := strings.TrimPrefix(r.URL.Path, "/echo/")
			w.Header().Set("Content-Encoding", enc)
			if r.Header.Get("Range") != "" {
				w.WriteHeader(http.StatusPartialContent)
			}
			var zw io.WriteCloser = nopWriteCloser{w}
			switch enc {
			case "gzip", "x-gzip":
				zw = gzip.NewWriter(w)
			case "deflate":
				zw = zlib.NewWriter(w)
			}
			io.WriteString(zw, "echo "+echo)
			zw.Close()
		case "trailer":
			w.Header().Set("Trailer", "X-Echo")
			io.WriteString(w, "see the trailers\n")
			w.Header().Set("X-Echo", echo)
			w.Header().Set(http.TrailerPrefix+"X-Late", base64.StdEncoding.EncodeToString([]byte(echo)))
		case "103":
			w.Header().Set("Link", "</style.css?k="+url.QueryEscape(echo)+">; rel=preload")
			w.Header().Set("X-Echo", echo)
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			w.Header().Del("X-Echo")
			io.WriteString(w, "ok\n")
		case "b64":
			for n := range 3 {
				fmt.Fprintf(w, "%s %s\n", base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", n)+echo)),
					base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("y", n)+echo)))
			}
		case "name":
			w.Header().Set("X-"+strings.Fields(echo)[0], "1")
		case "101", "bad":
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer c.Close()
			if r.URL.Path == "/echo/101" {
				fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-Websocket-Protocol: %s\r\n\r\n%s\n", echo, echo)
			} else {
				fmt.Fprintf(brw, "HTTP/1.1 200 OK\r\nX-Fine: 1\r\n%s\r\n\r\n", echo)
			}
			brw.Flush()
		default:
			fmt.Fprintf(w, "echo %s\n", echo)
		}
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// scrubEnv is a proxy with the secret API_KEY bound to echo.test, the
// careless upstream there, and an agent's client.
type scrubEnv struct {
	secret  Secret
	base    string // https://echo.test:port
	client  *http.Client
	rec     *recorder
	reached atomic.Int32
}

func newScrubEnv(t *testing.T, h2 bool) *scrubEnv {
	e := &scrubEnv{rec: newRecorder()}
	pki := newTestPKI(t, "echo.test")
	srv := httptest.NewUnstartedServer(echoHandler(&e.reached))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}}
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	e.base = "https://echo.test:" + port
	var err error
	if e.secret, err = NewSecret("API_KEY", []string{"echo.test:" + port}, realAPIKey); err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA([]string{"echo.test"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{
		Policy:   &Policy{Allow: MustParseEntries(FromUser, "echo.test:"+port, "127.0.0.1:"+port)},
		Secrets:  []Secret{e.secret},
		CA:       ca,
		Resolver: newResolver("echo.test", "127.0.0.1"), UpstreamRoots: pki.pool,
		Log: NewLog(e.rec, []Secret{e.secret}),
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := pki.pool.Clone()
	pool.AddCert(ca.Cert)
	tr := &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: serve(t, p)}),
		TLSClientConfig:    &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true, // the agent sees what the proxy sends
	}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

// get makes a request as the agent would, with the placeholder in
// X-Api-Key (or Basic credentials), and returns the status and all the
// agent saw: informational responses, header names and values, the body
// (gunzipped if it still is gzip), the trailers.
func (e *scrubEnv) get(t *testing.T, path string, hdr ...string) (int, string) {
	t.Helper()
	var seen strings.Builder
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		fmt.Fprintf(&seen, "%d %v\n", code, h)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", e.base+path, nil)
	req.Header.Set("X-Api-Key", e.secret.Placeholder)
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, _ = io.ReadAll(zr)
		}
	}
	fmt.Fprintf(&seen, "%d %v\n%s\ntrailers %v\n", resp.StatusCode, resp.Header, body, resp.Trailer)
	return resp.StatusCode, seen.String()
}

// An upstream echoing the real value in every way HTTP allows: the agent
// sees only the placeholder, over HTTP/1.1 and HTTP/2.
func TestProxyScrubsEchoes(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		e := newScrubEnv(t, h2)
		ph := e.secret.Placeholder
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+ph))
		for _, tc := range []struct {
			path string
			hdr  []string
			want []string // in what the agent saw
		}{
			{"/echo/plain", nil, []string{"echo " + ph}},
			{"/echo/gzip", nil, []string{"echo " + ph, "X-Saw-Accept-Encoding:[gzip]"}},
			{"/echo/x-gzip", []string{"Accept-Encoding", "br"}, []string{"echo " + ph, "X-Saw-Accept-Encoding:[gzip]"}},
			{"/echo/deflate", nil, []string{"echo " + ph}},
			{"/echo/trailer", nil, []string{"see the trailers", "X-Echo:[" + ph}},
			{"/echo/103", nil, []string{"103 ", "X-Echo:[" + ph, "ok"}},
			{"/echo/basic", []string{"Authorization", basic}, []string{basic}},
			{"/echo/b64", []string{"Authorization", basic}, nil},
			{"/echo/name", nil, []string{"X-Sk-Ant-Api03-Gsbx"}},
		} {
			t.Run(fmt.Sprintf("h2=%v %s", h2, tc.path), func(t *testing.T) {
				status, seen := e.get(t, tc.path, tc.hdr...)
				if status != 200 || revealsValue(seen, realAPIKey) {
					t.Fatalf("status %d, the agent saw:\n%s", status, seen)
				}
				for _, w := range tc.want {
					if !strings.Contains(seen, w) {
						t.Errorf("the agent did not see %q:\n%s", w, seen)
					}
				}
				if strings.Contains(seen, "Content-Encoding") {
					t.Errorf("the body is passed on decoded, without its coding:\n%s", seen)
				}
			})
		}
		if h2 {
			continue
		}
		// The late trailer (not announced) is scrubbed too.
		if _, seen := e.get(t, "/echo/trailer"); !strings.Contains(seen, "X-Late:[") {
			t.Errorf("the late trailer did not arrive:\n%s", seen)
		}
	}
}

// What the proxy cannot scrub it refuses: a coding it cannot decode, a
// part of an encoded body, a switch of protocols asked for or not; and
// the text of an error quoting the host's answer is scrubbed.
func TestProxyRefusesWhatItCannotScrub(t *testing.T) {
	e := newScrubEnv(t, false)
	for _, tc := range []struct {
		path   string
		hdr    []string
		status int
		want   string
	}{
		{"/echo/br", nil, 502, `content encoding "br"`},
		{"/echo/gzip", []string{"Range", "bytes=0-"}, 502, "a part (206) of an encoded body"},
		{"/echo/ws", []string{"Connection", "Upgrade", "Upgrade", "websocket"}, 501, "does not switch protocols"},
		{"/echo/101", nil, 502, "the host switched protocols"},
		{"/echo/bad", nil, 502, "malformed"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := e.reached.Load()
			status, seen := e.get(t, tc.path, tc.hdr...)
			if status != tc.status || !strings.Contains(seen, tc.want) || revealsValue(seen, realAPIKey) {
				t.Fatalf("status %d, want %d and %q; the agent saw:\n%s", status, tc.status, tc.want, seen)
			}
			if tc.status == 501 && e.reached.Load() != before {
				t.Error("the upgrade request reached the upstream")
			}
			rec := e.rec.wait(t, func(r Record) bool { return r.Status == tc.status && r.Method == "GET" && r.Error != "" })
			if rec.Decision != Allowed || strings.Contains(rec.Error, realAPIKey) {
				t.Errorf("log record %+v", rec)
			}
			e.rec.mu.Lock()
			e.rec.recs = nil
			e.rec.mu.Unlock()
		})
	}
}

// BenchmarkScrub: the scrub's own cost on a body that holds no value
// (pseudo-random bytes, 16 KiB reads as TLS records come), for a value
// alone and with a Basic token the proxy made; "raw" is the raw value
// only, as the scrub looked for before it knew the other forms.
func BenchmarkScrub(b *testing.B) {
	s := &Secret{Name: "K", Value: realAPIKey, Placeholder: "sk-ant-api03-gsbx" + strings.Repeat("P", 91)}
	body := make([]byte, 16<<10)
	rand.Read(body)
	for name, sc := range map[string]*scrubber{
		"raw":   makeScrubber([][2]string{{s.Value, s.Placeholder}}),
		"value": newScrubber([]*Secret{s}),
		"basic": newScrubber([]*Secret{s}).withBasic([][2]string{{"x-access-token:" + s.Value, "x-access-token:" + s.Placeholder}}),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if sc.pats.containsAny(body) {
					b.Fatal("a match in random bytes")
				}
				sc.pats.partialSuffix(body)
			}
		})
	}
}
