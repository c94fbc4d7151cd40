package egress

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/egress/sandboxca"
	"github.com/git-sandbox/git-sandbox/internal/meter"
)

// DefaultListen is the address the proxy listens on inside its container.
const DefaultListen = ":3128"

// ProxyConfig is the file the proxy reads at start. It is written by the
// host into the proxy's own state (mode 0600) and mounted only into the
// proxy's container: it holds the real values of secrets.
type ProxyConfig struct {
	// Listen is the proxy's address, DefaultListen if empty. It should be
	// the address on the sandbox's internal network only, so nothing on
	// the egress network can use the proxy.
	Listen string `json:"listen,omitempty"`
	// Allow and Remove are the policy's entries with their sources.
	Allow  []Rule `json:"allow"`
	Remove []Rule `json:"remove,omitempty"`
	// Live is the live changes' file (LiveFile), read again whenever it
	// changes.
	Live string `json:"live,omitempty"`
	// HostAddrs are the Docker host's addresses, refused like private ones.
	HostAddrs []string `json:"host_addrs,omitempty"`
	// Secrets are the credentials the proxy swaps in.
	Secrets []SecretConfig `json:"secrets,omitempty"`
	// Inspect are the hosts (entries as ParseEntry reads them) whose TLS
	// the proxy terminates with no secret bound to them, so that method
	// and path rules apply inside (the user's [[host]] inspect = true).
	Inspect []string `json:"inspect,omitempty"`
	// CACert and CAKey are the sandbox CA's files; needed with Secrets or
	// Inspect.
	CACert string `json:"ca_cert,omitempty"`
	CAKey  string `json:"ca_key,omitempty"`
	// UpstreamCA is an extra PEM bundle trusted for upstream servers, on
	// top of the system roots.
	UpstreamCA string `json:"upstream_ca,omitempty"`
	// Log is the decision log, appended to.
	Log string `json:"log,omitempty"`
	// DialTimeout bounds name resolution and each connection attempt;
	// IdleTimeout closes a tunnel or connection nothing crossed for that
	// long. Zero means the defaults.
	DialTimeout Duration `json:"dial_timeout,omitzero"`
	IdleTimeout Duration `json:"idle_timeout,omitzero"`
	// Prompt, when set, holds connections off the list (network_prompt).
	Prompt *held.Config `json:"prompt,omitempty"`
	Meter  *meter.Files `json:"meter,omitempty"` // the broker's meter (internal/meter), if any
}

// Rule is an entry as written with where it came from.
type Rule struct {
	Entry  string `json:"entry"`
	Source Source `json:"source"`
}

// Rules turns entries into rules for a ProxyConfig.
func Rules(entries []Entry) []Rule {
	out := make([]Rule, len(entries))
	for i, e := range entries {
		out[i] = Rule{Entry: e.String(), Source: e.Source}
	}
	return out
}

// SecretConfig is a Secret as written in the proxy's configuration.
type SecretConfig struct {
	Name        string   `json:"name"`
	Hosts       []string `json:"hosts"`
	Placeholder string   `json:"placeholder"`
	Value       string   `json:"value"`
}

// SecretConfigs turns secrets into their configuration form.
func SecretConfigs(secrets []Secret) []SecretConfig {
	out := make([]SecretConfig, len(secrets))
	for i, s := range secrets {
		c := SecretConfig{Name: s.Name, Placeholder: s.Placeholder, Value: s.Value}
		for _, h := range s.Hosts {
			c.Hosts = append(c.Hosts, h.String())
		}
		out[i] = c
	}
	return out
}

// Duration is a time.Duration written as "10s".
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// WriteConfig writes c to path with mode 0600.
func WriteConfig(path string, c *ProxyConfig) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("write proxy config: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write proxy config: %w", err)
	}
	return nil
}

// LoadConfig reads the proxy's configuration. A file that others than its
// owner can read is refused when it holds secrets.
func LoadConfig(path string) (*ProxyConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load proxy config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load proxy config: %w", err)
	}
	var c ProxyConfig
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("load proxy config %s: %w", path, err)
	}
	if len(c.Secrets) > 0 && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("load proxy config %s: holds secrets but has mode %v; it must be 0600", path, fi.Mode().Perm())
	}
	return &c, nil
}

// Options turns the configuration into the proxy's options: entries
// parsed, CA and upstream roots loaded. The log is opened by the caller.
func (c *ProxyConfig) Options() (Options, error) {
	var o Options
	p := &Policy{}
	for _, r := range c.Allow {
		e, err := ParseAllowEntry(r.Entry, r.Source)
		if err != nil {
			return o, err
		}
		p.Allow = append(p.Allow, e)
	}
	for _, r := range c.Remove {
		e, err := ParseEntry(r.Entry, r.Source)
		if err != nil {
			return o, err
		}
		p.Remove = append(p.Remove, e)
	}
	for _, s := range c.HostAddrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return o, fmt.Errorf("host address %q: %w", s, err)
		}
		p.HostAddrs = append(p.HostAddrs, a)
	}
	o.Policy = p
	o.Live = c.Live
	for _, sc := range c.Secrets {
		s := Secret{Name: sc.Name, Placeholder: sc.Placeholder, Value: sc.Value}
		for _, h := range sc.Hosts {
			e, err := ParseEntry(h, SecretSource(sc.Name))
			if err != nil {
				return o, err
			}
			s.Hosts = append(s.Hosts, e)
		}
		o.Secrets = append(o.Secrets, s)
	}
	for _, h := range c.Inspect {
		e, err := ParseEntry(h, FromUser)
		if err != nil {
			return o, fmt.Errorf("inspect: %w", err)
		}
		o.Inspect = append(o.Inspect, e)
	}
	if len(c.Secrets) > 0 || len(c.Inspect) > 0 {
		if c.CACert == "" || c.CAKey == "" {
			return o, errors.New("proxy config: secrets and inspected hosts need ca_cert and ca_key")
		}
		ca, err := sandboxca.LoadCA(c.CACert, c.CAKey)
		if err != nil {
			return o, err
		}
		o.CA = ca
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if c.UpstreamCA != "" {
		pem, err := os.ReadFile(c.UpstreamCA)
		if err != nil {
			return o, fmt.Errorf("upstream CA: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("upstream CA %s: no certificate in it", c.UpstreamCA)
		}
	}
	o.UpstreamRoots = roots
	o.DialTimeout = time.Duration(c.DialTimeout)
	o.IdleTimeout = time.Duration(c.IdleTimeout)
	if c.Prompt != nil {
		if o.Prompt, err = c.Prompt.Options(); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Run serves the proxy c describes until ctx is done: it opens the log,
// listens on c.Listen, calls ready with the address, and closes everything
// on the way out.
func Run(ctx context.Context, c *ProxyConfig, errs io.Writer, ready func(net.Addr)) error {
	o, err := c.Options()
	if err != nil {
		return err
	}
	if c.Log != "" {
		l, err := OpenLog(c.Log, o.Secrets)
		if err != nil {
			return err
		}
		defer l.Close()
		o.Log = l
	}
	o.Errors = errs
	if o.Meter, err = meter.OpenFiles(c.Meter, errs); err != nil {
		return err // (its log is closed with the process: each line is written whole)
	}
	p, err := New(o)
	if err != nil {
		return err
	}
	listen := c.Listen
	if listen == "" {
		listen = DefaultListen
	}
	// No TCP keep-alive probes on the agent's connections: they are
	// local, and an idle one ends by the idle timeouts (four system calls
	// fewer per connection).
	l, err := (&net.ListenConfig{KeepAlive: -1}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if ready != nil {
		ready(l.Addr())
	}
	return p.Serve(ctx, l)
}
