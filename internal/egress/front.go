package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The proxy's front takes every connection the agent makes and looks at
// its first bytes. A CONNECT is served here, without net/http's server: that
// server starts a read in the background for each request and stops it
// again when the handler takes the connection over, which is most of what
// a new tunnel cost over a bare proxy (0.07 to 0.1 ms in a container). Any
// other request, and every CONNECT while connections may be held for the
// user's answer (the server's background read is what notices an agent
// that went away meanwhile), goes to net/http's server as it came.

// maxHeaderBytes bounds a CONNECT request's head, as net/http's server
// bounds every request's.
const maxHeaderBytes = http.DefaultMaxHeaderBytes

var connectPrefix = []byte("CONNECT ")

// frontListener is what net/http's server accepts from: the connections
// the front hands it. Closing it closes the real listener too.
type frontListener struct {
	net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	err   error
}

func newFrontListener(l net.Listener) *frontListener {
	return &frontListener{Listener: l, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (f *frontListener) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.done:
		f.mu.Lock()
		defer f.mu.Unlock()
		return nil, f.err
	}
}

// fail ends Accept with err (the real listener's failure, or its close).
func (f *frontListener) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.once.Do(func() { close(f.done) })
}

func (f *frontListener) Close() error {
	f.fail(net.ErrClosed)
	return f.Listener.Close()
}

// hand gives c to the server, or closes it once the server is gone.
func (f *frontListener) hand(c net.Conn) {
	select {
	case f.conns <- c:
	case <-f.done:
		c.Close()
	}
}

// accept takes the real listener's connections until it fails for good,
// each read by sniff in a goroutine of its own: a worker that served one
// before and waits for another, when there is one.
func (p *Proxy) accept(ctx context.Context, f *frontListener) {
	var wait time.Duration
	idle := make(chan net.Conn) // a send succeeds only if a worker waits
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				f.fail(err)
				return
			}
			// Out of descriptors, a connection reset before it was
			// taken: tried again, as net/http's server does.
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			p.errLog.Printf("accept: %v; again in %v", err, wait)
			time.Sleep(wait)
			continue
		}
		wait = 0
		select {
		case idle <- c:
		default:
			go p.work(ctx, c, f, idle)
		}
	}
}

// workerIdle is how long a worker waits for another connection before it
// ends.
const workerIdle = 30 * time.Second

// work serves c, then each connection accept hands it, until none came for
// p.workerIdle or the listener is gone. Serving a new tunnel goes deeper than
// a new goroutine's first stack (the request's parsing, the checks, the
// dial): a fresh goroutine for each connection grew its stack twice, each
// time copying it and walking its frames, some 7 us a tunnel. A worker
// keeps its stack from one connection to the next (when it idles through
// a collection, the collector halves it, and it may grow once again).
func (p *Proxy) work(ctx context.Context, c net.Conn, f *frontListener, idle <-chan net.Conn) {
	t := time.NewTimer(p.workerIdle)
	defer t.Stop()
	for {
		p.sniff(ctx, c, f)
		t.Reset(p.workerIdle)
		select {
		case c = <-idle:
		case <-t.C:
			return
		case <-f.done:
			return
		}
	}
}

// sniff looks at a connection's first bytes without taking them: a
// CONNECT is served here, the rest handed to the server as it came (the
// connection itself, so that the server's own copies go by splice).
func (p *Proxy) sniff(ctx context.Context, c net.Conn, f *frontListener) {
	if !p.track(c) {
		c.Close()
		return
	}
	defer p.untrack(c)
	if p.room != nil {
		f.hand(c)
		return
	}
	// One deadline for the first bytes and the whole head: the header
	// timeout, as the server gives.
	c.SetReadDeadline(time.Now().Add(readHeaderTimeout))
	isConnect, ok := peekConnect(c)
	switch {
	case !ok:
		c.Close() // nothing came in time, or the agent went away
		return
	case !isConnect:
		c.SetReadDeadline(time.Time{})
		f.hand(c)
		return
	}
	head := &headReader{r: c, left: maxHeaderBytes}
	br := bufio.NewReaderSize(head, 4096)
	req, err := http.ReadRequest(br)
	head.left = -1
	if err != nil {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\ngit sandbox egress proxy: bad request\n")
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	req = req.WithContext(ctx)
	req.RemoteAddr = c.RemoteAddr().String()
	w := &rawResponse{conn: c, br: br, h: http.Header{}}
	p.connect(w, req)
	if !w.hijacked {
		w.finish()
		c.Close()
	}
}

// peekConnect waits for c's first bytes (until c's read deadline) and
// reports whether they begin a CONNECT, leaving them to be read; ok is
// false when none came in that time or c ended. Anything it
// cannot tell (bytes too few yet, a connection that is not a socket) is
// not a CONNECT: the server serves a CONNECT too.
func peekConnect(c net.Conn) (isConnect, ok bool) {
	sc, isSocket := c.(syscall.Conn)
	if !isSocket {
		return false, true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, true
	}
	var buf [len("CONNECT ")]byte
	n := 0
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err != nil || rerr != nil || n <= 0 {
		return false, false
	}
	return n == len(buf) && bytes.Equal(buf[:], connectPrefix), true
}

// headReader is a connection's reader that refuses to give more than
// left bytes while a request's head is read (left < 0: no bound).
type headReader struct {
	r    io.Reader
	left int
}

func (h *headReader) Read(b []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(b)
	}
	if h.left == 0 {
		return 0, errors.New("request head too large")
	}
	if len(b) > h.left {
		b = b[:h.left]
	}
	n, err := h.r.Read(b)
	h.left -= n
	return n, err
}

// rawResponse is the http.ResponseWriter of a CONNECT served by the
// front: a refusal is written whole when the handler returns (and the
// connection closed); Hijack gives the connection itself, with what was
// read past the request, for a tunnel.
type rawResponse struct {
	conn     net.Conn
	br       *bufio.Reader
	h        http.Header
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (w *rawResponse) Header() http.Header { return w.h }

func (w *rawResponse) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *rawResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Hijack implements http.Hijacker.
func (w *rawResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status != 0 {
		return nil, nil, errors.New("response already written")
	}
	w.hijacked = true
	return w.conn, bufio.NewReadWriter(w.br, bufio.NewWriter(w.conn)), nil
}

// finish writes the response the handler made.
func (w *rawResponse) finish() {
	w.WriteHeader(http.StatusOK)
	w.h.Set("Content-Length", fmt.Sprint(w.body.Len()))
	w.h.Set("Connection", "close")
	bw := bufio.NewWriter(w.conn)
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", w.status, http.StatusText(w.status))
	w.h.Write(bw)
	bw.WriteString("\r\n")
	bw.Write(w.body.Bytes())
	bw.Flush()
}
