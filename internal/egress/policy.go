package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Kind is how the agent asked to reach a destination.
type Kind int

const (
	// Connect is a CONNECT tunnel; a port left out means 443.
	Connect Kind = iota
	// HTTP is a plain HTTP request in absolute form; a port left out means 80.
	HTTP
)

// DefaultPort is the port an entry without one allows for k.
func (k Kind) DefaultPort() uint16 {
	if k == HTTP {
		return 80
	}
	return 443
}

// String is the kind as the log writes it.
func (k Kind) String() string {
	if k == HTTP {
		return "http"
	}
	return "connect"
}

// Source says where an allow-list entry came from, so that `git sandbox
// config show` can print it next to the entry.
type Source string

// The sources of entries. An adapter's entries use AdapterSource.
const (
	// FromUser is the user's own config file.
	FromUser Source = "user config"
	// FromFlag is --allow on the command line.
	FromFlag Source = "--allow"
	// FromRepository is the repository's .sandbox.toml, which may only remove.
	FromRepository Source = "repository"
)

// AdapterSource is the source of the entries an agent adapter needs.
func AdapterSource(agent string) Source { return Source("agent " + agent) }

// SecretSource is the source of an entry added for a secret's host.
func SecretSource(name string) Source { return Source("secret " + name) }

func (s Source) isSecret() bool { return strings.HasPrefix(string(s), "secret ") }

// Entry is one line of an allow list: a host name, a wildcard suffix or an
// IP address, with an optional port.
type Entry struct {
	// Host is the lower-case host name without a trailing dot; for a
	// wildcard it is the suffix after "*.". Empty for an address.
	Host string
	// Wildcard makes the entry match every name below Host (not Host itself).
	Wildcard bool
	// Addr is the address of an IP entry.
	Addr netip.Addr
	// Port is the one port allowed; 0 allows 443 for CONNECT and 80 for
	// plain HTTP.
	Port uint16
	// Source is where the entry came from.
	Source Source
	// Methods and Paths, when set, are the only methods and path prefixes
	// the entry allows (see ParseAllowEntry).
	Methods, Paths []string
}

const entryForms = `entries look like api.example.com, *.example.com, example.com:8443, 192.0.2.7 or [2001:db8::7]:443`

// ParseEntry parses an allow-list entry and records its source. Errors name
// the entry and say what is wrong with it.
func ParseEntry(s string, src Source) (Entry, error) {
	e, why := parseEntry(s)
	if why != "" {
		return Entry{}, usererr.New("allow entry %q: %s", s, why).Hint("%s", entryForms)
	}
	e.Source = src
	return e, nil
}

// MustParseEntries parses entries that are part of the program (an
// adapter's list) and panics on a mistake there.
func MustParseEntries(src Source, entries ...string) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, s := range entries {
		e, err := ParseEntry(s, src)
		if err != nil {
			panic(err)
		}
		out = append(out, e)
	}
	return out
}

func parseEntry(s string) (Entry, string) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "":
		return Entry{}, "empty"
	case strings.Contains(s, "://"):
		return Entry{}, "write the host without a scheme"
	case strings.ContainsAny(s, "/?#"):
		return Entry{}, "write the host without a path"
	case strings.Contains(s, "@"):
		return Entry{}, "an entry has no user name"
	case strings.ContainsAny(s, " \t\r\n%"):
		return Entry{}, "not a host name"
	}
	host, port, why := splitHostPort(s)
	if why != "" {
		return Entry{}, why
	}
	host = strings.TrimSuffix(host, ".")
	var e Entry
	if port != "" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return Entry{}, fmt.Sprintf("port %q is not a number from 1 to 65535", port)
		}
		e.Port = uint16(p)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Entry{}, "an address with a zone cannot be allowed"
		}
		e.Addr = a.Unmap()
		return e, ""
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if why := checkHostName(rest); why != "" {
			return Entry{}, why
		}
		if !strings.Contains(rest, ".") {
			return Entry{}, "a wildcard must name a domain below a top-level domain"
		}
		e.Host, e.Wildcard = rest, true
		return e, ""
	}
	if strings.Contains(host, "*") {
		return Entry{}, `a wildcard is written "*." followed by a domain`
	}
	if why := checkHostName(host); why != "" {
		return Entry{}, why
	}
	e.Host = host
	return e, ""
}

// splitHostPort splits "host", "host:port", "[v6]", "[v6]:port" and a bare
// IPv6 address.
func splitHostPort(s string) (host, port, why string) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", "missing ]"
		}
		host, rest := s[1:end], s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok || p == "" {
				return "", "", "expected :port after ]"
			}
			port = p
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return "", "", "not an IPv6 address between [ and ]"
		}
		return host, port, ""
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", ""
	case 1:
		h, p, _ := strings.Cut(s, ":")
		if p == "" {
			return "", "", "empty port"
		}
		return h, p, ""
	default:
		if _, err := netip.ParseAddr(s); err == nil {
			return s, "", ""
		}
		return "", "", "write an IPv6 address with a port as [address]:port"
	}
}

// checkHostName says what is wrong with a lower-case host name, or "".
func checkHostName(h string) string {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "empty host name"
	}
	if len(h) > 253 {
		return "host name longer than 253 characters"
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" {
			return "empty label in host name"
		}
		if len(l) > 63 {
			return "host name label longer than 63 characters"
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "host name label starts or ends with -"
		}
		for _, c := range l {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return fmt.Sprintf("%q is not allowed in a host name (use the xn-- form for international names)", c)
			}
		}
	}
	// No top-level domain is all digits; names like 127.1 or 2130706433
	// are addresses in a form some resolvers accept.
	if allDigits(labels[len(labels)-1]) {
		return "looks like an address in an unusual form; write it as a.b.c.d"
	}
	return ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String is the entry in the form ParseAllowEntry reads.
func (e Entry) String() string { return e.hostString() + e.rulesString() }

// hostString is the entry's host and port.
func (e Entry) hostString() string {
	var h string
	switch {
	case e.Addr.IsValid() && e.Addr.Is6():
		h = "[" + e.Addr.String() + "]"
		if e.Port == 0 {
			return e.Addr.String()
		}
	case e.Addr.IsValid():
		h = e.Addr.String()
	case e.Wildcard:
		h = "*." + e.Host
	default:
		h = e.Host
	}
	if e.Port != 0 {
		return h + ":" + strconv.Itoa(int(e.Port))
	}
	return h
}

// Target is a destination the agent asked for.
type Target struct {
	// Host is the lower-case host name, or "" when Addr is an IP literal.
	Host string
	// Addr is set when the agent named an IP address.
	Addr netip.Addr
	// Port is always set (the kind's default when the agent gave none).
	Port uint16
}

// ParseTarget parses the host[:port] of a CONNECT request or an absolute
// URL; a missing port is the kind's default.
func ParseTarget(authority string, kind Kind) (Target, error) {
	s := strings.ToLower(authority)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ""
	}
	t := Target{Port: kind.DefaultPort()}
	if port != "" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return Target{}, fmt.Errorf("bad port in %q", authority)
		}
		t.Port = uint16(p)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		t.Addr = a.WithZone("").Unmap()
		return t, nil
	}
	// One trailing dot (the absolute form) names the same host; checked
	// and resolved without it, as an entry names it.
	host = strings.TrimSuffix(host, ".")
	if strings.HasSuffix(host, ".") {
		return Target{}, fmt.Errorf("bad host %q: empty label in host name", authority)
	}
	if why := checkHostName(host); why != "" {
		return Target{}, fmt.Errorf("bad host %q: %s", authority, why)
	}
	t.Host = host
	return t, nil
}

// String is host:port.
func (t Target) String() string {
	h := t.Host
	if t.Addr.IsValid() {
		h = t.Addr.String()
	}
	return net.JoinHostPort(h, strconv.Itoa(int(t.Port)))
}

// name is the host or the address, for messages and the log.
func (t Target) name() string {
	if t.Addr.IsValid() {
		return t.Addr.String()
	}
	return t.Host
}

// matchesName reports whether e names t's host (or address), ports aside.
func (e Entry) matchesName(t Target) bool {
	switch {
	case e.Addr.IsValid():
		return t.Addr.IsValid() && e.Addr == t.Addr
	case t.Addr.IsValid():
		return false
	case e.Wildcard:
		return strings.HasSuffix(t.Host, "."+e.Host)
	default:
		return t.Host == e.Host
	}
}

// allowsPort reports whether an allow entry admits port for kind.
func (e Entry) allowsPort(port uint16, kind Kind) bool {
	if e.Port == 0 {
		return port == kind.DefaultPort()
	}
	return port == e.Port
}

// removesPort reports whether a removal covers port: a removal without a
// port removes every port.
func (e Entry) removesPort(port uint16) bool { return e.Port == 0 || e.Port == port }

// Policy is a sandbox's effective allow list: what the user, the flags and
// the agent's adapter allow, less what the repository removed.
type Policy struct {
	// Allow lists the allowed destinations.
	Allow []Entry
	// Remove lists destinations refused even when an Allow entry matches;
	// a removal without a port covers every port, and a wildcard removal
	// every name below its domain.
	Remove []Entry
	// HostAddrs are the Docker host's own addresses (its gateways on the
	// sandbox networks and its interfaces). They are refused like private
	// addresses even when they are public.
	HostAddrs []netip.Addr
}

// Decision is what the policy says about a destination by name.
type Decision struct {
	// Entry is the allow entry that matched (the exact one if several did).
	Entry Entry
	// Ruled are the matching entries' when all of them have method or path
	// rules (CheckRequest); empty when one allows every request.
	Ruled []Entry
}

// DeniedError is a refusal; Reason is short, printable and safe to log.
type DeniedError struct {
	Target   Target
	Reason   string
	unlisted bool // no entry names it (nor removes it): it may be held
}

// Error is host:port and the reason.
func (e *DeniedError) Error() string { return e.Target.String() + ": " + e.Reason }

// Check decides whether t may be reached by kind, by name only; the
// addresses a name resolves to are vetted by Vet.
func (p *Policy) Check(t Target, kind Kind) (Decision, error) {
	for _, r := range p.Remove {
		if r.matchesName(t) && r.removesPort(t.Port) {
			return Decision{}, &DeniedError{Target: t, Reason: fmt.Sprintf("removed by %s (%s)", r.Source, r)}
		}
	}
	var found *Entry
	var ruled []Entry
	unruled := false
	for i := range p.Allow {
		e := &p.Allow[i]
		if !e.matchesName(t) || !e.allowsPort(t.Port, kind) {
			continue
		}
		if found == nil || (found.Wildcard && !e.Wildcard) {
			found = e
		}
		switch {
		case e.HasRules():
			ruled = append(ruled, *e)
		case !e.Source.isSecret():
			// A secret's hosts are allowed so that the secret can be
			// used; rules the user wrote for such a host still apply.
			unruled = true
		}
	}
	if found == nil {
		if t.Addr.IsValid() {
			return Decision{}, &DeniedError{Target: t, Reason: "IP address not in the allow list"}
		}
		return Decision{}, &DeniedError{Target: t, Reason: "not in the allow list", unlisted: true}
	}
	if unruled {
		ruled = nil
	}
	return Decision{Entry: *found, Ruled: ruled}, nil
}

// Vet keeps the addresses d's target may be reached at, in order. A public
// address is always kept; a private one (RFC 1918, ULA, CGNAT, the Docker
// host's) only when the matching entry names the host exactly or an IP entry
// names the address; a local one (loopback, link-local and the metadata
// address, unspecified, multicast, reserved) only when an IP entry names it.
// A wildcard never reaches beyond public addresses. When nothing is kept the
// error says why.
func (p *Policy) Vet(d Decision, t Target, kind Kind, addrs []netip.Addr) ([]netip.Addr, error) {
	var kept []netip.Addr
	var refused []string
	for _, a := range addrs {
		a = a.WithZone("").Unmap()
		class := p.classify(a)
		ok := class == Public ||
			((class == Private || class == DockerHost) && !d.Entry.Wildcard && !d.Entry.Addr.IsValid()) ||
			p.namesAddr(a, t.Port, kind)
		if ok && p.removedAddr(a, t.Port) {
			ok = false
			class = "removed"
		}
		if ok {
			kept = append(kept, a)
		} else {
			refused = append(refused, fmt.Sprintf("%s (%s)", a, class))
		}
	}
	if len(kept) == 0 {
		if len(refused) == 0 {
			return nil, &DeniedError{Target: t, Reason: "no address"}
		}
		const max = 3
		more := ""
		if len(refused) > max {
			more = fmt.Sprintf(" and %d more", len(refused)-max)
			refused = refused[:max]
		}
		return nil, &DeniedError{Target: t, Reason: "refused address " + strings.Join(refused, ", ") + more}
	}
	return kept, nil
}

// namesAddr reports whether an IP entry names a for port.
func (p *Policy) namesAddr(a netip.Addr, port uint16, kind Kind) bool {
	for _, e := range p.Allow {
		if e.Addr == a && e.allowsPort(port, kind) {
			return true
		}
	}
	return false
}

func (p *Policy) removedAddr(a netip.Addr, port uint16) bool {
	for _, r := range p.Remove {
		if r.Addr == a && r.removesPort(port) {
			return true
		}
	}
	return false
}

// Removed returns the removal that covers every destination e allows, if
// any, so that an entry can be shown as removed.
func (p *Policy) Removed(e Entry) (Entry, bool) {
	for _, r := range p.Remove {
		if r.Port != 0 && r.Port != e.Port {
			continue
		}
		switch {
		case e.Addr.IsValid():
			if r.Addr == e.Addr {
				return r, true
			}
		case r.Addr.IsValid():
		case r.Wildcard:
			if strings.HasSuffix(e.Host, "."+r.Host) || (e.Wildcard && e.Host == r.Host) {
				return r, true
			}
		case !e.Wildcard && r.Host == e.Host:
			return r, true
		}
	}
	return Entry{}, false
}
