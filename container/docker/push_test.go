package docker

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/registry"
)

func TestRegistryOf(t *testing.T) {
	for ref, want := range map[string]string{
		"git-sandbox:latest":            "docker.io",
		"acme/app:1":                    "docker.io",
		"localhost/app":                 "localhost",
		"127.0.0.1:5000/git-sandbox:1":  "127.0.0.1:5000",
		"registry.example/team/app:v2":  "registry.example",
		"registry.example:8443/app@sha": "registry.example:8443",
	} {
		if got := registryOf(ref); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", ref, got, want)
		}
	}
}

// The credentials docker login stored inline are sent; a registry with
// none gets no authorisation; one a credential helper keeps is refused
// with what to do.
func TestRegistryAuth(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	cfg := map[string]any{
		"auths": map[string]any{
			"reg.test:5000":    map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("me:s3cret"))},
			"helped.test":      map[string]string{},
			"https://old.test": map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("o:p"))},
		},
		"credsStore": "pass",
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for host, user := range map[string]string{"reg.test:5000": "me", "old.test": "o"} {
		enc, err := registryAuth(host)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.URLEncoding.DecodeString(enc)
		var a registry.AuthConfig
		if err := json.Unmarshal(raw, &a); err != nil || a.Username != user || a.ServerAddress != host {
			t.Errorf("auth for %s = %+v (%v)", host, a, err)
		}
	}
	if enc, err := registryAuth("open.test"); err != nil || enc != "" {
		t.Errorf("a registry with no credentials: %q, %v", enc, err)
	}
	if _, err := registryAuth("helped.test"); err == nil || !strings.Contains(err.Error(), "credential helper") {
		t.Errorf("credentials a helper keeps: %v", err)
	}
}
