package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The front serves a CONNECT itself: a refusal is one whole answer (its
// length, the reason) and the connection's end; a request it cannot read,
// or a head too large, is a 400; a CONNECT whose first bytes come in
// pieces goes to net/http's server and is served the same; a plain
// request on the same proxy is net/http's, kept alive.
func TestFrontServesConnect(t *testing.T) {
	port := echoServer(t)
	p, err := New(Options{Policy: &Policy{Allow: MustParseEntries(FromUser, "127.0.0.1:"+port)}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, p)
	ask := func(pieces ...string) (*http.Response, *bufio.Reader, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		for _, s := range pieces {
			if _, err := io.WriteString(c, s); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("%q: %v", pieces, err)
		}
		return resp, br, c
	}

	resp, br, _ := ask("CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || resp.ContentLength != int64(len(body)) || !strings.Contains(string(body), "not in the allow list") || err != nil {
		t.Errorf("refused: %s, length %d, %q, %v", resp.Status, resp.ContentLength, body, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection after a refusal: %v, want its end", err)
	}

	resp, _, _ = ask("CONNECT 127.0.0.1:" + port + " HTTP/9\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a request that is not HTTP/1: %s", resp.Status)
	}
	resp, _, _ = ask("CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\nX: " + strings.Repeat("a", maxHeaderBytes+1) + "\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a head over %d bytes: %s", maxHeaderBytes, resp.Status)
	}

	for _, pieces := range [][]string{
		{"CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\nHost: x\r\n\r\nhello"},
		{"CONN", "ECT 127.0.0.1:" + port + " HTTP/1.1\r\nHost: x\r\n\r\n", "hello"},
	} {
		// (In one piece, the bytes right behind the request are carried
		// too.)
		resp, br, _ := ask(pieces...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %s", pieces, resp.Status)
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "hello" {
			t.Errorf("%q: the tunnel echoed %q, %v", pieces, got, err)
		}
	}
}

// workers counts the front's workers, and of them those waiting for a
// connection (serving none).
func workers() (all, idle int) {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "egress.(*Proxy).work(") {
			all++
			if !strings.Contains(g, "egress.(*Proxy).sniff(") {
				idle++
			}
		}
	}
	return all, idle
}

// waitWorkers waits until there are n workers, all of them idle.
func waitWorkers(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		all, idle := workers()
		if all == n && idle == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d workers, %d of them idle; want %d, all idle", all, idle, n)
		}
	}
}

// A connection goes to a worker that served one before and waits for
// another; there are as many workers as connections at once, and an idle
// worker ends after p.workerIdle.
func TestFrontReusesWorkers(t *testing.T) {
	port := echoServer(t)
	p, err := New(Options{
		Policy:   &Policy{Allow: MustParseEntries(FromUser, "up.test:"+port, "127.0.0.1:"+port)},
		Resolver: newResolver("up.test", "127.0.0.1"),
		Log:      NewLog(io.Discard, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.workerIdle = 300 * time.Millisecond
	addr := serve(t, p)
	open := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT up.test:%s HTTP/1.1\r\nHost: up.test:%s\r\n\r\n", port, port)
		buf := make([]byte, 64)
		const ok = "HTTP/1.1 200 Connection established\r\n\r\nx"
		c.Write([]byte("x"))
		if _, err := io.ReadFull(c, buf[:len(ok)]); err != nil || string(buf[:len(ok)]) != ok {
			t.Fatalf("through the tunnel: %q, %v", buf, err)
		}
		return c
	}
	waitWorkers(t, 0)
	for range 5 {
		open().Close()
		waitWorkers(t, 1)
	}
	var cs []net.Conn
	for range 3 {
		cs = append(cs, open())
	}
	if all, _ := workers(); all != 3 {
		t.Fatalf("%d workers for 3 connections at once", all)
	}
	for _, c := range cs {
		c.Close()
	}
	waitWorkers(t, 3)
	time.Sleep(p.workerIdle)
	waitWorkers(t, 0)
}
