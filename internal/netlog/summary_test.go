package netlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress"
)

func TestSummarize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.log")
	l, _ := egress.OpenLog(path, nil)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, r := range []egress.Record{
		{Host: "api.example.com", Port: 443, Decision: egress.Allowed, BytesUp: 10, BytesDown: 100},
		{Host: "api.example.com", Port: 443, Decision: egress.Allowed, BytesUp: 5, BytesDown: 50, Error: "connect: refused"},
		{Host: "evil.example.org", Port: 443, Decision: egress.Denied, Reason: "not in the allow list"},
		{Host: "evil.example.org", Port: 443, Decision: egress.Denied, Reason: "not in the allow list"},
		{Host: "paste.example.net", Port: 80, Decision: egress.Leak, Reason: "placeholder of K in body", Secret: "K"},
		{Host: "a.example.com", Port: 443, Decision: egress.Allowed},
	} {
		r.Time = t0.Add(time.Duration(i) * time.Second)
		l.Write(r)
	}
	l.Close()
	// A line cut short by a crash is skipped.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-11-30T12:00:09Z","host":"cut`)
	f.Close()

	s, err := SummarizeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Allowed != 3 || s.Denied != 2 || s.Leaks != 1 {
		t.Fatalf("counts %+v", s)
	}
	var order []string
	for _, h := range s.Hosts {
		order = append(order, h.Host)
	}
	if strings.Join(order, " ") != "paste.example.net evil.example.org a.example.com api.example.com" {
		t.Fatalf("order %v", order)
	}
	api := s.Hosts[3]
	if api.Allowed != 2 || api.Errors != 1 || api.BytesUp != 15 || api.BytesDown != 150 || !api.Last.Equal(t0.Add(time.Second)) {
		t.Fatalf("api %+v", api)
	}
	if api.Error != "connect: refused" || api.Failure() != "1 failed: connect: refused" || s.Hosts[2].Failure() != "" {
		t.Errorf("api's failure: %q, %q", api.Error, api.Failure())
	}
	if s.Hosts[1].Reason != "not in the allow list" || s.Hosts[0].Reason != "placeholder of K in body" {
		t.Fatalf("reasons %+v", s.Hosts)
	}
	if empty, err := SummarizeFile(filepath.Join(t.TempDir(), "none")); err != nil || empty.Denied != 0 {
		t.Fatalf("missing log: %+v %v", empty, err)
	}
}

func TestSummarizeSkipsPolicyChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.jsonl")
	if err := egress.LogPolicyChange(path, "allow", egress.MustParseEntries(egress.FromLive, "a.test")); err != nil {
		t.Fatal(err)
	}
	s, err := SummarizeFile(path)
	if err != nil || len(s.Hosts) != 0 {
		t.Fatalf("summary %+v %v", s, err)
	}
	if got := readFile(t, path); !strings.Contains(got, `"decision":"policy"`) || !strings.Contains(got, `"kind":"allow"`) {
		t.Fatalf("log %q", got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCause: a failed connection's cause is named in short: refused, TLS
// errors with their last words, names that do not resolve, timeouts.
func TestCause(t *testing.T) {
	for in, want := range map[string]string{
		"dial tcp 10.1.2.3:443: connect: connection refused":                               "connection refused",
		"tls: failed to verify certificate: x509: certificate signed by unknown authority": "TLS error: certificate signed by unknown authority",
		"remote error: tls: handshake failure":                                             "TLS error: handshake failure",
		"lookup api.example.com on 127.0.0.11:53: no such host":                            "the name does not resolve",
		"dial tcp 10.1.2.3:443: i/o timeout":                                               "timed out",
		"read tcp 10.1.2.3:5000->10.1.2.4:443: read: connection reset by peer":             "connection reset",
		"the upstream answered with something that is not HTTP":                            "the upstream answered with something that is not HTTP",
	} {
		if got := Cause(in); got != want {
			t.Errorf("Cause(%q) = %q, want %q", in, got, want)
		}
	}
}
