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
	go copyDir(agent, upstream, &down)
	wg.Wait()
	abort()
	return up, down
}

// copyIdle copies src to dst until src ends (nil) or fails. The copying
// is io.Copy's, which splices between two TCP connections inside the
// kernel. It returns at least every idle/4 (a read deadline) and every 4 MiB
// to count bytes and note activity; the copy ends for idleness only when
// neither direction has moved for idle.
func copyIdle(dst, src net.Conn, idle time.Duration, last *atomic.Int64, n *int64) error {
	const chunk = 4 << 20
	for {
		src.SetReadDeadline(time.Now().Add(idle / 4))
		k, err := io.Copy(dst, &io.LimitedReader{R: src, N: chunk})
		atomic.AddInt64(n, k)
		now := time.Now()
		if k > 0 {
			last.Store(now.UnixNano())
		}
		switch {
		case err == nil && k < chunk:
			return nil // src ended
		case err == nil:
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) && now.Sub(time.Unix(0, last.Load())) < idle:
			continue
		}
		return err
	}
}

type closeWriter interface{ CloseWrite() error }

// closeWrite half-closes c when it can, so the far side sees the end of
// this direction while the other goes on.
func closeWrite(c net.Conn) {
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
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
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
