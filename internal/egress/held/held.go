// Package held is the waiting room of the egress proxy's prompting
// (network_prompt): a connection to a host off the allow list waits here
// until the user answers or its time runs out, and the requests waiting are
// written to a small file the host reads (git sandbox dash, net pending).
//
// The channel has two files and each has one writer. The proxy writes the
// held requests (File) into its log directory, the one directory of its
// own it may write; the host answers through the live changes' file the
// proxy already reads (egress.LiveFile, an allow, a denial, or an entry
// allowed once until a time), written under the sandbox's record lock.
// Neither is mounted into the agent's container. A host name in File comes
// from the agent: readers escape it before it reaches a terminal.
package held

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// File is the held requests' file in the proxy's log directory.
const File = "held.json"

// MaxHeld bounds the connections held at once; one more is refused at
// once, as without prompting.
const MaxHeld = 64

// poll is how often a held connection looks at the policy again.
var poll = 200 * time.Millisecond

// Options turn prompting on: the held requests are written to File, and
// each waits Timeout for an answer.
type Options struct {
	File    string
	Timeout time.Duration
}

// Config is Options as the proxy's configuration file writes them.
type Config struct {
	Held    string `json:"held"`
	Timeout string `json:"timeout"`
}

// Options checks c and turns it into Options.
func (c *Config) Options() (*Options, error) {
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d <= 0 || c.Held == "" {
		return nil, fmt.Errorf("proxy config: prompt needs held and a timeout (%q, %q)", c.Held, c.Timeout)
	}
	return &Options{File: c.Held, Timeout: d}, nil
}

// Request is one question: the connections to one destination held
// together.
type Request struct {
	// ID names the question; an answer of "allow once" names it.
	ID string `json:"id"`
	// Host and Port are the destination as the agent asked for it; Kind
	// is "connect" or "http".
	Host string `json:"host"`
	Port uint16 `json:"port"`
	Kind string `json:"kind"`
	// Entry is what git sandbox net allow takes to allow it.
	Entry string `json:"entry"`
	// Since is when the first connection came; Until when they are all
	// refused without an answer.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Count is how many connections wait.
	Count int `json:"count"`
}

// Verdict is what became of a held connection.
type Verdict int

const (
	// Pending: no answer yet (what a decide function says meanwhile).
	Pending Verdict = iota
	// Allowed: the policy lets it through now.
	Allowed
	// Denied: the user denied it.
	Denied
	// TimedOut: no answer in time.
	TimedOut
	// Full: too many connections were held already; not held.
	Full
)

// Room holds connections and keeps File up to date. A nil *Room holds
// nothing.
type Room struct {
	path    string
	timeout time.Duration
	errs    func(error)

	mu     sync.Mutex
	groups map[string]*group
	total  int
}

type group struct {
	req Request
}

// New is a room writing path, holding each question for timeout; errs
// receives failures to write the file. The file is emptied (a previous
// proxy's questions are gone with its connections).
func New(path string, timeout time.Duration, errs func(error)) *Room {
	r := &Room{path: path, timeout: timeout, errs: errs, groups: map[string]*group{}}
	r.writeLocked()
	return r
}

// Timeout is how long a question waits.
func (r *Room) Timeout() time.Duration { return r.timeout }

// Wait holds one connection to host:port (kind "connect" or "http",
// entry what allows it) until decide says Allowed or Denied, the
// question's time runs out (TimedOut), or ctx ends (TimedOut).
// Connections to one destination wait on one question. decide is called
// about every 200 ms.
func (r *Room) Wait(ctx context.Context, host string, port uint16, kind, entry string, decide func() Verdict) Verdict {
	g, ok := r.join(host, port, kind, entry)
	if !ok {
		return Full
	}
	defer r.leave(g)
	t := time.NewTicker(poll)
	defer t.Stop()
	deadline := time.NewTimer(time.Until(g.req.Until))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return TimedOut
		case <-deadline.C:
			// One last look: an answer may have come with the deadline.
			if v := decide(); v != Pending {
				return v
			}
			return TimedOut
		case <-t.C:
			if v := decide(); v != Pending {
				return v
			}
		}
	}
}

func (r *Room) join(host string, port uint16, kind, entry string) (*group, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total >= MaxHeld {
		return nil, false
	}
	key := fmt.Sprintf("%s %s %d", kind, host, port)
	now := time.Now()
	g := r.groups[key]
	if g == nil || !now.Before(g.req.Until) {
		// A new question (one whose time ran out is not joined: its
		// connections are being refused).
		g = &group{req: Request{ID: newID(), Host: host, Port: port, Kind: kind, Entry: entry, Since: now.UTC(), Until: now.Add(r.timeout).UTC()}}
		r.groups[key] = g
	}
	g.req.Count++
	r.total++
	r.writeLocked()
	return g, true
}

func (r *Room) leave(g *group) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g.req.Count--
	r.total--
	if g.req.Count == 0 {
		for k, x := range r.groups {
			if x == g {
				delete(r.groups, k)
			}
		}
	}
	r.writeLocked()
}

// writeLocked writes the questions waiting, oldest first.
func (r *Room) writeLocked() {
	reqs := []Request{}
	for _, g := range r.groups {
		if g.req.Count > 0 {
			reqs = append(reqs, g.req)
		}
	}
	if err := Write(r.path, reqs); err != nil && r.errs != nil {
		r.errs(err)
	}
}

// Entry is what allows host:port: the bare host when the port is the
// kind's default (defaultPort).
func Entry(host string, port, defaultPort uint16) string {
	if port == defaultPort {
		return host
	}
	return fmt.Sprintf("%s:%d", host, port)
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Write writes reqs to path, atomically, oldest first.
func Write(path string, reqs []Request) error {
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].Since.Before(reqs[j].Since) })
	b, err := json.MarshalIndent(struct {
		Requests []Request `json:"requests"`
	}{reqs}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write held requests: %w", err)
	}
	return nil
}

// maxFile bounds what Read takes: MaxHeld questions are far less.
const maxFile = 1 << 20

// Read returns the questions in path still waiting at now; a missing file
// is none.
func Read(path string, now time.Time) ([]Request, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read held requests: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile))
	if err != nil {
		return nil, fmt.Errorf("read held requests: %w", err)
	}
	qs, err := Parse(b, now)
	if err != nil {
		return nil, fmt.Errorf("read held requests %s: %w", path, err)
	}
	return qs, nil
}

// Parse returns the questions of a file's content (Write's) still
// waiting at now.
func Parse(b []byte, now time.Time) ([]Request, error) {
	var v struct {
		Requests []Request `json:"requests"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	var out []Request
	for _, q := range v.Requests {
		if now.Before(q.Until) && q.Count > 0 {
			out = append(out, q)
		}
	}
	return out, nil
}
