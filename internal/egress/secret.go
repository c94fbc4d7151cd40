package egress

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/egress/sandboxca"
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
func (s *Secret) boundTo(t Target) bool { return namesTLS(s.Hosts, t) }

// namesTLS reports whether an entry names t's host (never an address: a
// certificate of the sandbox's CA names hosts only) and allows its port
// for a tunnel.
func namesTLS(entries []Entry, t Target) bool {
	if t.Addr.IsValid() {
		return false
	}
	for _, h := range entries {
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
// placeholders in every request header, Basic credentials included. It
// returns the names of the secrets it used, and each Basic token it made
// with the token the agent sent, so that an echo of the token is put back
// as a whole.
func substitute(h http.Header, secrets []*Secret) (used []string, tokens [][2]string) {
	note := func(name string) {
		if !slices.Contains(used, name) {
			used = append(used, name)
		}
	}
	for k, vs := range h {
		for i, v := range vs {
			if dec, ok := basicCredentials(v); ok {
				if swapped := swapPlaceholders(dec, secrets, note); swapped != dec {
					tokens = append(tokens, [2]string{swapped, dec})
					vs[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(swapped))
				}
				continue
			}
			vs[i] = swapPlaceholders(v, secrets, note)
		}
		h[k] = vs
	}
	return used, tokens
}

// swapPlaceholders puts the real values of secrets in place of their
// placeholders in v, noting each secret it used.
func swapPlaceholders(v string, secrets []*Secret, note func(string)) string {
	for _, s := range secrets {
		if strings.Contains(v, s.Placeholder) {
			v = strings.ReplaceAll(v, s.Placeholder, s.Value)
			note(s.Name)
		}
	}
	return v
}

// readCloser gives a wrapped reader the original's Close.
type readCloser struct {
	io.Reader
	io.Closer
}

// NewCA makes a sandbox's CA for the hosts its secrets are bound to
// (entries as ParseEntry reads them: exact names or wildcards).
func NewCA(hosts []string) (*sandboxca.CA, error) {
	var domains []string
	for _, h := range hosts {
		e, err := ParseEntry(h, "")
		if err != nil {
			return nil, err
		}
		if e.Addr.IsValid() {
			return nil, fmt.Errorf("new CA: %s is an address", h)
		}
		domains = append(domains, e.Host)
	}
	return sandboxca.New(domains)
}
