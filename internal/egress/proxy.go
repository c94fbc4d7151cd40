package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = 10 * time.Minute
	readHeaderTimeout  = 30 * time.Second
)

// Options configure a Proxy.
type Options struct {
	// Policy decides what may be reached.
	Policy *Policy
	// Secrets are swapped in for their placeholders on their hosts.
	Secrets []Secret
	// CA signs the certificates shown for intercepted hosts; required
	// when there are secrets.
	CA *CA
	// Resolver resolves host names; nil is the system's.
	Resolver Resolver
	// UpstreamRoots verify upstream servers of intercepted hosts; nil is
	// the system roots.
	UpstreamRoots *x509.CertPool
	// Log receives a record per decision; nil logs nothing.
	Log *Log
	// Errors receives the HTTP server's own error messages; nil drops them.
	Errors io.Writer
	// DialTimeout and IdleTimeout; zero means the defaults.
	DialTimeout time.Duration
	IdleTimeout time.Duration
}

// Proxy is the egress proxy: an http.Handler serving CONNECT and plain
// HTTP requests in absolute form.
type Proxy struct {
	policy  *Policy
	secrets []*Secret
	ca      *CA
	log     *Log
	errLog  *log.Logger
	dialer  *dialer
	idle    time.Duration
	timeout time.Duration

	buffers   *bufferPool
	pool      connPool               // plain HTTP's upstream connections
	plain     *httputil.ReverseProxy // plain HTTP upgrades (WebSocket)
	intercept *httputil.ReverseProxy
	transport []*http.Transport

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// New makes a proxy.
func New(o Options) (*Proxy, error) {
	if o.Policy == nil {
		return nil, errors.New("egress proxy: no policy")
	}
	p := &Proxy{
		policy:  o.Policy,
		ca:      o.CA,
		log:     o.Log,
		idle:    o.IdleTimeout,
		timeout: o.DialTimeout,
		conns:   map[net.Conn]struct{}{},
	}
	if p.idle <= 0 {
		p.idle = DefaultIdleTimeout
	}
	if p.timeout <= 0 {
		p.timeout = DefaultDialTimeout
	}
	w := o.Errors
	if w == nil {
		w = io.Discard
	}
	p.errLog = log.New(w, "git sandbox proxy: ", log.LstdFlags)
	seen := map[string]bool{}
	for i := range o.Secrets {
		s := o.Secrets[i]
		if err := s.check(); err != nil {
			return nil, err
		}
		if seen[s.Placeholder] || seen["name "+s.Name] {
			return nil, fmt.Errorf("secret %s: name or placeholder used twice", s.Name)
		}
		seen[s.Placeholder], seen["name "+s.Name] = true, true
		p.secrets = append(p.secrets, &s)
	}
	if len(p.secrets) > 0 && p.ca == nil {
		return nil, errors.New("egress proxy: secrets need a CA")
	}
	res := o.Resolver
	if res == nil {
		res = &net.Resolver{PreferGo: true}
	}
	p.dialer = &dialer{policy: p.policy, resolver: res, timeout: p.timeout}
	p.dialer.net.KeepAlive = 30 * time.Second

	p.buffers = &bufferPool{}
	plainT := p.newTransport(HTTP, nil)
	tlsT := p.newTransport(Connect, &tls.Config{RootCAs: o.UpstreamRoots, MinVersion: tls.VersionTLS12})
	p.transport = []*http.Transport{plainT, tlsT}
	p.plain = p.reverseProxy(plainT, "http")
	p.intercept = p.reverseProxy(tlsT, "https")
	return p, nil
}

func (p *Proxy) newTransport(kind Kind, tc *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never the environment's proxy
		DialContext:           p.dialer.dialFunc(kind),
		TLSClientConfig:       tc,
		ForceAttemptHTTP2:     tc != nil,
		TLSHandshakeTimeout:   p.timeout,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ReadBufferSize:        64 << 10,
		WriteBufferSize:       64 << 10,
	}
}

// bufferPool gives the reverse proxies larger copy buffers than their
// default 32 KiB: fewer system calls on big downloads.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 256<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// Serve serves on l until ctx is done, then closes every connection and
// returns nil; it returns an error only when l fails.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       p.idle,
		ErrorLog:          p.errLog,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		p.closeAll()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		cancel()
		<-errc
	}
	p.closeAll()
	p.pool.close()
	for _, t := range p.transport {
		t.CloseIdleConnections()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// track keeps hijacked and upstream connections so that Serve's end
// closes them; it refuses once Serve has ended.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		if c != nil {
			p.conns[c] = struct{}{}
		}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// ServeHTTP serves one request made to the proxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.forward(w, r)
	case r.URL.IsAbs():
		http.Error(w, "git sandbox egress proxy: only http:// URLs are forwarded; https:// goes through CONNECT", http.StatusBadRequest)
	default:
		http.Error(w, "git sandbox egress proxy: this is a proxy; send requests through it (HTTP_PROXY, HTTPS_PROXY)", http.StatusBadRequest)
	}
}

// refuse answers a refused request and logs it.
func (p *Proxy) refuse(w http.ResponseWriter, rec *Record, start time.Time, status int, decision, reason string) {
	rec.Decision, rec.Reason, rec.Status = decision, reason, status
	p.write(rec, start)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	dest := rec.Host
	if rec.Port != 0 {
		dest = net.JoinHostPort(rec.Host, fmt.Sprint(rec.Port))
	}
	switch decision {
	case Leak:
		fmt.Fprintf(w, "git sandbox egress proxy: refused: %s: this credential may not be sent to %s\n", reason, dest)
	case Denied:
		fmt.Fprintf(w, "git sandbox egress proxy: %s denied: %s\n", dest, reason)
		if status == http.StatusForbidden {
			fmt.Fprintf(w, "The user can allow it: git sandbox start --allow %s, or allow = [...] in their config.\n", allowHint(rec))
		}
	default:
		fmt.Fprintf(w, "git sandbox egress proxy: %s: %s\n", dest, reason)
	}
}

// allowHint is the entry that would allow rec's destination: the bare
// host when the port is the default one.
func allowHint(rec *Record) string {
	kind := Connect
	if rec.Kind == "http" {
		kind = HTTP
	}
	e := Entry{Host: rec.Host, Port: rec.Port}
	if a, err := netip.ParseAddr(rec.Host); err == nil {
		e = Entry{Addr: a, Port: rec.Port}
	}
	if e.Port == kind.DefaultPort() {
		e.Port = 0
	}
	return e.String()
}

func (p *Proxy) write(rec *Record, start time.Time) {
	rec.Time = start.UTC()
	rec.Duration = float64(time.Since(start).Microseconds()) / 1000
	p.log.Write(*rec)
}

// clip shortens what the agent chose before it is logged as it was sent
// (a host name that did not parse).
func clip(s string) string {
	if len(s) > 255 {
		return s[:255] + "…"
	}
	return s
}

// denial turns a dial error into a status, decision and reason.
func denial(err error) (int, string, string) {
	var d *DeniedError
	if errors.As(err, &d) {
		return http.StatusForbidden, Denied, d.Reason
	}
	return http.StatusBadGateway, Allowed, err.Error()
}

// hostLeak reports a placeholder in a requested host name (a DNS lookup
// would carry it out).
func (p *Proxy) hostLeak(host string) *leak {
	h := strings.ToLower(host)
	for _, s := range p.secrets {
		if strings.Contains(h, strings.ToLower(s.Placeholder)) {
			return &leak{s.Name, "host name"}
		}
	}
	return nil
}

// boundSecrets are the secrets whose real value may go to t.
func (p *Proxy) boundSecrets(t Target) (bound, others []*Secret) {
	for _, s := range p.secrets {
		if s.boundTo(t) {
			bound = append(bound, s)
		} else {
			others = append(others, s)
		}
	}
	return bound, others
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &Record{Kind: "connect", Method: http.MethodConnect, Host: clip(r.Host)}
	t, err := ParseTarget(r.Host, Connect)
	if err != nil {
		p.refuse(w, rec, start, http.StatusBadRequest, Denied, err.Error())
		return
	}
	rec.Host, rec.Port = t.name(), t.Port
	if l := p.hostLeak(r.Host); l != nil {
		rec.Secret = l.secret
		p.refuse(w, rec, start, http.StatusForbidden, Leak, l.Error())
		return
	}
	if _, err := p.policy.Check(t, Connect); err != nil {
		status, decision, reason := denial(err)
		p.refuse(w, rec, start, status, decision, reason)
		return
	}
	if bound, others := p.boundSecrets(t); len(bound) > 0 {
		p.interceptTunnel(w, r, t, bound, others)
		return
	}
	up, addr, err := p.dialer.dial(r.Context(), t, Connect)
	if err != nil {
		status, decision, reason := denial(err)
		if decision == Allowed {
			rec.Error = reason
			reason = "could not connect: " + reason
		}
		p.refuse(w, rec, start, status, decision, reason)
		return
	}
	rec.Addr = addr.String()
	agent, ok := p.hijack(w, up)
	if !ok {
		return
	}
	defer p.untrack(agent, up)
	rec.Decision, rec.Status = Allowed, http.StatusOK
	rec.BytesUp, rec.BytesDown = tunnel(agent, up, p.idle)
	p.write(rec, start)
}

// hijack takes the agent's connection over and tells it the tunnel is
// open; up is closed if that fails.
func (p *Proxy) hijack(w http.ResponseWriter, up net.Conn) (net.Conn, bool) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		if up != nil {
			up.Close()
		}
		http.Error(w, "git sandbox egress proxy: cannot open a tunnel on this connection", http.StatusInternalServerError)
		return nil, false
	}
	c.SetDeadline(time.Time{})
	var agent net.Conn = c
	if brw.Reader.Buffered() > 0 {
		agent = &bufferedConn{Conn: c, r: brw.Reader}
	}
	if !p.track(agent, up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return nil, false
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.untrack(agent, up)
		c.Close()
		if up != nil {
			up.Close()
		}
		return nil, false
	}
	return agent, true
}

// reqState is what the reverse proxies need to know of one request.
type reqState struct {
	target Target
	scheme string
	rec    *Record
	bound  []*Secret
	leak   atomic.Pointer[leak]
	down   atomic.Int64
	up     atomic.Int64
}

type stateKey struct{}

func stateOf(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

func (p *Proxy) reverseProxy(t *http.Transport, scheme string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:     t,
		FlushInterval: -1,
		BufferPool:    p.buffers,
		ErrorLog:      p.errLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			st := stateOf(pr.In.Context())
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = st.target.String()
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
			trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
				if a, ok := ci.Conn.RemoteAddr().(*net.TCPAddr); ok {
					st.rec.Addr = a.IP.String()
				}
			}}
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), trace))
		},
		ModifyResponse: func(resp *http.Response) error {
			st := stateOf(resp.Request.Context())
			st.rec.Status = resp.StatusCode
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil // the upgraded stream is passed on as it is
			}
			var body io.Reader = resp.Body
			if len(st.bound) > 0 {
				scrubHeader(resp.Header, st.bound)
				if enc := resp.Header.Get("Content-Encoding"); enc == "" || strings.EqualFold(enc, "identity") {
					body = scrubBody(resp, st.bound)
				}
			}
			resp.Body = readCloser{&countingReader{r: body, n: &st.down}, resp.Body}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			stateOf(r.Context()).failed(w, err, errors.Is(err, context.Canceled))
		},
	}
}

// failed answers a request that got no response from upstream and
// records why; gone says the agent went away meanwhile.
func (st *reqState) failed(w http.ResponseWriter, err error, gone bool) {
	if l := st.leak.Load(); l != nil {
		st.rec.Decision, st.rec.Reason, st.rec.Secret, st.rec.Status = Leak, l.Error(), l.secret, http.StatusForbidden
		writeRefusal(w, http.StatusForbidden, fmt.Sprintf("git sandbox egress proxy: refused: %s\n", l))
		return
	}
	status, decision, reason := denial(err)
	st.rec.Decision, st.rec.Status = decision, status
	if decision == Denied {
		st.rec.Reason = reason
		writeRefusal(w, status, fmt.Sprintf("git sandbox egress proxy: %s denied: %s\n", st.target, reason))
		return
	}
	if gone {
		st.rec.Error = "the agent went away"
		return
	}
	st.rec.Error = reason
	writeRefusal(w, status, fmt.Sprintf("git sandbox egress proxy: %s: %s\n", st.target, reason))
}

func writeRefusal(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, msg)
}

// scrubBody replaces real values that an upstream sent back with their
// placeholders. When the lengths differ the response loses its
// Content-Length and is sent chunked.
func scrubBody(resp *http.Response, bound []*Secret) io.Reader {
	var from, to []string
	sameLen := true
	for _, s := range bound {
		from = append(from, s.Value)
		to = append(to, s.Placeholder)
		sameLen = sameLen && len(s.Value) == len(s.Placeholder)
	}
	if !sameLen {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return newStreamReplacer(resp.Body, from, to, nil)
}

// scanBody wraps r's body so that a placeholder of secrets in it fails the
// request (the bytes before it pass on; the placeholder never does).
func scanBody(r *http.Request, st *reqState, secrets []*Secret) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	var body io.Reader = r.Body
	if len(secrets) > 0 {
		var from []string
		for _, s := range secrets {
			from = append(from, s.Placeholder)
		}
		body = newStreamReplacer(body, from, nil, func(i int) error {
			l := &leak{secrets[i].Name, "body"}
			st.leak.Store(l)
			return l
		})
	}
	r.Body = readCloser{&countingReader{r: body, n: &st.up}, r.Body}
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// forward serves a plain HTTP request. Placeholders are refused anywhere
// in it: real values only ever go inside TLS.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &Record{Kind: "http", Method: clip(r.Method), Host: clip(r.URL.Host)}
	t, err := ParseTarget(r.URL.Host, HTTP)
	if err != nil {
		p.refuse(w, rec, start, http.StatusBadRequest, Denied, err.Error())
		return
	}
	rec.Host, rec.Port = t.name(), t.Port
	if l := findLeak(r, p.secrets); l != nil {
		rec.Secret = l.secret
		p.refuse(w, rec, start, http.StatusForbidden, Leak, l.Error())
		return
	}
	if _, err := p.policy.Check(t, HTTP); err != nil {
		status, decision, reason := denial(err)
		p.refuse(w, rec, start, status, decision, reason)
		return
	}
	st := &reqState{target: t, scheme: "http", rec: rec}
	if wantsUpgrade(r) {
		p.proxyRequest(p.plain, w, r, st, p.secrets, start)
		return
	}
	p.forwardPlain(w, r, st, start)
}

// proxyRequest sends r on through rp and logs the outcome.
func (p *Proxy) proxyRequest(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request, st *reqState, scan []*Secret, start time.Time) {
	st.rec.Decision = Allowed
	scanBody(r, st, scan)
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	rp.ServeHTTP(w, r)
	st.rec.BytesUp, st.rec.BytesDown = st.up.Load(), st.down.Load()
	p.write(st.rec, start)
}

// interceptTunnel terminates the agent's TLS for a host secrets are bound
// to and serves the requests inside it.
func (p *Proxy) interceptTunnel(w http.ResponseWriter, r *http.Request, t Target, bound, others []*Secret) {
	start := time.Now()
	agent, ok := p.hijack(w, nil)
	if !ok {
		return
	}
	defer p.untrack(agent)
	tc := tls.Server(agent, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.ca.Leaf(t.Host)
		},
	})
	hctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		p.write(&Record{Kind: "intercept", Host: t.Host, Port: t.Port, Decision: Allowed,
			Error: "TLS handshake with the agent failed (does it trust the sandbox's CA?): " + err.Error()}, start)
		tc.Close()
		return
	}
	l := newOneConnListener(tc)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.serveIntercepted(w, r, t, bound, others)
		}),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       p.idle,
		ErrorLog:          p.errLog,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.Close()
			}
		},
	}
	srv.Serve(l)
}

// serveIntercepted serves one request inside an intercepted tunnel to t.
func (p *Proxy) serveIntercepted(w http.ResponseWriter, r *http.Request, t Target, bound, others []*Secret) {
	start := time.Now()
	rec := &Record{Kind: "intercept", Method: clip(r.Method), Host: t.Host, Port: t.Port}
	if h, err := ParseTarget(r.Host, Connect); err != nil || h.Host != t.Host || h.Port != t.Port {
		p.refuse(w, rec, start, http.StatusForbidden, Denied, "the Host header names another host than the tunnel")
		return
	}
	if l := findLeak(r, others); l != nil {
		rec.Secret = l.secret
		p.refuse(w, rec, start, http.StatusForbidden, Leak, l.Error())
		return
	}
	if used := substitute(r.Header, bound); len(used) > 0 {
		rec.Secret = strings.Join(used, ",")
	}
	p.proxyRequest(p.intercept, w, r, &reqState{target: t, scheme: "https", rec: rec, bound: bound}, others, start)
}
