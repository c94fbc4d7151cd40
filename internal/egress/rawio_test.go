package egress

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// A relayed connection reads and writes as net.Conn does: every byte of
// a write larger than the socket takes at once, the end as io.EOF, a
// read deadline as os.ErrDeadlineExceeded, a closed connection as
// net.ErrClosed, and a half-close on.
func TestRelayConnIsAConn(t *testing.T) {
	a, b := tcpPair(t)
	ra, rb := relay(a), relay(b)
	if _, ok := ra.(*relayConn); !ok {
		t.Fatalf("a TCP connection is relayed as %T", ra)
	}
	want := make([]byte, 8<<20) // well past a socket's buffers
	rand.Read(want)
	go func() { ra.Write(want); a.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(rb)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d of %d bytes (equal %v), %v", len(got), len(want), bytes.Equal(got, want), err)
	}
	if _, err := rb.Write([]byte("after the half-close")); err != nil {
		t.Fatalf("the other direction after a half-close: %v", err)
	}
	buf := make([]byte, 64)
	if n, err := ra.Read(buf); err != nil || string(buf[:n]) != "after the half-close" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	ra.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := ra.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v", err)
	}
	ra.Close()
	if _, err := ra.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read of a closed connection: %v", err)
	}
	// A peer that went away fails the write, and nothing else.
	b.(*net.TCPConn).SetLinger(0)
	b.Close()
	c, d := tcpPair(t)
	d.(*net.TCPConn).SetLinger(0)
	d.Close()
	rc := relay(c)
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = rc.Write(want[:64<<10])
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Fatalf("a write to a peer gone: %v", werr)
	}
	if c := relay(&bufferedConn{Conn: b}); c == nil {
		t.Fatal("no connection")
	} else if _, ok := c.(*relayConn); ok {
		t.Fatal("a connection with bytes already read is relayed raw: they would be lost")
	}
}
