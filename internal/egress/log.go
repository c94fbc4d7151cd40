package egress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Decisions in the log.
const (
	// Allowed: the destination is allowed; Status and Error say how it went.
	Allowed = "allowed"
	// Denied: the policy refused the destination.
	Denied = "denied"
	// Leak: a request carried a secret's placeholder where that secret may
	// not go, and was refused.
	Leak = "leak"
)

// Record is one line of the decision log: one CONNECT tunnel (written when
// it closes), one plain HTTP request, one request inside an intercepted
// tunnel, or one refusal. It never holds a secret's value.
type Record struct {
	Time time.Time `json:"time"`
	// Kind is connect, http or intercept.
	Kind   string `json:"kind"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host"`
	Port   uint16 `json:"port"`
	// Addr is the address the proxy connected to.
	Addr     string `json:"addr,omitempty"`
	Decision string `json:"decision"`
	// Reason says why a destination was denied or a request refused.
	Reason string `json:"reason,omitempty"`
	// Secret names the secret a request used, or the one it leaked.
	Secret string `json:"secret,omitempty"`
	// Status is the HTTP status the agent got (200 for an open tunnel).
	Status int `json:"status,omitempty"`
	// Error says why an allowed destination could not be reached.
	Error     string  `json:"error,omitempty"`
	BytesUp   int64   `json:"bytes_up"`
	BytesDown int64   `json:"bytes_down"`
	Duration  float64 `json:"duration_ms"`
}

// Log appends records to a file as JSON lines. It is safe for concurrent
// use; each record is one write on a file opened for appending.
type Log struct {
	mu     sync.Mutex
	w      io.Writer
	c      io.Closer
	redact []redaction
	err    error
}

type redaction struct{ value, as []byte }

// OpenLog opens (or creates, mode 0600) the log at path for appending.
// Any of secrets' values that turns up in a record is written as
// "[secret NAME]" instead: the log is for the user to read and may be
// shown anywhere.
func OpenLog(path string, secrets []Secret) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open egress log: %w", err)
	}
	l := NewLog(f, secrets)
	l.c = f
	return l, nil
}

// NewLog writes records to w.
func NewLog(w io.Writer, secrets []Secret) *Log {
	l := &Log{w: w}
	for _, s := range secrets {
		for _, v := range []string{s.Value, jsonEscaped(s.Value)} {
			l.redact = append(l.redact, redaction{[]byte(v), []byte("[secret " + s.Name + "]")})
		}
	}
	return l
}

// jsonEscaped is s as it appears inside a JSON string.
func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// Write appends rec. The first write error is kept and returned by Close;
// the proxy goes on serving without a log rather than stop the agent.
func (l *Log) Write(rec Record) {
	if l == nil {
		return
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	for _, r := range l.redact {
		if len(r.value) > 0 && bytes.Contains(line, r.value) {
			line = bytes.ReplaceAll(line, r.value, r.as)
		}
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(line); err != nil && l.err == nil {
		l.err = err
	}
}

// Close closes the file and reports the first write error.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.c != nil {
		err = l.c.Close()
	}
	return errors.Join(l.err, err)
}

// ScanLog calls fn for each record in r, in order. A line that is not a
// record (a write cut short) is skipped.
func ScanLog(r io.Reader, fn func(Record) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Decision == "" {
			continue
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return sc.Err()
}

// HostSummary is what the log says about one host and port.
type HostSummary struct {
	Host      string    `json:"host"`
	Port      uint16    `json:"port"`
	Allowed   int       `json:"allowed"`
	Denied    int       `json:"denied"`
	Leaks     int       `json:"leaks"`
	Errors    int       `json:"errors"`
	BytesUp   int64     `json:"bytes_up"`
	BytesDown int64     `json:"bytes_down"`
	Last      time.Time `json:"last"`
	// Reason is the newest denial's or leak's reason.
	Reason string `json:"reason,omitempty"`
}

// Summary counts a log's decisions per host.
type Summary struct {
	Allowed int `json:"allowed"`
	Denied  int `json:"denied"`
	Leaks   int `json:"leaks"`
	// Hosts is ordered: hosts with leaks first, then denials, then by name.
	Hosts []HostSummary `json:"hosts"`
}

// Summarize reads a log and counts its decisions.
func Summarize(r io.Reader) (Summary, error) {
	var s Summary
	byHost := map[string]*HostSummary{}
	err := ScanLog(r, func(rec Record) error {
		key := rec.Host + ":" + strconv.Itoa(int(rec.Port))
		h := byHost[key]
		if h == nil {
			h = &HostSummary{Host: rec.Host, Port: rec.Port}
			byHost[key] = h
		}
		switch rec.Decision {
		case Allowed:
			s.Allowed++
			h.Allowed++
			if rec.Error != "" {
				h.Errors++
			}
		case Denied:
			s.Denied++
			h.Denied++
			h.Reason = rec.Reason
		case Leak:
			s.Leaks++
			h.Leaks++
			h.Reason = rec.Reason
		}
		h.BytesUp += rec.BytesUp
		h.BytesDown += rec.BytesDown
		if rec.Time.After(h.Last) {
			h.Last = rec.Time
		}
		return nil
	})
	for _, h := range byHost {
		s.Hosts = append(s.Hosts, *h)
	}
	sort.Slice(s.Hosts, func(i, j int) bool {
		a, b := s.Hosts[i], s.Hosts[j]
		if (a.Leaks > 0) != (b.Leaks > 0) {
			return a.Leaks > 0
		}
		if (a.Denied > 0) != (b.Denied > 0) {
			return a.Denied > 0
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Port < b.Port
	})
	return s, err
}

// SummarizeFile summarises the log at path; a missing log is an empty one.
func SummarizeFile(path string) (Summary, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Summary{}, nil
	}
	if err != nil {
		return Summary{}, fmt.Errorf("read egress log: %w", err)
	}
	defer f.Close()
	s, err := Summarize(f)
	if err != nil {
		return s, fmt.Errorf("read egress log: %w", err)
	}
	return s, nil
}
