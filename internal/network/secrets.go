package network

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/sandboxca"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Where the agent's container finds the certificates it trusts when the
// sandbox has secrets. The bundle (this machine's roots plus the sandbox
// CA, sandboxca.Bundle) is also mounted over sandboxca.SystemBundlePath (Debian,
// Ubuntu, Alpine), so tools that read only that trust it too.
const (
	AgentTrustDir   = "/etc/git-sandbox/trust"
	TrustBundleFile = "bundle.pem"
	TrustCAFile     = "ca.pem"
)

// Files in the proxy's configuration directory (mounted into the proxy's
// container only).
const (
	proxyCACert     = "ca.pem"
	proxyCAKey      = "ca-key.pem"
	ProxyRoots      = "roots.pem"
	proxyUpstreamCA = "upstream-ca.pem"
)

// PlaceholderPending is what a dry run shows for a secret's placeholder:
// the value is not read for a dry run (a from_command would run).
const PlaceholderPending = "<placeholder, made at start>"

// HostRoots returns this machine's certificate authorities (PEM), or nil
// when none is found where they usually are.
func HostRoots() []byte {
	b, err := sandboxca.SystemBundle()
	if err != nil || !bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil
	}
	return b
}

// SecretPlan is a secret as a plan shows it: never the value.
type SecretPlan struct {
	Name   string   `json:"name"`
	Hosts  []string `json:"hosts"`
	Source string   `json:"source"`
}

// PlanSecrets reads the user's [[secret]] values and makes a placeholder
// for each (a dry run reads nothing and shows PlaceholderPending). The
// secrets need the egress proxy: in another network mode they are left
// out, with a warning.
func (e *Env) PlanSecrets(ctx context.Context, o SecretsInput, allowlist bool) ([]egress.Secret, []SecretPlan, error) {
	if len(e.Config.Secrets) == 0 {
		return nil, nil, nil
	}
	if !allowlist {
		var names []string
		for _, s := range e.Config.Secrets {
			names = append(names, s.Name)
		}
		e.UI.Warnf("secrets %s are not given to the agent: they need the allowlist network's proxy", strings.Join(names, ", "))
		return nil, nil, nil
	}
	var out []egress.Secret
	var shown []SecretPlan
	for _, cs := range e.Config.Secrets {
		for _, kv := range o.Env {
			if k, _, _ := strings.Cut(kv, "="); k == cs.Name {
				return nil, nil, usererr.New("-e %s: %s is a secret in your config; the agent gets its placeholder", k, k).
					Hint("leave -e %s out", k)
			}
		}
		for _, kv := range e.Config.Env {
			if k, _, _ := strings.Cut(kv, "="); k == cs.Name {
				return nil, nil, usererr.New("%s is both passed with env and a [[secret]] in %s", k, config.UserPath()).
					Hint("remove it from env: a secret's value must not reach the agent")
			}
		}
		shown = append(shown, SecretPlan{Name: cs.Name, Hosts: cs.Hosts, Source: cs.Source()})
		if o.DryRun {
			s := egress.Secret{Name: cs.Name, Placeholder: PlaceholderPending}
			out = append(out, s)
			continue
		}
		value, err := e.secretValue(ctx, cs, o.IO)
		if errors.Is(err, errNoSource) && !agentNeeds(o.Agent, cs.Hosts) {
			// Not the agent's own key: this sandbox starts without it.
			e.UI.Warnf("%v; this sandbox starts without it (its %s agent does not talk to %s)", err, o.Agent, strings.Join(cs.Hosts, ", "))
			shown = shown[:len(shown)-1]
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		s, err := egress.NewSecret(cs.Name, cs.Hosts, value)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s)
	}
	return out, shown, nil
}

// SecretsInput is what a start says about secrets.
type SecretsInput struct {
	// Env are its -e values, none of which may name a secret.
	Env []string
	// DryRun reads no value.
	DryRun bool
	// Agent is the sandbox's agent: a secret for the hosts its CLI talks
	// to (its model key) must be there; another one whose source is
	// missing is left out, with a warning.
	Agent string
	// IO is the terminal a secret's command may ask on.
	IO IO
}

// secretValue reads a secret's value from its source. Messages name the
// secret and the source, never the value.
func (e *Env) secretValue(ctx context.Context, s config.Secret, io IO) (string, error) {
	what := fmt.Sprintf("secret %s (%s)", s.Name, s.Source())
	switch {
	case s.FromEnv != "":
		v, ok := os.LookupEnv(s.FromEnv)
		if !ok || v == "" {
			return "", usererr.Wrap(errNoSource, "%s: %s is not set", what, s.FromEnv).
				Hint("set %s in the environment git sandbox runs in, or remove the [[secret]] from %s", s.FromEnv, config.UserPath())
		}
		return v, nil
	case s.FromFile != "":
		b, err := os.ReadFile(s.FromFile)
		if err != nil {
			cause := err
			if errors.Is(err, os.ErrNotExist) {
				cause = errors.Join(errNoSource, err)
			}
			return "", usererr.Wrap(cause, "%s: %v", what, err).Hint("the file holds the value alone, on one line")
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		return v, nil
	default:
		var stdin = io.Stdin
		if !io.StdinIsTerminal {
			stdin = nil
		}
		out, err := proc.SecretCommand(ctx, s.FromCommand, stdin, io.Stderr)
		if err != nil {
			return "", usererr.Wrap(err, "%s: the command failed: %v", what, err).
				Hint("run it yourself to see why: %s", s.FromCommand)
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(out), "\n"), "\r"), nil
	}
}

// errNoSource is in the chain of a secret's error when its source is
// missing: its variable is not set, its file does not exist.
var errNoSource = errors.New("the secret's source is missing")

// agentNeeds reports whether the agent's CLI talks to one of hosts.
func agentNeeds(name string, hosts []string) bool {
	a, err := agent.Get(name)
	if err != nil {
		return true // unknown: as if it did
	}
	for _, h := range hosts {
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if agent.NeedsHost(a, h) {
			return true
		}
	}
	return false
}

// SecretEnv is the agent's environment for secrets: each name with its
// placeholder.
func SecretEnv(secrets []egress.Secret) []string {
	var env []string
	for _, s := range secrets {
		env = append(env, s.Name+"="+s.Placeholder)
	}
	return env
}

// TrustEnv points the common TLS stacks (OpenSSL, curl, Python requests,
// git, Node) at the trust bundle.
func TrustEnv() []string { return sandboxca.CAEnv(AgentTrustDir + "/" + TrustBundleFile) }

// withoutNames drops the entries of env that set one of names.
func withoutNames(env, names []string) []string {
	return slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, k)
	})
}

// secretHosts are the hosts of every secret, for the CA's name constraints.
func secretHosts(secrets []egress.Secret) []string {
	var out []string
	for _, s := range secrets {
		for _, h := range s.Hosts {
			out = append(out, h.String())
		}
	}
	return out
}

// writeTrust makes the sandbox's CA (or keeps the one it has while it is
// valid for another week) and writes its files: certificate and key into
// the proxy's directory, certificate and bundle into the trust directory.
func writeTrust(proxyDir, trustDir string, hosts []string) error {
	for _, dir := range []string{proxyDir, trustDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("sandbox CA: %w", err)
		}
	}
	certPath, keyPath := filepath.Join(proxyDir, proxyCACert), filepath.Join(proxyDir, proxyCAKey)
	ca, err := sandboxca.LoadCA(certPath, keyPath)
	if err != nil || time.Until(ca.Cert.NotAfter) < 7*24*time.Hour || !caCovers(ca, hosts) {
		if ca, err = egress.NewCA(hosts); err != nil {
			return err
		}
		if err := ca.Write(certPath, keyPath); err != nil {
			return err
		}
	}
	// The trust directory is read by the agent's uid (the user's, or a
	// root user's sandbox): 0755 and 0644, nothing secret in it.
	if err := os.Chmod(trustDir, 0o755); err != nil {
		return fmt.Errorf("sandbox CA: %w", err)
	}
	bundle := sandboxca.Bundle(HostRoots(), ca.CertPEM)
	for name, b := range map[string][]byte{TrustCAFile: ca.CertPEM, TrustBundleFile: bundle} {
		if err := atomicfile.Write(filepath.Join(trustDir, name), b, 0o644); err != nil {
			return fmt.Errorf("sandbox CA: %w", err)
		}
	}
	return nil
}

// caCovers reports whether the CA's name constraints admit every host
// (entries: a CA made for other hosts is made again).
func caCovers(ca *sandboxca.CA, hosts []string) bool {
	for _, h := range hosts {
		e, err := egress.ParseEntry(h, "")
		if err != nil || !slices.Contains(ca.Cert.PermittedDNSDomains, e.Host) {
			return false
		}
	}
	return true
}

// recordSecrets are the secrets as the record keeps them: no values.
func recordSecrets(secrets []egress.Secret) []record.Secret {
	var out []record.Secret
	for _, s := range secrets {
		rs := record.Secret{Name: s.Name, Placeholder: s.Placeholder}
		for _, h := range s.Hosts {
			rs.Hosts = append(rs.Hosts, h.String())
		}
		out = append(out, rs)
	}
	return out
}

// resumeSecrets reads the values of a sandbox's recorded secrets again
// (a rotated key is picked up), keeping the recorded placeholder and
// hosts: the agent's environment holds that placeholder, and a config
// edited since cannot send a value to more hosts. A secret no longer in
// the config is left out, with a warning: its placeholder then reaches
// nothing.
func (e *Env) resumeSecrets(ctx context.Context, recorded []record.Secret, io IO) ([]egress.Secret, error) {
	var out []egress.Secret
	for _, rs := range recorded {
		i := slices.IndexFunc(e.Config.Secrets, func(s config.Secret) bool { return s.Name == rs.Name })
		if i < 0 {
			e.UI.Warnf("secret %s is no longer in %s: the agent's placeholder for it reaches nothing", rs.Name, config.UserPath())
			continue
		}
		value, err := e.secretValue(ctx, e.Config.Secrets[i], io)
		if err != nil {
			return nil, err
		}
		s := egress.Secret{Name: rs.Name, Placeholder: rs.Placeholder, Value: value}
		for _, h := range rs.Hosts {
			en, err := egress.ParseEntry(h, egress.SecretSource(rs.Name))
			if err != nil {
				return nil, err
			}
			s.Hosts = append(s.Hosts, en)
		}
		if strings.Contains(value, s.Placeholder) || strings.Contains(s.Placeholder, value) {
			return nil, errors.New("secret " + rs.Name + ": placeholder and value overlap")
		}
		out = append(out, s)
	}
	return out, nil
}

// TrustMounts are the agent's mounts of the sandbox CA's certificate and
// the trust bundle in trustDir (a sandbox with secrets).
func TrustMounts(trustDir string) []container.Mount {
	return []container.Mount{
		{Source: trustDir, Target: AgentTrustDir, ReadOnly: true, Why: "the sandbox CA's certificate (never its key) and a bundle of this machine's roots plus it"},
		{Source: filepath.Join(trustDir, TrustBundleFile), Target: sandboxca.SystemBundlePath, ReadOnly: true, Why: "the same bundle over the system's"},
	}
}

// Override sets the variables of with in env, replacing what env says of
// them.
func Override(env, with []string) []string {
	names := make([]string, 0, len(with))
	for _, kv := range with {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	return append(withoutNames(env, names), with...)
}
