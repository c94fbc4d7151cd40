package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/sandboxca"
	"github.com/git-sandbox/git-sandbox/internal/network"
)

const testSecretValue = "sk-ant-api03-REALVALUEdonotleak0123456789"

// withSecret gives te's config a secret read from a file holding value.
func withSecret(te *testEnv, value string) string {
	f := filepath.Join(te.root, "api-key")
	if err := os.WriteFile(f, []byte(value+"\n"), 0o600); err != nil {
		te.t.Fatal(err)
	}
	te.env.Config.Secrets = []config.Secret{{Name: "API_KEY", Hosts: []string{"api.secret.test"}, FromFile: f}}
	return f
}

func envValue(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// TestSecretsWiring: the agent's container holds a placeholder and the
// trust bundle, never the value; the proxy's configuration (mode 0600,
// in a directory only the proxy mounts) holds the value; the record holds
// the placeholder; resume reads the value again and keeps the placeholder.
func TestSecretsWiring(t *testing.T) {
	te := allowlistEnv(t)
	keyFile := withSecret(te, testSecretValue)
	ctx := context.Background()

	// Dry run: no value read, none shown.
	o := detached("t1")
	o.DryRun = true
	res, err := te.env.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Plan)
	if v, _ := envValue(res.Plan.Container.Env, "API_KEY"); strings.Contains(string(b), "REALVALUE") || v != network.PlaceholderPending ||
		!strings.Contains(string(b), `"source":"from_file `+keyFile+`"`) {
		t.Errorf("dry run plan: %s", b)
	}

	sb := te.start("t1")
	agents := te.role("t1", container.RoleAgent)
	if len(agents) != 1 {
		t.Fatalf("agents = %+v", agents)
	}
	spec := agents[0].Spec
	ph, ok := envValue(spec.Env, "API_KEY")
	if !ok || !strings.HasPrefix(ph, "sk-ant-api03-"+egress.PlaceholderMarker) || strings.Contains(ph, "REALVALUE") {
		t.Errorf("agent's API_KEY = %q", ph)
	}
	for _, kv := range spec.Env {
		if strings.Contains(kv, "REALVALUE") {
			t.Errorf("agent env holds the value: %s", kv)
		}
	}
	for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"} {
		if _, ok := envValue(spec.Env, k); !ok {
			t.Errorf("agent env has no %s", k)
		}
	}
	trust := te.env.Layout.TrustDir("t1")
	if !slices.ContainsFunc(spec.Mounts, func(m container.Mount) bool { return m.Target == sandboxca.SystemBundlePath && m.ReadOnly }) ||
		!slices.ContainsFunc(spec.Mounts, func(m container.Mount) bool {
			return m.Target == network.AgentTrustDir && m.Source == trust && m.ReadOnly
		}) {
		t.Errorf("agent mounts: %+v", spec.Mounts)
	}
	for _, m := range spec.Mounts {
		if strings.HasPrefix(m.Source, te.env.Layout.ProxyDir("t1")) {
			t.Errorf("agent mounts the proxy's directory: %+v", m)
		}
	}
	// Nothing the agent mounts holds the value or the CA's key.
	_ = filepath.WalkDir(trust, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), "REALVALUE") || strings.Contains(string(b), "PRIVATE KEY") {
				t.Errorf("%s holds a secret", p)
			}
		}
		return nil
	})
	bundle, _ := os.ReadFile(filepath.Join(trust, network.TrustBundleFile))
	caPEM, _ := os.ReadFile(filepath.Join(trust, network.TrustCAFile))
	if len(caPEM) == 0 || !strings.Contains(string(bundle), string(caPEM)) {
		t.Errorf("bundle does not hold the CA")
	}

	// The proxy's configuration.
	cfgPath := filepath.Join(te.env.Layout.ProxyDir("t1"), network.ProxyConfigFile)
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("proxy config: %v %v", fi, err)
	}
	pc, err := egress.LoadConfig(cfgPath)
	if err != nil || len(pc.Secrets) != 1 || pc.Secrets[0].Value != testSecretValue || pc.Secrets[0].Placeholder != ph || pc.CAKey == "" {
		t.Fatalf("proxy config secrets = %+v, %v", pc, err)
	}
	if !slices.ContainsFunc(pc.Allow, func(r egress.Rule) bool {
		return r.Entry == "api.secret.test" && r.Source == egress.SecretSource("API_KEY")
	}) {
		t.Errorf("secret host not allowed: %+v", pc.Allow)
	}
	proxies := te.role("t1", container.RoleProxy)
	for _, kv := range proxies[0].Spec.Env {
		if strings.Contains(kv, "REALVALUE") {
			t.Errorf("proxy env holds the value: %s", kv)
		}
	}

	// The record: placeholder, no value.
	rb, _ := os.ReadFile(te.env.Layout.Record("t1"))
	if strings.Contains(string(rb), "REALVALUE") || len(sb.Egress.Secrets) != 1 || sb.Egress.Secrets[0].Placeholder != ph {
		t.Errorf("record: %s", rb)
	}

	// Resume: a rotated value, the same placeholder, wider hosts in the
	// config ignored.
	if _, err := te.find("t1").Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	withSecret(te, testSecretValue+"ROTATED")
	te.env.Config.Secrets[0].Hosts = append(te.env.Config.Secrets[0].Hosts, "evil.example")
	if _, err := te.env.Start(ctx, detached("t1")); err != nil {
		t.Fatal(err)
	}
	pc, err = egress.LoadConfig(cfgPath)
	if err != nil || pc.Secrets[0].Value != testSecretValue+"ROTATED" || pc.Secrets[0].Placeholder != ph ||
		!slices.Equal(pc.Secrets[0].Hosts, []string{"api.secret.test"}) {
		t.Errorf("proxy config after resume = %+v, %v", pc.Secrets, err)
	}

	// The value missing at resume: a clear error.
	if _, err := te.find("t1").Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	te.reopen()
	te.env.Config.Network = container.NetworkAllowlist
	te.env.Config.Secrets = []config.Secret{{Name: "API_KEY", Hosts: []string{"api.secret.test"}, FromEnv: "GIT_SANDBOX_TEST_UNSET_VARIABLE"}}
	if _, err := te.env.Start(ctx, detached("t1")); err == nil || !strings.Contains(err.Error(), "GIT_SANDBOX_TEST_UNSET_VARIABLE is not set") {
		t.Errorf("resume without the value: %v", err)
	}
}

// TestSecretsRefusals: a secret also passed with -e, or outside allowlist
// mode (left out with a warning).
func TestSecretsRefusals(t *testing.T) {
	te := allowlistEnv(t)
	withSecret(te, testSecretValue)
	o := detached("t1")
	o.Env = []string{"API_KEY=x"}
	if _, err := te.env.Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "is a secret") {
		t.Errorf("-e of a secret: %v", err)
	}
	te.assertNothingLeft("t1", false)

	te.env.Config.Network = container.NetworkNone
	sb := te.start("t2")
	if _, ok := envValue(sb.Spec.Env, "API_KEY"); ok || !strings.Contains(te.err.String(), "need the allowlist") {
		t.Errorf("secret in none mode: env %v, stderr %s", sb.Spec.Env, te.err.String())
	}
}

// TestMissingSecretBlocksOnlyTheAgentThatUsesIt: a [[secret]] whose source
// is missing refuses the sandboxes of the agent whose CLI talks to its
// hosts (its model key), before anything is made; any other sandbox
// starts without it, with a warning.
func TestMissingSecretBlocksOnlyTheAgentThatUsesIt(t *testing.T) {
	te := allowlistEnv(t)
	te.fake.AddImage(te.env.Config.Image, "claude", "codex")
	te.env.Config.Secrets = []config.Secret{
		{Name: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com"}, FromEnv: "GIT_SANDBOX_TEST_UNSET_VARIABLE"},
		{Name: "TOKEN", Hosts: []string{"api.secret.test"}, FromFile: filepath.Join(te.root, "no-such-file")},
	}
	ctx := context.Background()
	o := detached("c1")
	o.Agent, o.Args, o.Prompt = "claude", nil, "fix it"
	if _, err := te.env.Start(ctx, o); err == nil || !strings.Contains(err.Error(), "GIT_SANDBOX_TEST_UNSET_VARIABLE is not set") {
		t.Errorf("a claude sandbox without its key: %v", err)
	}
	te.assertNothingLeft("c1", false)

	for _, a := range []string{"codex", "shell"} {
		te.err.Reset()
		o := detached(a + "1")
		if a == "codex" {
			o.Agent, o.Args, o.Prompt = "codex", nil, "fix it"
		}
		res, err := te.env.Start(ctx, o)
		if err != nil {
			t.Fatalf("a %s sandbox with another agent's key missing: %v", a, err)
		}
		for _, name := range []string{"ANTHROPIC_API_KEY", "TOKEN"} {
			if _, ok := envValue(res.Sandbox.Spec.Env, name); ok {
				t.Errorf("%s: the agent got %s", a, name)
			}
		}
		for _, want := range []string{"secret ANTHROPIC_API_KEY (from_env GIT_SANDBOX_TEST_UNSET_VARIABLE): GIT_SANDBOX_TEST_UNSET_VARIABLE is not set; this sandbox starts without it", "secret TOKEN (from_file "} {
			if !strings.Contains(te.err.String(), want) {
				t.Errorf("%s: no warning %q:\n%s", a, want, te.err.String())
			}
		}
	}
}

// A host marked inspect = true with no secret: the sandbox gets a CA of
// its own for it (trusted by the agent, its key only in the proxy's
// files), the proxy's configuration names the host, the record keeps it,
// and a resume keeps the hosts of the start whatever the config says now.
func TestInspectedHostsWiring(t *testing.T) {
	te := allowlistEnv(t)
	te.env.Config.Hosts = []config.Host{{Name: "api.inspect.test", Inspect: true}, {Name: "plain.test"}}
	ctx := context.Background()
	sb := te.start("t1")
	spec := te.role("t1", container.RoleAgent)[0].Spec
	if _, ok := envValue(spec.Env, "SSL_CERT_FILE"); !ok {
		t.Errorf("the agent does not trust the sandbox's CA: env %q", spec.Env)
	}
	trust := te.env.Layout.TrustDir("t1")
	if !slices.ContainsFunc(spec.Mounts, func(m container.Mount) bool {
		return m.Target == network.AgentTrustDir && m.Source == trust && m.ReadOnly
	}) {
		t.Errorf("agent mounts: %+v", spec.Mounts)
	}
	cfgPath := filepath.Join(te.env.Layout.ProxyDir("t1"), network.ProxyConfigFile)
	pc, err := egress.LoadConfig(cfgPath)
	if err != nil || !slices.Equal(pc.Inspect, []string{"api.inspect.test"}) || pc.CAKey == "" || len(pc.Secrets) != 0 {
		t.Fatalf("proxy config = %+v, %v", pc, err)
	}
	ca, err := sandboxca.LoadCA(filepath.Join(te.env.Layout.ProxyDir("t1"), "ca.pem"), filepath.Join(te.env.Layout.ProxyDir("t1"), "ca-key.pem"))
	if err != nil || !slices.Equal(ca.Cert.PermittedDNSDomains, []string{"api.inspect.test"}) {
		t.Errorf("the sandbox's CA names %v (%v), want the inspected host only", ca.Cert.PermittedDNSDomains, err)
	}
	if !slices.Equal(sb.Egress.Inspect, []string{"api.inspect.test"}) {
		t.Errorf("record: inspect %q", sb.Egress.Inspect)
	}
	if _, err := te.find("t1").Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	te.env.Config.Hosts = append(te.env.Config.Hosts, config.Host{Name: "later.test", Inspect: true})
	if _, err := te.env.Start(ctx, detached("t1")); err != nil {
		t.Fatal(err)
	}
	if pc, err := egress.LoadConfig(cfgPath); err != nil || !slices.Equal(pc.Inspect, []string{"api.inspect.test"}) {
		t.Errorf("proxy config after resume: inspect %q, %v; want the start's hosts", pc.Inspect, err)
	}
}
