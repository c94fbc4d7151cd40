package egress

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/meter"
)

// serveSSE answers a Messages API stream of about n bytes (query
// "bytes"), its usage in the first and last events, each event flushed.
func serveSSE(w http.ResponseWriter, n string) {
	size, _ := strconv.Atoi(n)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Request-Id", "req_test")
	fl := w.(http.Flusher)
	fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":1000,\"output_tokens\":1}}}\n\n")
	fl.Flush()
	ev := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("y", 8000) + "\"}}\n\n"
	for sent := 0; sent < size; sent += len(ev) {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		fl.Flush()
	}
	fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2000}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

// meteredProxy is e's proxy again with a meter, its usage log and its
// settings file.
func meteredProxy(t testing.TB, e *testEnv, budget meter.Budget) (u *url.URL, usage, settings string) {
	t.Helper()
	dir := t.TempDir()
	usage, settings = filepath.Join(dir, meter.UsageFile), filepath.Join(dir, "meter.json")
	if err := meter.WriteSettings(settings, &meter.Settings{Prices: meter.WithBuiltin(nil), Budget: budget}); err != nil {
		t.Fatal(err)
	}
	m, err := meter.Open(usage, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	o := e.opts
	o.Meter = m
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &url.URL{Scheme: "http", Host: serve(t, p)}, usage, settings
}

func TestProxyMetersModelCalls(t *testing.T) {
	e := newTestEnv(t)
	u, usage, settings := meteredProxy(t, e, meter.Budget{USD: 0.01})
	e.proxyURL = u
	c := e.client(t, false)
	url := "https://api.test:" + e.port + "/sse/v1/messages?bytes=100000"
	// 1000 in at $3/M and 2000 out at $15/M: $0.033, past the budget.
	resp, body := do(t, c, "POST", url, strings.NewReader("{}"), "X-Api-Key", e.api.Placeholder)
	if resp.StatusCode != 200 || !strings.Contains(body, `"message_stop"`) || len(body) < 100000 {
		t.Fatalf("the stream was not passed on whole: %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, body = do(t, c, "POST", url, strings.NewReader("{}"), "X-Api-Key", e.api.Placeholder)
	if resp.StatusCode != 429 || !strings.Contains(body, `"rate_limit_error"`) || !strings.Contains(body, "budget of $0.01") {
		t.Fatalf("past the budget: %d %s", resp.StatusCode, body)
	}
	if n := len(e.saw()); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1", n)
	}
	// Not a model call: neither metered nor refused.
	if resp, _ := do(t, c, "GET", "https://api.test:"+e.port+"/models", nil, "X-Api-Key", e.api.Placeholder); resp.StatusCode != 200 {
		t.Errorf("GET /models: %d", resp.StatusCode)
	}
	// A raised budget lets the next call through, without a restart.
	if err := meter.WriteSettings(settings, &meter.Settings{Prices: meter.WithBuiltin(nil), Budget: meter.Budget{USD: 1}}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, c, "POST", url, strings.NewReader("{}"), "X-Api-Key", e.api.Placeholder); resp.StatusCode != 200 {
		t.Errorf("after the raise: %d", resp.StatusCode)
	}
	var recs []meter.Record
	meter.ReadLog(usage, time.Time{}, func(r *meter.Record) { recs = append(recs, *r) })
	if len(recs) != 3 {
		t.Fatalf("%d usage records, want 3: %+v", len(recs), recs)
	}
	want := meter.Usage{Input: 1000, Output: 2000}
	if r := recs[0]; r.Usage != want || r.Model != "claude-sonnet-4-5" || r.Host != "api.test" || r.Unknown || r.RequestID != "req_test" || r.CostUSD < 0.0329 || r.CostUSD > 0.0331 {
		t.Errorf("first record: %+v", r)
	}
	if r := recs[1]; r.Refused != "budget" || r.Status != 429 {
		t.Errorf("refusal record: %+v", r)
	}
	if recs[2].Usage != want {
		t.Errorf("third record: %+v", recs[2])
	}
}

// BenchmarkMeteredStream: a 20 MB event stream through the broker, with
// the meter and without, in one run, alternating: throughput (best of 10)
// and the time to the first byte (median of 50).
//
//	ratio (target ≥ 0.95), ttfb-added-µs (target ≤ 1000)
func BenchmarkMeteredStream(b *testing.B) {
	e := newTestEnv(b)
	plain := benchMode(b, e, "intercept", true)
	mu, _, _ := meteredProxy(b, e, meter.Budget{})
	e.proxyURL = mu
	metered := benchMode(b, e, "intercept", true)
	const size = 20 << 20
	url := plain.url + "/sse/v1/messages?bytes=" + strconv.Itoa(size)
	fetch := func(c *http.Client, first bool) time.Duration {
		req, _ := http.NewRequest("POST", url, strings.NewReader("{}"))
		req.Header.Set("X-Api-Key", e.api.Placeholder)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if first {
			var one [1]byte
			if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}
		if n, err := io.Copy(io.Discard, resp.Body); err != nil || n < size {
			b.Fatalf("%d bytes, %v", n, err)
		}
		return time.Since(start)
	}
	var bare, met time.Duration
	var tBare, tMet []time.Duration
	for b.Loop() {
		bare, met = time.Hour, time.Hour
		for range 10 {
			bare = min(bare, fetch(plain.proxy, false))
			met = min(met, fetch(metered.proxy, false))
		}
		tBare, tMet = tBare[:0], tMet[:0]
		url = plain.url + "/sse/v1/messages?bytes=0"
		for range 50 {
			tBare = append(tBare, fetch(plain.proxy, true))
			tMet = append(tMet, fetch(metered.proxy, true))
		}
		url = plain.url + "/sse/v1/messages?bytes=" + strconv.Itoa(size)
	}
	b.ReportMetric(float64(size)/1e6/bare.Seconds(), "unmetered-MB/s")
	b.ReportMetric(float64(size)/1e6/met.Seconds(), "metered-MB/s")
	b.ReportMetric(bare.Seconds()/met.Seconds(), "ratio")
	b.ReportMetric(float64(median(tMet)-median(tBare))/1e3, "ttfb-added-µs")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
