package egress

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLogConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.log")
	l, err := OpenLog(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				l.Write(Record{Time: time.Now(), Kind: "connect", Host: fmt.Sprintf("h%d.example.com", g), Port: 443,
					Decision: Allowed, Reason: strings.Repeat("r", 300), BytesUp: int64(i)})
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	lines := strings.Split(strings.TrimSuffix(readFile(t, path), "\n"), "\n")
	if len(lines) != 16*200 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
	}
}

func TestLogRedactsValues(t *testing.T) {
	s := Secret{Name: "TOKEN", Value: `real"value<with>json&chars`}
	var b strings.Builder
	l := NewLog(&b, []Secret{s})
	l.Write(Record{Host: "x.example.com", Decision: Denied, Reason: "echo " + s.Value})
	if strings.Contains(b.String(), "real") || !strings.Contains(b.String(), "[secret TOKEN]") {
		t.Fatalf("log line %s", b.String())
	}
}

func TestSummarize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.log")
	l, _ := OpenLog(path, nil)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, r := range []Record{
		{Host: "api.example.com", Port: 443, Decision: Allowed, BytesUp: 10, BytesDown: 100},
		{Host: "api.example.com", Port: 443, Decision: Allowed, BytesUp: 5, BytesDown: 50, Error: "connect: refused"},
		{Host: "evil.example.org", Port: 443, Decision: Denied, Reason: "not in the allow list"},
		{Host: "evil.example.org", Port: 443, Decision: Denied, Reason: "not in the allow list"},
		{Host: "paste.example.net", Port: 80, Decision: Leak, Reason: "placeholder of K in body", Secret: "K"},
		{Host: "a.example.com", Port: 443, Decision: Allowed},
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
	if s.Hosts[1].Reason != "not in the allow list" || s.Hosts[0].Reason != "placeholder of K in body" {
		t.Fatalf("reasons %+v", s.Hosts)
	}
	if empty, err := SummarizeFile(filepath.Join(t.TempDir(), "none")); err != nil || empty.Denied != 0 {
		t.Fatalf("missing log: %+v %v", empty, err)
	}
}

// TestLogRotates: a log never holds more than two generations, and the
// summary counts both.
func TestLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.log")
	l, err := OpenLog(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.limit = 4096
	const n = 200
	for i := 0; i < n; i++ {
		l.Write(Record{Time: time.Now(), Kind: "connect", Host: "flood.example.com", Port: 443, Decision: Denied, Reason: "not in the allow list"})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, PreviousGeneration(path)} {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() > 4096 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v", p, fi, err)
		}
	}
	s, err := SummarizeFile(path)
	if err != nil || s.Denied == 0 || s.Denied >= n {
		t.Fatalf("summary of two generations = %+v, %v (want some but not all %d denials kept)", s, err, n)
	}
	lines := strings.Count(readFile(t, path)+readFile(t, PreviousGeneration(path)), "\n")
	if s.Denied != lines {
		t.Fatalf("summary counts %d denials, files hold %d lines", s.Denied, lines)
	}
}
