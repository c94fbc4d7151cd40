package netlog

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"golang.org/x/net/publicsuffix"
)

// FoldAt is how many names below one registrable domain Suggest folds
// into a wildcard.
const FoldAt = 3

// Suggestion is one entry of a suggested allow list.
type Suggestion struct {
	// Entry is what allow takes.
	Entry string
	// Hosts are the names a wildcard entry stands for.
	Hosts []string
	// Seen is how many decisions of the logs it covers; Denied how many of
	// them were denials.
	Seen, Denied int
}

// Suggest is the smallest allow list that lets through every destination
// the summaries saw, allowed or denied: a host with the port when it is
// not 443 or 80, and FoldAt or more names below one registrable domain
// (on one port) as one wildcard. Leaks are left out: the destination was
// allowed, the request was what was refused.
func Suggest(sums ...Summary) []Suggestion {
	type key struct {
		host string
		port uint16
	}
	seen := map[key]*Suggestion{}
	for _, s := range sums {
		for _, h := range s.Hosts {
			n := h.Allowed + h.Denied
			if n == 0 || h.Host == "" {
				continue
			}
			port := h.Port
			if port == 443 || port == 80 {
				port = 0
			}
			k := key{h.Host, port}
			if seen[k] == nil {
				seen[k] = &Suggestion{}
			}
			seen[k].Seen += n
			seen[k].Denied += h.Denied
		}
	}
	// Group the names by registrable domain and port.
	groups := map[key][]string{}
	var out []Suggestion
	for k, s := range seen {
		entry := entryFor(k.host, k.port)
		if entry == "" {
			continue
		}
		d := registrable(k.host)
		if d == "" || d == k.host {
			s.Entry = entry
			out = append(out, *s)
			continue
		}
		g := key{d, k.port}
		groups[g] = append(groups[g], k.host)
	}
	for g, hosts := range groups {
		if len(hosts) < FoldAt {
			for _, h := range hosts {
				s := *seen[key{h, g.port}]
				s.Entry = entryFor(h, g.port)
				out = append(out, s)
			}
			continue
		}
		sort.Strings(hosts)
		w := Suggestion{Entry: entryFor("*."+g.host, g.port), Hosts: hosts}
		for _, h := range hosts {
			w.Seen += seen[key{h, g.port}].Seen
			w.Denied += seen[key{h, g.port}].Denied
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entry < out[j].Entry })
	return out
}

// entryFor is the allow entry for a host (or *.domain) and a port (0 for
// the default ones), or "" when the log's host is no entry.
func entryFor(host string, port uint16) string {
	h := host
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() && port != 0 {
		h = "[" + host + "]"
	}
	if port != 0 {
		h += ":" + strconv.Itoa(int(port))
	}
	if _, err := egress.ParseEntry(h, ""); err != nil {
		return ""
	}
	return h
}

// registrable is the name's registrable domain (example.co.uk for
// a.b.example.co.uk), "" for an address or a name without one.
func registrable(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return ""
	}
	return d
}

// SuggestTOML writes suggestions as an allow list in TOML, with a comment
// on the entries seen once and the names a wildcard stands for.
func SuggestTOML(sugs []Suggestion, from string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The hosts %s reached or was denied (git sandbox net suggest).\n", from)
	if len(sugs) == 0 {
		b.WriteString("allow = []\n")
		return b.String()
	}
	b.WriteString("allow = [\n")
	for _, s := range sugs {
		var notes []string
		if len(s.Hosts) > 0 {
			notes = append(notes, strings.Join(s.Hosts, ", "))
		}
		if s.Seen == 1 {
			notes = append(notes, "seen once")
		}
		if s.Denied == s.Seen {
			notes = append(notes, "denied")
		}
		line := "  " + strconv.Quote(s.Entry) + ","
		if len(notes) > 0 {
			line += " # " + strings.Join(notes, "; ")
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("]\n")
	return b.String()
}
