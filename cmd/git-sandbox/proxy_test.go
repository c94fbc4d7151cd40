package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// lineWriter hands each line written to it to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		s := w.buf.String()
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		w.lines <- s[:i]
		w.buf.Reset()
		w.buf.WriteString(s[i+1:])
	}
	return len(p), nil
}

// __proxy serves what its configuration allows, refuses the rest, logs
// both, and ends cleanly when told to stop.
func TestProxyCommand(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "proxy.json")
	logPath := filepath.Join(dir, "egress.log")
	err := egress.WriteConfig(cfgPath, &egress.ProxyConfig{
		Listen: "127.0.0.1:0",
		Allow:  egress.Rules(egress.MustParseEntries(egress.FromFlag, "127.0.0.1:"+port)),
		Log:    logPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lineWriter{lines: make(chan string, 10)}
	app := &App{Ctx: ctx, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr, UI: ui.New(stderr, ui.Options{})}
	done := make(chan error, 1)
	go func() { done <- (&ProxyCmd{Config: cfgPath}).Run(app) }()

	line := <-stderr.lines
	addr, ok := strings.CutPrefix(line, "git sandbox: proxy listening on ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}}
	resp, err := client.Get(up.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "upstream" {
		t.Fatalf("allowed: %d %q", resp.StatusCode, body)
	}
	resp, err = client.Get(fmt.Sprintf("http://127.0.0.2:%s/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("denied: %d", resp.StatusCode)
	}
	client.CloseIdleConnections()

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, err := netlog.SummarizeFile(logPath)
	if err != nil || s.Allowed != 1 || s.Denied != 1 {
		t.Fatalf("log summary %+v %v", s, err)
	}
}
