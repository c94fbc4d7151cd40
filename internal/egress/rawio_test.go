package egress

import (
	"bufio"
	"bytes"
	"context"
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

// A relayed connection's half-close ends its direction alone, as
// net.TCPConn's does; closeWrite takes that way for a TCP connection and
// for one with bytes already read.
func TestRelayConnCloseWrite(t *testing.T) {
	for _, wrap := range []func(net.Conn) net.Conn{
		func(c net.Conn) net.Conn { return c },
		func(c net.Conn) net.Conn { return &bufferedConn{Conn: c, r: bufio.NewReader(c)} },
	} {
		a, b := tcpPair(t)
		closeWrite(wrap(a))
		if got, err := io.ReadAll(b); err != nil || len(got) != 0 {
			t.Fatalf("after the half-close the peer read %q, %v; want the end", got, err)
		}
		if _, err := b.Write([]byte("back")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if n, err := a.Read(buf); err != nil || string(buf[:n]) != "back" {
			t.Fatalf("the other direction after the half-close: %q, %v", buf[:n], err)
		}
	}
	a, _ := tcpPair(t)
	ra := relay(a).(*relayConn)
	a.Close()
	if err := ra.CloseWrite(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a half-close of a closed connection: %v", err)
	}
}

// The dialer's raw connect makes the connection net would, to an IPv4
// and an IPv6 address, and fails as net would where nothing listens.
func TestRawConnectDials(t *testing.T) {
	d := net.Dialer{ControlContext: rawConnect, Timeout: 5 * time.Second}
	for _, network := range []string{"tcp4", "tcp6"} {
		l, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
		if err != nil {
			if network == "tcp6" {
				t.Logf("no IPv6 loopback here: %v", err)
				continue
			}
			t.Fatal(err)
		}
		go func() {
			c, err := l.Accept()
			if err == nil {
				c.Write([]byte("hello"))
				c.Close()
			}
		}()
		c, err := d.DialContext(context.Background(), "tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		if c.RemoteAddr().String() != l.Addr().String() {
			t.Errorf("%s: connected to %v, want %v", network, c.RemoteAddr(), l.Addr())
		}
		if got, err := io.ReadAll(c); err != nil || string(got) != "hello" {
			t.Errorf("%s: read %q, %v", network, got, err)
		}
		c.Close()
		addr := l.Addr().String()
		l.Close()
		if _, err := d.DialContext(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: a port nobody listens on: %v, want connection refused", network, err)
		}
	}
}
