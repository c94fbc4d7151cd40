package config

import (
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Host is a [[host]] table: how the egress proxy treats one host.
type Host struct {
	// Name is an allow-list entry naming the host (a name or *.suffix;
	// port 443 unless one is given).
	Name string `toml:"name"`
	// Inspect makes the proxy terminate the host's TLS with the sandbox's
	// CA (trusted inside the container), so that the method and path
	// rules of its allow entries apply to its HTTPS requests. Without it
	// a host with rules is refused over TLS: a tunnel would carry any
	// request.
	Inspect bool `toml:"inspect"`
}

// InspectHosts are the hosts whose TLS the proxy terminates.
func (c Config) InspectHosts() []string {
	var out []string
	for _, h := range c.Hosts {
		if h.Inspect {
			out = append(out, h.Name)
		}
	}
	return out
}

// checkHosts checks every [[host]]: a name the proxy can show a
// certificate for, each once.
func checkHosts(where string, hosts []Host) error {
	seen := map[string]bool{}
	for i, h := range hosts {
		e, err := egress.ParseEntry(h.Name, egress.FromUser)
		if err != nil || h.Name == "" {
			return usererr.New("%s: host #%d: name %q is not a host entry", where, i+1, h.Name).
				Hint("[[host]] name = \"api.example.com\", inspect = true (a name, *.example.com, or example.com:8443)")
		}
		if e.Addr.IsValid() {
			return usererr.New("%s: host %s is an address", where, h.Name).
				Hint("the proxy can terminate TLS only for host names: the sandbox's CA names no address")
		}
		if seen[e.String()] {
			return usererr.New("%s: host %s is listed twice", where, h.Name)
		}
		seen[e.String()] = true
	}
	return nil
}
