package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The egress benchmarks compare the same requests made directly and
// through the proxy, on loopback in one process (client, proxy and
// upstream share the CPUs, which is harsher on the proxy than a real
// network). Each reports its own figures:
//
//	throughput: direct-MB/s, proxy-MB/s and ratio (target ≥ 0.9) for a
//	100 MB download, best of 5 alternating rounds
//	latency: p50-direct-µs, p50-proxy-µs and added-p50-µs (target ≤ 2000)
//	over 400 small requests, alternating
//
// Modes: http (plain HTTP forwarded), connect (a CONNECT tunnel, TLS end to
// end), intercept (TLS terminated for a host a secret is bound to, the
// placeholder swapped and the response scanned), and for latency
// new-tunnel (a fresh CONNECT tunnel per request against a fresh TLS
// connection directly).

const benchSize = 100 << 20

type benchClients struct {
	direct, proxy *http.Client
	url           string
	hdr           []string
}

// benchMode builds a direct and a proxied client for mode.
func benchMode(b *testing.B, e *testEnv, mode string, keepAlive bool) benchClients {
	pool := e.pki.pool.Clone()
	pool.AddCert(e.ca.Cert)
	// The direct client reaches the test names on loopback.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
	}
	noH2 := map[string]func(string, *tls.Conn) http.RoundTripper{}
	direct := &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool}, TLSNextProto: noH2, DisableKeepAlives: !keepAlive, DisableCompression: true}
	proxied := &http.Transport{Proxy: http.ProxyURL(e.proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}, TLSNextProto: noH2, DisableKeepAlives: !keepAlive, DisableCompression: true}
	b.Cleanup(direct.CloseIdleConnections)
	b.Cleanup(proxied.CloseIdleConnections)
	c := benchClients{direct: &http.Client{Transport: direct}, proxy: &http.Client{Transport: proxied}}
	switch mode {
	case "http":
		c.url = "http://" + e.plainHP
	case "connect", "new-tunnel":
		c.url = "https://tunnel.test:" + e.port
	case "intercept":
		c.url = "https://api.test:" + e.port
		c.hdr = []string{"X-Api-Key", e.api.Placeholder}
	}
	return c
}

func benchGet(b *testing.B, c *http.Client, url string, hdr []string, want int64) time.Duration {
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != want || resp.StatusCode != 200 {
		b.Fatalf("%s: status %d, %d bytes, %v", url, resp.StatusCode, n, err)
	}
	return time.Since(start)
}

func BenchmarkThroughput(b *testing.B) {
	e := newTestEnv(b)
	for _, mode := range []string{"http", "connect", "intercept"} {
		b.Run(mode, func(b *testing.B) {
			c := benchMode(b, e, mode, true)
			url := fmt.Sprintf("%s/bytes/%d", c.url, benchSize)
			var direct, proxy time.Duration
			for b.Loop() {
				direct, proxy = time.Hour, time.Hour
				for range 5 {
					direct = min(direct, benchGet(b, c.direct, url, c.hdr, benchSize))
					proxy = min(proxy, benchGet(b, c.proxy, url, c.hdr, benchSize))
				}
			}
			mbs := func(d time.Duration) float64 { return benchSize / 1e6 / d.Seconds() }
			b.ReportMetric(mbs(direct), "direct-MB/s")
			b.ReportMetric(mbs(proxy), "proxy-MB/s")
			b.ReportMetric(mbs(proxy)/mbs(direct), "ratio")
		})
	}
}

func BenchmarkLatency(b *testing.B) {
	e := newTestEnv(b)
	for _, mode := range []string{"http", "connect", "intercept", "new-tunnel"} {
		b.Run(mode, func(b *testing.B) {
			c := benchMode(b, e, mode, mode != "new-tunnel")
			url := c.url + "/bytes/1"
			var direct, proxy []time.Duration
			for b.Loop() {
				direct, proxy = direct[:0], proxy[:0]
				// Warm both paths (connections, leaf certificate).
				benchGet(b, c.direct, url, c.hdr, 1)
				benchGet(b, c.proxy, url, c.hdr, 1)
				for range 400 {
					direct = append(direct, benchGet(b, c.direct, url, c.hdr, 1))
					proxy = append(proxy, benchGet(b, c.proxy, url, c.hdr, 1))
				}
			}
			p50 := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds())
			}
			b.ReportMetric(p50(direct), "p50-direct-µs")
			b.ReportMetric(p50(proxy), "p50-proxy-µs")
			b.ReportMetric(p50(proxy)-p50(direct), "added-p50-µs")
		})
	}
}

// BenchmarkNewTunnel is the proxy's own cost of a new CONNECT tunnel, with
// no TLS on either side: the request, the checks, the lookup (a table),
// the connection upstream, one byte each way, the close and its log
// record. Run it with -benchmem, -cpuprofile or -memprofile to see what a
// tunnel costs.
func BenchmarkNewTunnel(b *testing.B) {
	port := echoServer(b)
	p, err := New(Options{
		Policy:   &Policy{Allow: MustParseEntries(FromUser, "up.test:"+port, "127.0.0.1:"+port)},
		Live:     filepath.Join(b.TempDir(), LiveFile),
		Resolver: newResolver("up.test", "127.0.0.1"),
		Log:      NewLog(io.Discard, nil),
	})
	if err != nil {
		b.Fatal(err)
	}
	addr := serve(b, p)
	req := []byte("CONNECT up.test:" + port + " HTTP/1.1\r\nHost: up.test:" + port + "\r\n\r\n")
	buf := make([]byte, 64)
	for b.Loop() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		const ok = "HTTP/1.1 200 Connection established\r\n\r\n"
		if _, err := io.ReadFull(c, buf[:len(ok)]); err != nil || string(buf[:len(ok)]) != ok {
			b.Fatalf("%q, %v", buf, err)
		}
		if _, err := c.Write([]byte{'x'}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// echoServer starts a TCP server on loopback that sends back whatever it
// reads, until the test ends, and returns its port.
func echoServer(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
