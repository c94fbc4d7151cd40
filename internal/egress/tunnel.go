package egress

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// tunnel copies bytes both ways between the agent's connection and the
// upstream one until both directions have ended, or until nothing crossed
// in either direction for idle. When one side stops sending, the other
// side's write half is closed and the other direction goes on. It returns
// the bytes sent upstream and downstream.
func tunnel(agent, upstream net.Conn, idle time.Duration) (up, down int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	var once sync.Once
	abort := func() {
		once.Do(func() {
			agent.Close()
			upstream.Close()
		})
	}
	copyDir := func(dst, src net.Conn, n *int64) {
		defer wg.Done()
		err := copyIdle(dst, src, idle, &last, n)
		if err != nil {
			abort()
			return
		}
		closeWrite(dst)
	}
	wg.Add(2)
	go copyDir(upstream, agent, &up)
	copyDir(agent, upstream, &down) // in this goroutine: one fewer to start
	wg.Wait()
	abort()
	return up, down
}

// copyIdle copies src to dst until src ends (nil) or fails. It reads and
// writes through a small buffer until a read fills it: most tunnels carry
// a request and its answer, for which the kernel's splice (io.Copy's way
// between two TCP connections) costs more system calls than it saves,
// and a pipe besides. From the first full read on, the rest goes by
// io.Copy, in chunks of 4 MiB to count bytes and note activity. A read
// deadline wakes it every idle/4 at most; the copy ends for idleness only
// when neither direction has moved for idle.
func copyIdle(dst, src net.Conn, idle time.Duration, last *atomic.Int64, n *int64) error {
	src.SetReadDeadline(time.Now().Add(idle / 4))
	bulk, err := copySmall(dst, src, idle, last, n)
	if !bulk {
		return err
	}
	const chunk = 4 << 20
	for {
		k, err := io.Copy(dst, &io.LimitedReader{R: src, N: chunk})
		atomic.AddInt64(n, k)
		if k > 0 {
			last.Store(time.Now().UnixNano())
		}
		switch {
		case err == nil && k < chunk:
			return nil // src ended
		case err == nil:
			continue
		}
		if !stillActive(err, src, idle, last) {
			return err
		}
	}
}

// smallCopy is copyIdle's buffer before a tunnel turns out to carry bulk.
const smallCopy = 16 << 10

var smallBufs = sync.Pool{New: func() any { b := make([]byte, smallCopy); return &b }}

// copySmall copies src to dst by reads and writes until src ends or fails
// (bulk false, with the error; nil when src ended), or until a read fills
// the buffer (bulk true: the caller goes on). A TCP connection is read
// and written by raw system calls (relay, rawio.go).
func copySmall(dst, src net.Conn, idle time.Duration, last *atomic.Int64, n *int64) (bulk bool, err error) {
	bp := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(bp)
	buf := *bp
	src, dst = relay(src), relay(dst)
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			last.Store(time.Now().UnixNano())
			w, werr := dst.Write(buf[:k])
			atomic.AddInt64(n, int64(w))
			if werr != nil {
				return false, werr
			}
			if k == len(buf) && rerr == nil {
				return true, nil
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF):
			return false, nil
		case !stillActive(rerr, src, idle, last):
			return false, rerr
		}
	}
}

// stillActive reports whether err is src's read deadline while either
// direction moved within idle; src's deadline is then set again.
func stillActive(err error, src net.Conn, idle time.Duration, last *atomic.Int64) bool {
	now := time.Now()
	if !errors.Is(err, os.ErrDeadlineExceeded) || now.Sub(time.Unix(0, last.Load())) >= idle {
		return false
	}
	src.SetReadDeadline(now.Add(idle / 4))
	return true
}

type closeWriter interface{ CloseWrite() error }

// closeWrite half-closes c when it can, so the far side sees the end of
// this direction while the other goes on.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		c = relay(tc)
	}
	if cw, ok := c.(closeWriter); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// bufferedConn is a hijacked connection whose first bytes were already read
// into the server's buffer (a client may send its TLS hello right behind
// the CONNECT request).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufferedConn) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}

// oneConnListener hands one connection to an http.Server, then blocks
// until closed.
type oneConnListener struct {
	mu   sync.Mutex
	conn net.Conn
	done chan struct{}
	once sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	return &oneConnListener{conn: c, done: make(chan struct{})}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "intercepted" }
