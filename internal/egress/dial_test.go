package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The dialer resolves a name once and connects to exactly the addresses it
// vetted, in order; a refused name is not connected to at all.
func TestDialerConnectsOnlyToVettedAddresses(t *testing.T) {
	p := &Policy{Allow: MustParseEntries(FromUser, "*.example.com", "db.corp.example:5432", "metadata.example.org")}
	res := newResolver(
		"a.example.com", "10.0.0.7,93.184.216.34,169.254.169.254,2606:2800:220:1::1",
		"rebind.example.com", "192.168.1.1",
		"loop.example.com", "::1",
		"cgnat.example.com", "100.64.3.3",
		"ula.example.com", "fd00::5",
		"db.corp.example", "10.1.2.3",
		"metadata.example.org", "169.254.169.254",
	)
	var dialled []string
	refused := errors.New("refused by the test")
	d := &dialer{policy: func() *Policy { return p }, resolver: res, timeout: time.Second,
		connect: func(_ context.Context, _, addr string) (net.Conn, error) {
			dialled = append(dialled, addr)
			return nil, refused
		}}
	for _, tc := range []struct {
		target string
		denied string   // part of the denial, "" when allowed
		dials  []string // what was connected to, in order
	}{
		{"a.example.com:443", "", []string{"93.184.216.34:443", "[2606:2800:220:1::1]:443"}},
		{"rebind.example.com:443", "192.168.1.1 (private)", nil},
		{"loop.example.com:443", "::1 (local)", nil},
		{"cgnat.example.com:443", "100.64.3.3 (private)", nil},
		{"ula.example.com:443", "fd00::5 (private)", nil},
		{"db.corp.example:5432", "", []string{"10.1.2.3:5432"}}, // an exact name reaches a private address
		{"metadata.example.org:443", "169.254.169.254 (local)", nil},
		{"other.example.net:443", "not in the allow list", nil},
		{"10.1.2.3:5432", "IP address not in the allow list", nil},
	} {
		dialled = nil
		_, _, err := d.dial(context.Background(), target(t, tc.target, Connect), Connect)
		var de *DeniedError
		if tc.denied != "" {
			if !errors.As(err, &de) || !strings.Contains(de.Reason, tc.denied) {
				t.Errorf("%s: %v, want a denial saying %q", tc.target, err, tc.denied)
			}
		} else if !errors.Is(err, refused) {
			t.Errorf("%s: %v", tc.target, err)
		}
		if strings.Join(dialled, " ") != strings.Join(tc.dials, " ") {
			t.Errorf("%s: connected to %v, want %v", tc.target, dialled, tc.dials)
		}
	}
	for name, n := range res.lookups {
		if n != 1 {
			t.Errorf("%s resolved %d times", name, n)
		}
	}
	if res.asked("other.example.net") != 0 {
		t.Error("a name outside the list was resolved")
	}
}

// sockKeepAlive is whether c probes when idle, and after how long.
func sockKeepAlive(t *testing.T, c net.Conn) (on bool, idle int) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v, i int
	rc.Control(func(fd uintptr) {
		v, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		i, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	})
	return v == 1, i
}

// Every upstream connection probes when idle: one the dialer makes for a
// request at once, a tunnel's once it is open.
func TestUpstreamKeepAlive(t *testing.T) {
	port := echoServer(t)
	p, err := New(Options{
		Policy:   &Policy{Allow: MustParseEntries(FromFlag, "up.test:"+port, "127.0.0.1:"+port)},
		Resolver: newResolver("up.test", "127.0.0.1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := p.dialer.dial(context.Background(), target(t, "up.test:"+port, HTTP), HTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if on, idle := sockKeepAlive(t, c); !on || idle != 30 {
		t.Errorf("a request's upstream connection: keep-alive %v after %d s, want on after 30 s", on, idle)
	}

	agent, err := net.Dial("tcp", serve(t, p))
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	fmt.Fprintf(agent, "CONNECT up.test:%s HTTP/1.1\r\nHost: up.test:%s\r\n\r\n", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(agent), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connect: %v %v", resp, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if on, idle := tunnelUpstreamKeepAlive(t, p, "127.0.0.1:"+port); on && idle == 30 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the tunnel's upstream connection: keep-alive %v after %d s, want on after 30 s", on, idle)
		}
	}
}

// tunnelUpstreamKeepAlive is sockKeepAlive of p's connection to addr.
func tunnelUpstreamKeepAlive(t *testing.T, p *Proxy, addr string) (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if c.RemoteAddr().String() == addr {
			return sockKeepAlive(t, c)
		}
	}
	return false, 0
}
