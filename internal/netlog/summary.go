// Package netlog reads the egress proxy's decision log on this machine:
// what each host was allowed and denied (Summarize), and the smallest
// allow list a run needed (Suggest). The proxy writes the log
// (internal/egress).
package netlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress"
)

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
	// Error is why the newest allowed connection that failed did (the
	// proxy's own words: the agent got a 502).
	Error string `json:"error,omitempty"`
}

// Failure is a host's failed connections for a table: how many and the
// newest one's cause in short ("2 failed: connection refused"), "" when
// none failed.
func (h HostSummary) Failure() string {
	if h.Errors == 0 {
		return ""
	}
	return strconv.Itoa(h.Errors) + " failed: " + Cause(h.Error)
}

// causes are the short names of the usual ways a connection fails, by a
// piece of Go's error text.
var causes = []struct{ in, cause string }{
	{"connection refused", "connection refused"},
	{"connection reset", "connection reset"},
	{"no such host", "the name does not resolve"},
	{"server misbehaving", "the name does not resolve"},
	{"i/o timeout", "timed out"},
	{"deadline exceeded", "timed out"},
	{"no route to host", "no route to the host"},
	{"network is unreachable", "no route to the host"},
	{"EOF", "the host closed the connection"},
}

// Cause is the short cause of a failed connection from the proxy's error
// text: a TLS error with its last words, the usual network errors by
// name, anything else as it is.
func Cause(err string) string {
	if i := strings.Index(err, "tls: "); i >= 0 {
		return "TLS error: " + lastPart(err[i:])
	}
	if i := strings.Index(err, "x509: "); i >= 0 {
		return "TLS error: " + err[i:]
	}
	for _, c := range causes {
		if strings.Contains(err, c.in) {
			return c.cause
		}
	}
	return err
}

// lastPart is what follows an error's last ": ", unless that is too
// little to say anything.
func lastPart(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i > 12 {
		return s[i+2:]
	}
	return s
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
	err := egress.ScanLog(r, func(rec egress.Record) error {
		if rec.Decision == egress.PolicyChange {
			return nil
		}
		key := rec.Host + ":" + strconv.Itoa(int(rec.Port))
		h := byHost[key]
		if h == nil {
			h = &HostSummary{Host: rec.Host, Port: rec.Port}
			byHost[key] = h
		}
		switch rec.Decision {
		case egress.Allowed:
			s.Allowed++
			h.Allowed++
			if rec.Error != "" {
				h.Errors++
				h.Error = rec.Error
			}
		case egress.Denied:
			s.Denied++
			h.Denied++
			h.Reason = rec.Reason
		case egress.Leak:
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

// SummarizeFile summarises the log at path, its previous generation
// included; a missing log is an empty one.
func SummarizeFile(path string) (Summary, error) {
	var rs []io.Reader
	for _, p := range []string{egress.PreviousGeneration(path), path} {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Summary{}, fmt.Errorf("read egress log: %w", err)
		}
		defer f.Close()
		rs = append(rs, f)
	}
	s, err := Summarize(io.MultiReader(rs...))
	if err != nil {
		return s, fmt.Errorf("read egress log: %w", err)
	}
	return s, nil
}
