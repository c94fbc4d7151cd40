package portfwd

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers each connection with a greeting and then what it
// reads, until the client stops writing.
func echoServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, "hello\n")
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a log written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func serve(t *testing.T, c *Config, g Gate) (*Forwarder, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	f, err := Listen(c, g, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.Serve(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f, log
}

// loopback is the forwarder's first port on the IPv4 loopback address.
func loopback(f *Forwarder) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Addrs()[0].(*net.TCPAddr).Port))
}

func TestForwardCarriesBothWays(t *testing.T) {
	port := echoServer(t)
	f, _ := serve(t, &Config{Target: "127.0.0.1", Ports: []Rule{{Listen: 0, Port: port}}}, Gate{})
	c, err := net.Dial("tcp", loopback(f))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello\nping\n" {
		t.Errorf("through the forwarder: %q, want the greeting and the echo", got)
	}
}

func TestForwardNothingListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f, log := serve(t, &Config{Target: "127.0.0.1", Ports: []Rule{{Listen: 0, Port: port}}}, Gate{})
	c, err := net.Dial("tcp", loopback(f))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if len(got) != 0 {
		t.Errorf("read %q from a port nothing listens on", got)
	}
	if want := "listening on 0.0.0.0:" + strconv.Itoa(port); !strings.Contains(log.String(), want) {
		t.Errorf("log %q does not say %q", log.String(), want)
	}
}

func TestForwardRefusedPeer(t *testing.T) {
	port := echoServer(t)
	// The test's own loopback stands for a container beside the proxy.
	g := Gate{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	f, log := serve(t, &Config{Target: "127.0.0.1", Ports: []Rule{{Listen: 0, Port: port}}}, g)
	c, err := net.Dial("tcp", loopback(f))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // a hang is a failure, not a stuck test
	got, _ := io.ReadAll(c)
	c.Close()
	if len(got) != 0 {
		t.Errorf("a refused peer read %q", got)
	}
	if !strings.Contains(log.String(), "refused a connection from 127.0.0.1:") {
		t.Errorf("log %q does not name the refused peer", log.String())
	}
}

func TestGateAdmits(t *testing.T) {
	g := Gate{
		Networks: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16"), netip.MustParsePrefix("10.213.4.32/27")},
		Gateway:  netip.MustParseAddr("172.18.0.1"),
	}
	for addr, want := range map[string]bool{
		"172.18.0.1":         true,  // the host, through the egress network's gateway
		"::ffff:172.18.0.1":  true,  // the same, as a v4-mapped address
		"127.0.0.1":          true,  // the proxy itself (its loopback is no network of the gate's)
		"192.168.1.20":       true,  // routed from beyond the proxy's networks
		"172.18.0.7":         false, // another proxy on the shared egress network
		"10.213.4.34":        false, // the agent
		"::ffff:10.213.4.34": false,
	} {
		if got := g.Admits(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Admits(%s) = %v, want %v", addr, got, want)
		}
	}
	// Without a gateway, no neighbour is admitted.
	g.Gateway = netip.Addr{}
	if g.Admits(netip.MustParseAddr("172.18.0.1")) {
		t.Error("a neighbour admitted with no gateway known")
	}
}

func TestDefaultGateway(t *testing.T) {
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t2004D50A\t00000000\t0001\t0\t0\t0\tE0FFFFFF\t0\t0\t0\n" +
		"eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
	if got := defaultGateway(strings.NewReader(table)); got != netip.MustParseAddr("172.18.0.1") {
		t.Errorf("default gateway = %v, want 172.18.0.1", got)
	}
	if got := defaultGateway(strings.NewReader("Iface\tDestination\tGateway\neth1\t2004D50A\t00000000\n")); got.IsValid() {
		t.Errorf("no default route: got %v", got)
	}
}

func TestConfigRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), File)
	c := &Config{Target: "git-sandbox-agent", Ports: []Rule{{Listen: ListenPort(0), Port: 3000}, {Listen: ListenPort(1), Port: 8080}}}
	if err := Write(p, c); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("written file: %v %v", fi, err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Target != c.Target || len(got.Ports) != 2 || got.Ports[1] != (Rule{Listen: 41001, Port: 8080}) {
		t.Errorf("loaded %+v, want %+v", got, c)
	}
	for _, bad := range []string{`{"target":"","ports":[{"listen":1,"port":2}]}`, `{"target":"a","ports":[]}`,
		`{"target":"a","ports":[{"listen":1,"port":0}]}`, `{"target":"a","ports":[{"listen":70000,"port":1}]}`, `not json`} {
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil {
			t.Errorf("Load(%s) accepted it", bad)
		}
	}
}
