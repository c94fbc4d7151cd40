package egress

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA([]string{"api.example.com"})
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := ca.Write(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	upstreamCA := filepath.Join(dir, "upstream.pem")
	os.WriteFile(upstreamCA, newTestPKI(t, "x.test").caPEM, 0o644)
	sec, err := NewSecret("ANTHROPIC_API_KEY", []string{"api.example.com"}, "sk-ant-api03-realrealrealrealrealrealreal")
	if err != nil {
		t.Fatal(err)
	}
	allow := append(MustParseEntries(FromUser, "api.example.com", "*.example.net:8443"), MustParseEntries(FromFlag, "[2001:db8::1]:22")...)
	c := &ProxyConfig{
		Listen:      "10.0.0.2:3128",
		Allow:       Rules(allow),
		Remove:      Rules(MustParseEntries(FromRepository, "x.example.net")),
		HostAddrs:   []string{"172.17.0.1"},
		Secrets:     SecretConfigs([]Secret{sec}),
		CACert:      certPath,
		CAKey:       keyPath,
		UpstreamCA:  upstreamCA,
		Log:         filepath.Join(dir, "egress.log"),
		DialTimeout: Duration(3 * time.Second),
	}
	path := filepath.Join(dir, "proxy.json")
	if err := WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if !strings.Contains(readFile(t, path), `"dial_timeout": "3s"`) {
		t.Fatalf("file:\n%s", readFile(t, path))
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := got.Options()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Policy.Allow) != 3 || o.Policy.Allow[2].Source != FromFlag || o.Policy.Allow[1].String() != "*.example.net:8443" {
		t.Fatalf("allow %+v", o.Policy.Allow)
	}
	if len(o.Policy.Remove) != 1 || o.Policy.Remove[0].Source != FromRepository || len(o.Policy.HostAddrs) != 1 {
		t.Fatalf("policy %+v", o.Policy)
	}
	if len(o.Secrets) != 1 || o.Secrets[0].Value != sec.Value || o.Secrets[0].Placeholder != sec.Placeholder || o.Secrets[0].Hosts[0].Host != "api.example.com" {
		t.Fatalf("secrets %+v", o.Secrets)
	}
	if o.CA == nil || !o.CA.Cert.Equal(ca.Cert) || o.DialTimeout != 3*time.Second || o.IdleTimeout != 0 {
		t.Fatalf("options %+v", o)
	}
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConfigRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), mode)
		os.Chmod(p, mode)
		return p
	}
	const withSecret = `{"allow":[],"secrets":[{"name":"K","hosts":["a.example.com"],"placeholder":"gsbxAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","value":"v"}]}`
	if _, err := LoadConfig(write("open.json", withSecret, 0o644)); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a readable file with secrets: %v", err)
	}
	if _, err := LoadConfig(write("unknown.json", `{"allow":[],"allwo":[]}`, 0o600)); err == nil {
		t.Error("an unknown field was accepted")
	}
	c, err := LoadConfig(write("bad-entry.json", `{"allow":[{"entry":"https://x","source":"user config"}]}`, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Options(); err == nil || !strings.Contains(err.Error(), "https://x") {
		t.Errorf("a bad entry: %v", err)
	}
	c, _ = LoadConfig(write("no-ca.json", withSecret, 0o600))
	if _, err := c.Options(); err == nil || !strings.Contains(err.Error(), "ca_cert") {
		t.Errorf("secrets without a CA: %v", err)
	}
}
