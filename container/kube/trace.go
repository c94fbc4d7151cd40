package kube

import (
	"net/http"
	"strings"
	"time"
)

// tracef, when set, receives every request to a cluster's API server and
// how long it took.
var tracef func(format string, args ...any)

// SetTrace makes every API request from engines connected from now on
// reported to f (nil turns it off). The command line sets it once, when
// GIT_SANDBOX_TRACE asks for it, as for git commands.
func SetTrace(f func(format string, args ...any)) { tracef = f }

// traced reports each request of next to f: method, path, the verb's
// query (a watch, an exec's command is left out) and its time.
type traced struct {
	next http.RoundTripper
	f    func(format string, args ...any)
}

func (t traced) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	what := r.URL.Path
	if q := r.URL.Query(); q.Get("watch") == "true" {
		what += " (watch)"
	}
	if strings.HasSuffix(r.URL.Path, "/exec") || strings.HasSuffix(r.URL.Path, "/attach") {
		what += " (stream opened)"
	}
	t.f("%6.1fms k8s %s %s", float64(time.Since(start).Microseconds())/1000, r.Method, what)
	return resp, err
}
