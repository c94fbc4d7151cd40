package egress

// Method and path rules: an allow entry may name the methods and path
// prefixes it allows ("api.github.com GET,HEAD /repos/acme/"). The proxy
// can apply them only where it reads the requests: plain HTTP, and hosts
// whose TLS it terminates (the credential broker's, and those the user
// marks inspect = true: Options.Inspect). A CONNECT to a host
// that only entries with rules allow, and that the proxy does not
// terminate, is refused: a tunnel would carry any request.

import (
	"net/http"
	"path"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

const ruleForms = `an entry with rules looks like "api.example.com GET,HEAD /repos/acme/": the host, then methods (comma-separated) and path prefixes (each from /), either or both`

// ParseAllowEntry parses an allow entry: a host as ParseEntry takes it,
// then, optionally, methods and path prefixes separated by spaces.
func ParseAllowEntry(s string, src Source) (Entry, error) {
	fields := strings.Fields(s)
	if len(fields) <= 1 {
		return ParseEntry(s, src)
	}
	e, err := ParseEntry(fields[0], src)
	if err != nil {
		return Entry{}, err
	}
	for _, f := range fields[1:] {
		if why := e.addRule(f); why != "" {
			return Entry{}, usererr.New("allow entry %q: %s", s, why).Hint("%s", ruleForms)
		}
	}
	return e, nil
}

// addRule adds a field of rules: a path prefix or a list of methods.
func (e *Entry) addRule(f string) string {
	if strings.HasPrefix(f, "/") {
		if why := checkRulePath(f); why != "" {
			return why
		}
		e.Paths = append(e.Paths, f)
		return ""
	}
	for _, m := range strings.Split(f, ",") {
		if m == "" || strings.ToUpper(m) != m || strings.IndexFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
			return "methods are upper-case words separated by commas (GET,HEAD); a path starts with /"
		}
		e.Methods = append(e.Methods, m)
	}
	return ""
}

// checkRulePath refuses a path prefix a request could not be compared with
// as written: not clean, escaped, or with a query.
func checkRulePath(p string) string {
	if strings.ContainsAny(p, "%?#\\") {
		return "a path prefix holds no %, ?, # or \\"
	}
	clean := path.Clean(p)
	if clean != p && clean+"/" != p {
		return "a path prefix is clean: no //, . or .. segments"
	}
	return ""
}

// HasRules reports whether the entry limits methods or paths.
func (e Entry) HasRules() bool { return len(e.Methods)+len(e.Paths) > 0 }

// rulesString is the rules as written after the host.
func (e Entry) rulesString() string {
	var parts []string
	if len(e.Methods) > 0 {
		parts = append(parts, strings.Join(e.Methods, ","))
	}
	parts = append(parts, e.Paths...)
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// allowsRequest reports whether the entry's rules admit a request.
func (e Entry) allowsRequest(method, p string) bool {
	if len(e.Methods) > 0 {
		ok := false
		for _, m := range e.Methods {
			ok = ok || m == method
		}
		if !ok {
			return false
		}
	}
	if len(e.Paths) == 0 {
		return true
	}
	for _, pre := range e.Paths {
		if p == pre || strings.HasPrefix(p, pre) && (strings.HasSuffix(pre, "/") || p[len(pre)] == '/') {
			return true
		}
	}
	return false
}

// CheckRequest decides a request to a destination Check allowed: every
// request when an entry without rules allows it, else one the rules of an
// allowing entry admit. path is the request's path as sent (escaped); one
// that is not clean or holds escapes or a ';' (path parameters, "..;")
// is refused where rules apply, as the server could read it as another
// path.
func (d Decision) CheckRequest(t Target, method, escapedPath string) error {
	if len(d.Ruled) == 0 {
		return nil
	}
	p := escapedPath
	if p == "" {
		p = "/"
	}
	if strings.Contains(p, "%") || strings.Contains(p, ";") || checkRulePath(p) != "" {
		return &DeniedError{Target: t, Reason: "the path " + p + " is not clean or holds escapes, and rules apply to " + t.name()}
	}
	var rules []string
	for _, e := range d.Ruled {
		if e.allowsRequest(method, p) {
			return nil
		}
		rules = append(rules, "\""+e.String()+"\"")
	}
	return &DeniedError{Target: t, Reason: method + " " + p + " is outside the rules for " + t.name() + ": " + strings.Join(rules, ", ")}
}

// methodOverrides are the headers some servers take a request's method
// from instead of its own.
var methodOverrides = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// CheckHTTP decides an HTTP request Check allowed, as CheckRequest does,
// and where rules apply also refuses what would leave them behind: a
// switch of protocols (after it, any method and path pass as raw bytes)
// and a header that names another method.
func (d Decision) CheckHTTP(t Target, r *http.Request) error {
	if err := d.CheckRequest(t, r.Method, r.URL.EscapedPath()); err != nil || len(d.Ruled) == 0 {
		return err
	}
	if wantsUpgrade(r) {
		return &DeniedError{Target: t, Reason: "a protocol switch would leave the rules for " + t.name() + " behind"}
	}
	for _, h := range methodOverrides {
		if _, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			return &DeniedError{Target: t, Reason: h + " names another method, and rules apply to " + t.name()}
		}
	}
	return nil
}
