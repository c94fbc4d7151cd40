package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Plain HTTP is forwarded by the proxy itself rather than by
// httputil.ReverseProxy: a response of known length is then copied from
// the upstream connection to the agent's by the kernel (io.Copy into the
// server's ResponseWriter ends in a splice between the two TCP
// connections), where the reverse proxy reads every byte into the
// proxy's memory and writes it out again. Requests that ask to switch
// protocols (WebSocket) still go through the reverse proxy.

const (
	maxIdlePerHost  = 8
	idleConnTimeout = 90 * time.Second
)

// upstreamConn is a connection to an upstream server and the reader its
// responses are parsed from.
type upstreamConn struct {
	conn  net.Conn
	br    *bufio.Reader
	addr  netip.Addr
	since time.Time // when it went idle
}

// connPool keeps upstream connections between requests, per destination.
type connPool struct {
	mu     sync.Mutex
	idle   map[string][]*upstreamConn
	closed bool
}

// get returns an idle connection to key that the upstream has not closed
// or written to meanwhile, or nil.
func (cp *connPool) get(key string) *upstreamConn {
	for {
		cp.mu.Lock()
		l := cp.idle[key]
		if len(l) == 0 {
			cp.mu.Unlock()
			return nil
		}
		uc := l[len(l)-1]
		cp.idle[key] = l[:len(l)-1]
		cp.mu.Unlock()
		if time.Since(uc.since) < idleConnTimeout && uc.quiet() {
			return uc
		}
		uc.conn.Close()
	}
}

// quiet reports whether nothing arrived on an idle connection: neither
// bytes (a server speaks first only to say goodbye) nor its end.
func (uc *upstreamConn) quiet() bool {
	uc.conn.SetReadDeadline(time.Now())
	_, err := uc.br.Peek(1)
	uc.conn.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (cp *connPool) put(key string, uc *upstreamConn) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.closed || len(cp.idle[key]) >= maxIdlePerHost {
		uc.conn.Close()
		return
	}
	if cp.idle == nil {
		cp.idle = map[string][]*upstreamConn{}
	}
	uc.since = time.Now()
	cp.idle[key] = append(cp.idle[key], uc)
}

// close closes every idle connection and every one put back later.
func (cp *connPool) close() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.closed = true
	for _, l := range cp.idle {
		for _, uc := range l {
			uc.conn.Close()
		}
	}
	clear(cp.idle)
}

// hopHeaders are meant for one connection, not passed on (RFC 9110,
// 7.6.1), with the proxy's own.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopHeaders deletes the hop-by-hop headers from h, and those its
// Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// wantsUpgrade reports a request to switch protocols, which the reverse
// proxy serves.
func wantsUpgrade(r *http.Request) bool {
	for _, v := range r.Header["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return true
			}
		}
	}
	return false
}

// replayable requests may be sent again when an idle connection turns out
// to be dead: idempotent, and without a body.
func replayable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0
	}
	return false
}

// outbound is r as sent upstream to t.
func outbound(r *http.Request, t Target) *http.Request {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = "http", t.String()
	out.RequestURI = ""
	out.Close = false
	removeHopHeaders(out.Header)
	// The agent asked the proxy; the proxy sends the body without
	// waiting for the upstream's go-ahead.
	out.Header.Del("Expect")
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // none, rather than Go's
	}
	return out
}

// send writes out on uc and reads the response's head (past any
// informational ones). The request is written while the response is read,
// so an upstream that answers before taking the whole body is heard.
func send(uc *upstreamConn, out *http.Request) (*http.Response, chan error, error) {
	sent := make(chan error, 1)
	write := func() {
		bw := bufio.NewWriterSize(uc.conn, 16<<10)
		err := out.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			uc.conn.Close() // a half-written request: the read ends too
		}
		sent <- err
	}
	if out.Body == nil || out.Body == http.NoBody {
		write()
		if err := <-sent; err != nil {
			return nil, nil, err
		}
		sent <- nil
	} else {
		go write()
	}
	for {
		resp, err := http.ReadResponse(uc.br, out)
		if err != nil {
			return nil, sent, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, sent, errors.New("the server switched protocols unasked")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue // 100 Continue, 103 Early Hints
		}
		return resp, sent, nil
	}
}

// forwardPlain sends r on to st.target and copies the response back.
func (p *Proxy) forwardPlain(w http.ResponseWriter, r *http.Request, st *reqState, start time.Time) {
	st.rec.Decision = Allowed
	scanBody(r, st, p.secrets)
	ctx := r.Context()
	ex, err := p.roundTrip(ctx, r, st.target)
	if err != nil {
		st.failed(w, err, ctx.Err() != nil)
		p.write(st.rec, start)
		return
	}
	defer p.finish(ex, st)
	st.rec.Addr = ex.uc.addr.String()
	st.rec.Status = ex.resp.StatusCode
	n, err := relayResponse(w, r, ex)
	st.down.Add(n)
	if err != nil {
		ex.resp.Close = true // the connection is not reused
		if ctx.Err() != nil {
			st.rec.Error = "the agent went away"
		} else {
			st.rec.Error = "copying the response: " + err.Error()
		}
		p.writeDone(st, start)
		// The agent must not take a cut response for a whole one.
		panic(http.ErrAbortHandler)
	}
	p.writeDone(st, start)
}

// writeDone logs st's record of a forwarded request with the bytes it
// moved each way.
func (p *Proxy) writeDone(st *reqState, start time.Time) {
	st.rec.BytesUp, st.rec.BytesDown = st.up.Load(), st.down.Load()
	p.write(st.rec, start)
}

// exchange is a request sent upstream and the head of its response.
type exchange struct {
	// key is uc's destination in the pool.
	key  string
	uc   *upstreamConn
	resp *http.Response
	// sent receives the end of writing the request (see send).
	sent chan error
	// stop stops uc's closing when the agent goes away.
	stop func() bool
}

// roundTrip sends r on to t, on an idle pooled connection when r may be
// sent again should that connection turn out to be dead (then once more
// on a new one), and returns the exchange once the response's head is
// read. The connection is tracked, and closed if ctx ends, until finish.
func (p *Proxy) roundTrip(ctx context.Context, r *http.Request, t Target) (*exchange, error) {
	out := outbound(r, t)
	key := t.String()
	var uc *upstreamConn
	retry := replayable(r)
	if retry {
		uc = p.pool.get(key)
	}
	for {
		if uc == nil {
			retry = false
			var err error
			if uc, err = p.dialUpstream(ctx, t); err != nil {
				return nil, err
			}
		}
		if !p.track(uc.conn) {
			uc.conn.Close()
			return nil, errors.New("the proxy is shutting down")
		}
		conn := uc.conn
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		resp, sent, err := send(uc, out)
		if err == nil {
			return &exchange{key: key, uc: uc, resp: resp, sent: sent, stop: stop}, nil
		}
		stop()
		p.untrack(uc.conn)
		uc.conn.Close()
		uc = nil
		if !retry || ctx.Err() != nil {
			return nil, err
		}
	}
}

// dialUpstream opens a new connection to t for plain HTTP.
func (p *Proxy) dialUpstream(ctx context.Context, t Target) (*upstreamConn, error) {
	c, a, err := p.dialer.dial(ctx, t, HTTP)
	if err != nil {
		return nil, err
	}
	return &upstreamConn{conn: c, br: bufio.NewReaderSize(c, 64<<10), addr: a}, nil
}

// relayResponse writes ex's response to w (the answer to r): its head,
// then its body and trailers. It returns how many body bytes it copied.
func relayResponse(w http.ResponseWriter, r *http.Request, ex *exchange) (int64, error) {
	resp := ex.resp
	hasBody, known := writeHead(w, r.Method, resp)
	switch {
	case !hasBody || resp.ContentLength == 0:
		// nothing follows the head
		return 0, nil
	case known:
		return copyKnown(w, ex.uc, resp.ContentLength)
	default:
		n, err := copyStream(w, resp)
		h := w.Header()
		for k, vv := range resp.Trailer {
			h[http.TrailerPrefix+k] = vv
		}
		return n, err
	}
}

// writeHead writes resp's status and headers, without the hop-by-hop
// ones, as the answer to a request of method. It reports whether a body
// follows and whether its length is known.
func writeHead(w http.ResponseWriter, method string, resp *http.Response) (hasBody, known bool) {
	h := w.Header()
	removeHopHeaders(resp.Header)
	for k, vv := range resp.Header {
		h[k] = vv
	}
	// A response without a body keeps the upstream's Content-Length (a
	// HEAD's, a 304's: the length of what a GET would get).
	hasBody = method != http.MethodHead && bodyAllowed(resp.StatusCode)
	known = resp.ContentLength >= 0 && len(resp.TransferEncoding) == 0
	if hasBody && known {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	} else if hasBody {
		h.Del("Content-Length")
	}
	w.WriteHeader(resp.StatusCode)
	return hasBody, known
}

// finish puts ex's connection back for the next request when the exchange
// left it clean, and closes it otherwise.
func (p *Proxy) finish(ex *exchange, st *reqState) {
	uc := ex.uc
	p.untrack(uc.conn)
	canceled := !ex.stop()
	clean := !canceled && !ex.resp.Close && st.rec.Error == ""
	if clean {
		select {
		case err := <-ex.sent:
			clean = err == nil
		default:
			clean = false // the upstream answered before the body was sent
		}
	}
	if !clean {
		uc.conn.Close()
		return
	}
	p.pool.put(ex.key, uc)
}

// bodyAllowed reports whether a response of status may carry a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// copyKnown copies a body of n bytes: what the reader already holds, then
// the rest straight from the connection (spliced by the kernel when w
// writes to a TCP connection).
func copyKnown(w io.Writer, uc *upstreamConn, n int64) (int64, error) {
	var done int64
	if b := uc.br.Buffered(); b > 0 {
		k, err := io.CopyN(w, uc.br, min(int64(b), n))
		done += k
		if err != nil {
			return done, err
		}
	}
	if done == n {
		return done, nil
	}
	k, err := io.Copy(w, &io.LimitedReader{R: uc.conn, N: n - done})
	done += k
	if err == nil && done < n {
		err = io.ErrUnexpectedEOF
	}
	return done, err
}

// copyStream copies a body of unknown length (chunked, or up to the
// connection's end), passing each piece on as it comes.
func copyStream(w http.ResponseWriter, resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
			if err := rc.Flush(); err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
