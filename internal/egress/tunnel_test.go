package egress

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// tcpPair is both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		got <- c
	}()
	a, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-got
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// copyIdle carries every byte and counts them, whether a tunnel carries
// a few (read and write) or bulk (past the small buffer, spliced), and a
// tunnel whose bytes keep moving outlives its idle timeout.
func TestCopyIdleCarriesEveryByte(t *testing.T) {
	for name, size := range map[string]int{"small": 300, "one buffer": smallCopy, "bulk": 3<<20 + 77} {
		t.Run(name, func(t *testing.T) {
			in, src := tcpPair(t)
			dst, out := tcpPair(t)
			want := make([]byte, size)
			rand.Read(want)
			go func() { in.Write(want); in.Close() }()
			var last atomic.Int64
			var n int64
			done := make(chan error, 1)
			go func() { done <- copyIdle(dst, src, time.Minute, &last, &n); dst.Close() }()
			got, err := io.ReadAll(out)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read %d of %d bytes (equal %v), %v", len(got), size, bytes.Equal(got, want), err)
			}
			if err := <-done; err != nil || n != int64(size) {
				t.Errorf("copy = %v, counted %d of %d", err, n, size)
			}
		})
	}
	t.Run("active past idle", func(t *testing.T) {
		in, src := tcpPair(t)
		dst, out := tcpPair(t)
		go io.Copy(io.Discard, out)
		var last atomic.Int64
		last.Store(time.Now().UnixNano())
		var n int64
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- copyIdle(dst, src, 200*time.Millisecond, &last, &n) }()
		for time.Since(start) < 700*time.Millisecond {
			in.Write([]byte{'x'})
			time.Sleep(40 * time.Millisecond)
		}
		in.Close()
		if err := <-done; err != nil {
			t.Errorf("an active tunnel ended: %v", err)
		}
		// And one nothing crosses ends after idle, not before.
		_, src = tcpPair(t) // its other end stays open, silent
		last.Store(time.Now().UnixNano())
		start = time.Now()
		err := copyIdle(dst, src, 200*time.Millisecond, &last, &n)
		if d := time.Since(start); err == nil || d < 200*time.Millisecond {
			t.Errorf("an idle tunnel ended after %v with %v", d, err)
		}
	})
}
