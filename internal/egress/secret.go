package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Secret is a credential the agent may use but never see. The agent's
// container holds Placeholder; the proxy puts Value in its place in request
// headers sent over TLS to Hosts, and nowhere else.
type Secret struct {
	// Name is the environment variable the placeholder is given in.
	Name string
	// Hosts are where the real value may go: exact names or wildcards,
	// port 443 unless an entry names another.
	Hosts []Entry
	// Placeholder is what the agent sees.
	Placeholder string
	// Value is the real credential.
	Value string
}

// PlaceholderMarker is in every placeholder, right after the vendor prefix
// kept from the real value, so that a placeholder is recognisable wherever
// it turns up.
const PlaceholderMarker = "gsbx"

// minPlaceholderRandom is the least number of random characters in a
// placeholder (about 190 bits).
const minPlaceholderRandom = 32

// vendorPrefixes are the well-known, non-secret prefixes of API keys and
// tokens. A placeholder starts with the same prefix as the value it stands
// for, so that a CLI checking the shape of its key accepts it. Nothing else
// of the value is carried over.
var vendorPrefixes = []string{
	"sk-ant-api03-", "sk-ant-oat01-", "sk-ant-admin01-", "sk-proj-", "sk-svcacct-", "sk-",
	"github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
	"glpat-", "xoxb-", "xoxp-", "hf_", "npm_", "pypi-",
}

const placeholderChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewPlaceholder returns a fresh random placeholder shaped like value: the
// same vendor prefix (if value has a well-known one), the marker, then
// random letters and digits so that it is about as long as value.
func NewPlaceholder(value string) (string, error) {
	prefix := ""
	for _, p := range vendorPrefixes {
		if strings.HasPrefix(value, p) {
			prefix = p
			break
		}
	}
	n := max(len(value)-len(prefix)-len(PlaceholderMarker), minPlaceholderRandom)
	n = min(n, 256)
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("placeholder: %w", err)
	}
	for i, b := range buf {
		// 256 is not a multiple of 62, so the first 8 characters come up
		// slightly more often; each character still carries over 5.9
		// bits, plenty for a value that only has to be unguessable.
		buf[i] = placeholderChars[int(b)%len(placeholderChars)]
	}
	return prefix + PlaceholderMarker + string(buf), nil
}

// NewSecret binds a real value to hosts under a fresh placeholder.
func NewSecret(name string, hosts []string, value string) (Secret, error) {
	s := Secret{Name: name, Value: value}
	for _, h := range hosts {
		e, err := ParseEntry(h, SecretSource(name))
		if err != nil {
			return Secret{}, err
		}
		s.Hosts = append(s.Hosts, e)
	}
	if err := s.checkValue(); err != nil {
		return Secret{}, err
	}
	// A random placeholder could happen to contain the value; draw again.
	for range 8 {
		p, err := NewPlaceholder(value)
		if err != nil {
			return Secret{}, err
		}
		if !strings.Contains(p, value) {
			s.Placeholder = p
			break
		}
	}
	return s, s.check()
}

// minValue is the shortest real value accepted: a shorter one would be
// found, and scrubbed from responses, in ordinary text.
const minValue = 8

func (s Secret) checkValue() error {
	switch {
	case s.Name == "":
		return usererr.New("a secret has no name")
	case s.Value == "":
		return usererr.New("secret %s: the value is empty", s.Name)
	case len(s.Value) < minValue:
		return usererr.New("secret %s: the value is shorter than %d characters", s.Name, minValue)
	case strings.ContainsAny(s.Value, "\r\n\x00"):
		return usererr.New("secret %s: the value contains a line break or NUL", s.Name)
	}
	return nil
}

// check refuses a secret the proxy could not handle safely.
func (s Secret) check() error {
	if err := s.checkValue(); err != nil {
		return err
	}
	switch {
	case len(s.Hosts) == 0:
		return usererr.New("secret %s: no hosts", s.Name).Hint("name the hosts the secret may be sent to: hosts = [\"api.example.com\"]")
	case len(s.Placeholder) < minPlaceholderRandom || !strings.Contains(s.Placeholder, PlaceholderMarker):
		return fmt.Errorf("secret %s: placeholder is not one git sandbox made", s.Name)
	case strings.Contains(s.Value, s.Placeholder) || strings.Contains(s.Placeholder, s.Value):
		return fmt.Errorf("secret %s: placeholder and value overlap", s.Name)
	}
	for _, h := range s.Hosts {
		if h.Addr.IsValid() {
			return usererr.New("secret %s: host %s is an address", s.Name, h).
				Hint("a secret is bound to host names; the proxy verifies the upstream's certificate for that name")
		}
	}
	return nil
}

// boundTo reports whether the real value may be sent to t (over TLS).
func (s *Secret) boundTo(t Target) bool {
	if t.Addr.IsValid() {
		return false
	}
	for _, h := range s.Hosts {
		if h.matchesName(t) && h.allowsPort(t.Port, Connect) {
			return true
		}
	}
	return false
}

// leak is a placeholder found where it must not go.
type leak struct {
	secret string // the secret's name
	where  string // "header x-api-key", "URL", "body", "host name"
}

func (l *leak) Error() string {
	return fmt.Sprintf("placeholder of %s in %s", l.secret, l.where)
}

// findLeak looks for the placeholders of secrets in a request's URL and
// headers (Basic credentials decoded). It is best effort by design: a
// placeholder is worthless to whoever receives it; finding one means the
// agent tried to send a credential somewhere else, which is worth a
// refusal and a log line.
func findLeak(r *http.Request, secrets []*Secret) *leak {
	if len(secrets) == 0 {
		return nil
	}
	in := func(s string) *Secret {
		for _, sec := range secrets {
			if strings.Contains(s, sec.Placeholder) {
				return sec
			}
		}
		return nil
	}
	for _, u := range []string{r.URL.String(), r.Host} {
		for _, v := range []string{u, unescape(u)} {
			if s := in(v); s != nil {
				return &leak{s.Name, "URL"}
			}
		}
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if s := in(v); s != nil {
				return &leak{s.Name, "header " + strings.ToLower(k)}
			}
			if dec, ok := basicCredentials(v); ok {
				if s := in(dec); s != nil {
					return &leak{s.Name, "header " + strings.ToLower(k)}
				}
			}
		}
	}
	return nil
}

func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// basicCredentials decodes "Basic base64(user:password)".
func basicCredentials(v string) (string, bool) {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", false
	}
	return string(dec), true
}

// substitute puts the real values of secrets in place of their
// placeholders in every request header, Basic credentials included, and
// returns the names of the secrets it used.
func substitute(h http.Header, secrets []*Secret) []string {
	var used []string
	note := func(name string) {
		for _, u := range used {
			if u == name {
				return
			}
		}
		used = append(used, name)
	}
	for k, vs := range h {
		for i, v := range vs {
			if dec, ok := basicCredentials(v); ok {
				changed := false
				for _, s := range secrets {
					if strings.Contains(dec, s.Placeholder) {
						dec = strings.ReplaceAll(dec, s.Placeholder, s.Value)
						changed = true
						note(s.Name)
					}
				}
				if changed {
					vs[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(dec))
				}
				continue
			}
			for _, s := range secrets {
				if strings.Contains(v, s.Placeholder) {
					v = strings.ReplaceAll(v, s.Placeholder, s.Value)
					note(s.Name)
				}
			}
			vs[i] = v
		}
		h[k] = vs
	}
	return used
}

// scrubHeader puts placeholders back in place of real values in response
// headers, so that an upstream echoing a request never shows the agent a
// real value.
func scrubHeader(h http.Header, secrets []*Secret) {
	for _, vs := range h {
		for i, v := range vs {
			for _, s := range secrets {
				v = strings.ReplaceAll(v, s.Value, s.Placeholder)
			}
			vs[i] = v
		}
	}
}

// streamReplacer finds patterns in a stream. On a match it either fails
// with the error onMatch returns, or writes the pattern's replacement.
// It holds back only the bytes that could be the start of a pattern, so a
// stream of events is passed on as it comes.
type streamReplacer struct {
	src     io.Reader
	from    [][]byte
	to      [][]byte
	onMatch func(i int) error
	pending []byte // read, not yet examined to the end
	out     []byte // ready to be returned
	err     error  // from src, or a match
	buf     []byte
}

func newStreamReplacer(src io.Reader, from, to []string, onMatch func(i int) error) *streamReplacer {
	r := &streamReplacer{src: src, onMatch: onMatch, buf: make([]byte, 32*1024)}
	for i, f := range from {
		r.from = append(r.from, []byte(f))
		if to != nil {
			r.to = append(r.to, []byte(to[i]))
		}
	}
	return r
}

func (r *streamReplacer) Read(p []byte) (int, error) {
	if len(r.out) == 0 && len(r.pending) == 0 && r.err == nil && len(p) >= len(r.buf) {
		// The common case, without a copy: read straight into p and hand
		// it back when it holds no pattern, keeping only an end that could
		// begin one.
		n, err := r.src.Read(p)
		if !r.containsAny(p[:n]) {
			keep := 0
			if err == nil {
				keep = r.partialSuffix(p[:n])
			}
			r.pending = append(r.pending, p[n-keep:n]...)
			r.err = err
			if n-keep > 0 || err != nil {
				return n - keep, err
			}
		} else {
			r.pending = append(r.pending, p[:n]...)
			r.err = err
			if merr := r.process(err != nil); merr != nil {
				r.err = merr
				r.pending, r.out = nil, nil
				return 0, merr
			}
		}
	}
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		n, err := r.src.Read(r.buf)
		r.pending = append(r.pending, r.buf[:n]...)
		if err != nil {
			r.err = err
		}
		if merr := r.process(err != nil); merr != nil {
			r.err = merr
			r.pending, r.out = nil, nil
			return 0, merr
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *streamReplacer) containsAny(b []byte) bool {
	for _, f := range r.from {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// process moves what is certainly not (the start of) a pattern from
// pending to out, replacing patterns on the way; at the end, everything.
func (r *streamReplacer) process(end bool) error {
	for {
		at, which := -1, -1
		for i, f := range r.from {
			if j := bytes.Index(r.pending, f); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			break
		}
		if r.onMatch != nil {
			if err := r.onMatch(which); err != nil {
				return err
			}
		}
		r.out = append(r.out, r.pending[:at]...)
		if r.to != nil {
			r.out = append(r.out, r.to[which]...)
		}
		r.pending = r.pending[at+len(r.from[which]):]
	}
	keep := 0
	if !end {
		keep = r.partialSuffix(r.pending)
	}
	r.out = append(r.out, r.pending[:len(r.pending)-keep]...)
	r.pending = append(r.pending[:0:0], r.pending[len(r.pending)-keep:]...)
	return nil
}

// partialSuffix is the length of the longest end of b that begins some
// pattern.
func (r *streamReplacer) partialSuffix(b []byte) int {
	best := 0
	for _, f := range r.from {
		for k := min(len(f)-1, len(b)); k > best; k-- {
			if bytes.HasSuffix(b, f[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// readCloser gives a wrapped reader the original's Close.
type readCloser struct {
	io.Reader
	io.Closer
}
