package egress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
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
	// PolicyChange: an entry was allowed or denied while the sandbox
	// existed (Kind is allow or deny, Host the entry); not a decision
	// about a connection.
	PolicyChange = "policy"
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
	// Held is how long the connection waited for the user's answer
	// (network_prompt), in milliseconds.
	Held float64 `json:"held_ms,omitempty"`
}

// Log appends records to a file as JSON lines. It is safe for concurrent
// use; each record is one write on a file opened for appending.
//
// A log opened by path holds at most two generations of LogGenerationBytes:
// when the current file would grow past that, it becomes the path with
// ".1" appended (replacing the older one) and a new file is started. An
// agent making requests in a loop all night so fills a few megabytes of
// the host's disk, not all of it.
type Log struct {
	mu     sync.Mutex
	w      io.Writer
	c      io.Closer
	redact []redaction
	err    error

	path  string // set when opened by path: the log rotates
	size  int64  // bytes in the current generation
	limit int64
}

// LogGenerationBytes is the size at which a log file is rotated.
const LogGenerationBytes = 8 << 20

// PreviousGeneration is where a rotated log's older records are.
func PreviousGeneration(path string) string { return path + ".1" }

type redaction struct{ value, as []byte }

// OpenLog opens (or creates, mode 0600) the log at path for appending.
// Any of secrets' values that turns up in a record is written as
// "[secret NAME]" instead: the log is for the user to read and may be
// shown anywhere.
func OpenLog(path string, secrets []Secret) (*Log, error) {
	f, size, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	l := NewLog(f, secrets)
	l.c = f
	l.path, l.size, l.limit = path, size, LogGenerationBytes
	return l, nil
}

func openAppend(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("open egress log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open egress log: %w", err)
	}
	return f, fi.Size(), nil
}

// rotate starts a new generation; l.mu is held.
func (l *Log) rotate() error {
	if err := l.c.Close(); err != nil {
		return err
	}
	l.w, l.c = io.Discard, nil
	if err := os.Rename(l.path, PreviousGeneration(l.path)); err != nil {
		return fmt.Errorf("rotate egress log: %w", err)
	}
	f, size, err := openAppend(l.path)
	if err != nil {
		return err
	}
	l.w, l.c, l.size = f, f, size
	return nil
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
	// The host names and paths are the agent's: the log is read on a
	// terminal (git sandbox net --json, tail), so nothing in it acts there.
	line = append(termsafe.JSON(line), '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path != "" && l.c != nil && l.size > 0 && l.size+int64(len(line)) > l.limit {
		if err := l.rotate(); err != nil && l.err == nil {
			l.err = err
		}
	}
	n, err := l.w.Write(line)
	l.size += int64(n)
	if err != nil && l.err == nil {
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

// LogPolicyChange appends to the log at path a record for each entry
// a live change made: kind is "allow", "deny" or "allow once".
func LogPolicyChange(path, kind string, entries []Entry) error {
	l, err := OpenLog(path, nil)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for _, e := range entries {
		l.Write(Record{Time: now, Kind: kind, Host: e.String(), Decision: PolicyChange, Reason: string(FromLive)})
	}
	return l.Close()
}
