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
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress/dnscache"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/egress/sandboxca"
	"github.com/git-sandbox/git-sandbox/internal/meter"
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
	// Live is the live changes' file (LiveFile), read again whenever it
	// changes; "" for none.
	Live string
	// Secrets are swapped in for their placeholders on their hosts.
	Secrets []Secret
	// Inspect are hosts whose TLS the proxy terminates though no secret
	// is bound to them: method and path rules apply inside.
	Inspect []Entry
	// CA signs the certificates shown for intercepted hosts; required
	// when there are secrets or hosts to inspect.
	CA *sandboxca.CA
	// Resolver resolves host names; nil is the system's, behind a dnscache.
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
	Meter       *meter.Meter // meters the model calls through the broker; nil meters none
	// Prompt, when set, holds connections off the list (see hold).
	Prompt *held.Options
}

// Proxy is the egress proxy: an http.Handler serving CONNECT and plain
// HTTP requests in absolute form.
type Proxy struct {
	policy  *livePolicy
	room    *held.Room // nil: no prompting
	secrets []*Secret
	inspect []Entry
	ca      *sandboxca.CA
	log     *Log
	errLog  *log.Logger
	dialer  *dialer
	idle    time.Duration
	timeout time.Duration
	meter   *meter.Meter
	// workerIdle is how long a worker of the front waits for another
	// connection before it ends (work).
	workerIdle time.Duration

	buffers    *bufferPool
	pool       connPool               // plain HTTP's upstream connections
	plain      *httputil.ReverseProxy // plain HTTP upgrades (WebSocket)
	intercept  *httputil.ReverseProxy
	transport  []*http.Transport
	scrubbers  sync.Map // scrubberFor
	nscrubbers atomic.Int32

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
		ca:         o.CA,
		log:        o.Log,
		idle:       o.IdleTimeout,
		workerIdle: workerIdle,
		timeout:    o.DialTimeout,
		meter:      o.Meter,
		conns:      map[net.Conn]struct{}{},
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
	p.policy = newLivePolicy(o.Policy, o.Live, p.errLog)
	if o.Prompt != nil {
		p.room = held.New(o.Prompt.File, o.Prompt.Timeout, func(err error) { p.errLog.Print(err) })
	}
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
	p.inspect = o.Inspect
	if len(p.secrets)+len(p.inspect) > 0 && p.ca == nil {
		return nil, errors.New("egress proxy: secrets and inspected hosts need a CA")
	}
	p.dialer = &dialer{policy: p.policy.get, resolver: dnscache.Or(o.Resolver), timeout: p.timeout}
	p.dialer.net.KeepAlive = -1 // set by dial, or by a tunnel once open
	p.dialer.net.ControlContext = rawConnect

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
// returns nil; it returns an error only when l fails. The front (front.go)
// takes l's connections: it serves CONNECTs itself and hands the rest to
// net/http's server.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       p.idle,
		ErrorLog:          p.errLog,
	}
	front := newFrontListener(l)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(front) }()
	go p.accept(ctx, front)
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
			h := allowHint(rec)
			fmt.Fprintf(w, "The user can allow it: git sandbox net allow BRANCH %s (at once), git sandbox start --allow %s, or allow = [...] in their config.\n", h, h)
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

// inspects reports whether the proxy terminates TLS to t though no secret
// is bound to it (a host name only: the CA names no address).
func (p *Proxy) inspects(t Target) bool { return namesTLS(p.inspect, t) }

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
	pol := p.policy.get()
	dec, err := pol.Check(t, Connect)
	if err != nil {
		dec, err = p.hold(r.Context(), rec, t, Connect, err)
		pol = p.policy.get() // an answer may have changed it
	}
	if err != nil {
		status, decision, reason := denial(err)
		p.refuse(w, rec, start, status, decision, reason)
		return
	}
	bound, others := p.boundSecrets(t)
	if len(bound) > 0 {
		p.interceptTunnel(w, r, interception{target: t, bound: bound, others: others, scrub: p.scrubberFor(bound, nil)})
		return
	}
	if p.inspects(t) {
		// No value of a secret goes there, so none can come back.
		p.interceptTunnel(w, r, interception{target: t, others: others})
		return
	}
	if len(dec.Ruled) > 0 {
		p.refuse(w, rec, start, http.StatusForbidden, Denied, "its allow entries have method or path rules, which the proxy applies only to plain HTTP and to hosts whose TLS it terminates (a secret's hosts, and hosts marked inspect = true in the user's config: [[host]] name = \""+t.Host+"\" inspect = true); a tunnel would carry any request")
		return
	}
	up, addr, err := p.dialer.dialChecked(r.Context(), pol, dec, t, Connect)
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
	keepAlive(up)
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
	if _, err := relay(c).Write(connectEstablished); err != nil {
		p.untrack(agent, up)
		c.Close()
		if up != nil {
			up.Close()
		}
		return nil, false
	}
	return agent, true
}

// connectEstablished is a tunnel's answer, written by a raw call as the
// tunnel's bytes are (relay): the agent is waiting for it.
var connectEstablished = []byte("HTTP/1.1 200 Connection established\r\n\r\n")

// reqState is what the reverse proxies need to know of one request.
type reqState struct {
	target Target
	scheme string
	rec    *Record
	scrub  *scrubber   // set for a host secrets are bound to
	call   *meter.Call // a model call through the broker
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
		Transport:     tracingTransport{t},
		FlushInterval: -1,
		BufferPool:    p.buffers,
		ErrorLog:      p.errLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			st := stateOf(pr.In.Context())
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = st.target.String()
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
			if st.scrub != nil {
				// Only codings the proxy can decode to scrub the body;
				// none for a part of a body, which cannot be decoded
				// alone.
				ae := "gzip"
				if pr.Out.Method == http.MethodHead || pr.Out.Header.Get("Range") != "" {
					ae = "identity"
				}
				pr.Out.Header.Set("Accept-Encoding", ae)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			st := stateOf(resp.Request.Context())
			st.rec.Status = resp.StatusCode
			if st.scrub != nil {
				return st.scrubResponse(resp)
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil // the upgraded stream is passed on as it is
			}
			resp.Body = readCloser{&countingReader{r: resp.Body, n: &st.down}, resp.Body}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			stateOf(r.Context()).failed(w, err, errors.Is(err, context.Canceled))
		},
	}
}

// tracingTransport notes the address a request was sent to and, for a
// request to a host secrets are bound to, scrubs the headers of the
// informational (1xx) responses the reverse proxy passes on. Its hooks
// are added after the reverse proxy's, so they run first.
type tracingTransport struct{ t http.RoundTripper }

func (tt tracingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st := stateOf(r.Context())
	trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		if a, ok := ci.Conn.RemoteAddr().(*net.TCPAddr); ok {
			st.rec.Addr = a.IP.String()
		}
	}}
	if sc := st.scrub; sc != nil {
		trace.Got1xxResponse = func(_ int, h textproto.MIMEHeader) error {
			sc.header(h)
			return nil
		}
	}
	return tt.t.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}

// failed answers a request that got no response from upstream and
// records why; gone says the agent went away meanwhile.
func (st *reqState) failed(w http.ResponseWriter, err error, gone bool) {
	if l := st.leak.Load(); l != nil {
		st.rec.Decision, st.rec.Reason, st.rec.Secret, st.rec.Status = Leak, l.Error(), l.secret, http.StatusForbidden
		writeRefusal(w, http.StatusForbidden, fmt.Sprintf("git sandbox egress proxy: refused: %s\n", l))
		return
	}
	var refused *refusedResponse
	if errors.As(err, &refused) {
		st.rec.Decision, st.rec.Reason, st.rec.Error, st.rec.Status = Allowed, refused.reason, refused.Error(), http.StatusBadGateway
		writeRefusal(w, http.StatusBadGateway, fmt.Sprintf("git sandbox egress proxy: %s: %s\n", st.target, refused))
		return
	}
	status, decision, reason := denial(err)
	if st.scrub != nil {
		// The text of an error can quote what the host sent.
		reason = st.scrub.pats.replace(reason)
	}
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
	dec, err := p.policy.get().Check(t, HTTP)
	if err != nil {
		dec, err = p.hold(r.Context(), rec, t, HTTP, err)
	}
	if err == nil {
		err = dec.CheckHTTP(t, r)
	}
	if err != nil {
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

// interception is what the requests inside an intercepted tunnel share.
type interception struct {
	target Target
	bound  []*Secret // swapped in
	others []*Secret // refused
	scrub  *scrubber // the encodings of bound's values
}

// maxScrubbers bounds the scrubbers kept: one per set of secrets bound
// to a host, and one per Basic token an agent sends (it may send many).
const maxScrubbers = 64

// scrubberFor returns the scrubber of the values of bound and of the Basic
// tokens a request was given, made once for each while there are fewer
// than maxScrubbers.
func (p *Proxy) scrubberFor(bound []*Secret, tokens [][2]string) *scrubber {
	var key strings.Builder
	for _, s := range bound {
		key.WriteString(s.Name + "\x00")
	}
	for _, t := range tokens {
		key.WriteString("\x00" + t[1]) // the credentials as the agent sent them
	}
	if sc, ok := p.scrubbers.Load(key.String()); ok {
		return sc.(*scrubber)
	}
	var sc *scrubber
	if len(tokens) == 0 {
		sc = newScrubber(bound)
	} else {
		sc = p.scrubberFor(bound, nil).withBasic(tokens)
	}
	if p.nscrubbers.Add(1) <= maxScrubbers {
		p.scrubbers.Store(key.String(), sc)
	}
	return sc
}

// interceptTunnel terminates the agent's TLS for a host secrets are bound
// to and serves the requests inside it.
func (p *Proxy) interceptTunnel(w http.ResponseWriter, r *http.Request, ic interception) {
	start := time.Now()
	t := ic.target
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
			p.serveIntercepted(w, r, ic)
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

// serveIntercepted serves one request inside an intercepted tunnel.
func (p *Proxy) serveIntercepted(w http.ResponseWriter, r *http.Request, ic interception) {
	start := time.Now()
	t := ic.target
	rec := &Record{Kind: "intercept", Method: clip(r.Method), Host: t.Host, Port: t.Port}
	if h, err := ParseTarget(r.Host, Connect); err != nil || h.Host != t.Host || h.Port != t.Port {
		p.refuse(w, rec, start, http.StatusForbidden, Denied, "the Host header names another host than the tunnel")
		return
	}
	if l := findLeak(r, ic.others); l != nil {
		rec.Secret = l.secret
		p.refuse(w, rec, start, http.StatusForbidden, Leak, l.Error())
		return
	}
	// The policy now, not the tunnel's: a live deny reaches a tunnel kept
	// open.
	dec, err := p.policy.get().Check(t, Connect)
	if err == nil {
		err = dec.CheckHTTP(t, r)
	}
	if err != nil {
		_, decision, reason := denial(err)
		p.refuse(w, rec, start, http.StatusForbidden, decision, reason)
		return
	}
	if r.Method == http.MethodConnect || wantsUpgrade(r) {
		// What comes back on an upgraded connection (WebSocket) or a
		// tunnel is a stream the proxy does not parse: it could carry a
		// real value back unscrubbed.
		rec.Error = "refused: a protocol upgrade or tunnel to a host whose TLS the proxy terminates"
		p.refuse(w, rec, start, http.StatusNotImplemented, Allowed,
			"refused: the proxy does not switch protocols (WebSocket) or open tunnels on a host whose TLS it terminates (a secret's, or one marked inspect = true): it could not scrub a real value from what comes back, nor apply rules to what goes in")
		return
	}
	used, tokens := substitute(r.Header, ic.bound)
	if len(used) > 0 {
		rec.Secret = strings.Join(used, ",")
	}
	st := &reqState{target: t, scheme: "https", rec: rec, scrub: ic.scrub, call: p.meter.Begin(t.Host, r)}
	if st.call.Refuse(w) {
		return // answered as the API would, and logged in the usage log
	}
	if len(tokens) > 0 {
		st.scrub = p.scrubberFor(ic.bound, tokens)
	}
	p.proxyRequest(p.intercept, w, r, st, ic.others, start)
}
