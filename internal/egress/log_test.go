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
	denied := 0
	for _, p := range []string{PreviousGeneration(path), path} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		err = ScanLog(f, func(r Record) error { denied++; return nil })
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if denied == 0 || denied >= n {
		t.Fatalf("%d denials in two generations (want some but not all %d kept)", denied, n)
	}
	lines := strings.Count(readFile(t, path)+readFile(t, PreviousGeneration(path)), "\n")
	if denied != lines {
		t.Fatalf("%d denials read, files hold %d lines", denied, lines)
	}
}
