package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAppendRepoEgress(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	t.Setenv("GIT_SANDBOX_CONFIG", cfg)
	// No newline at the end, and a table last: the appended one stands alone.
	if err := os.WriteFile(cfg, []byte("allow = [\"a.test\"]\n[limits]\npids = 256"), 0o600); err != nil {
		t.Fatal(err)
	}
	repo, other := filepath.Join(dir, "app"), filepath.Join(dir, "other")
	for _, d := range []string{repo, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := AppendRepoEgress(repo, false, []string{"b.test", "c.test:8443"}); err != nil {
		t.Fatal(err)
	}
	if _, err := AppendRepoEgress(repo+"/", true, []string{"a.test"}); err != nil {
		t.Fatal(err)
	}
	l, err := Load(repo)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Allow, []string{"a.test", "b.test", "c.test:8443"}) || !slices.Equal(l.Deny, []string{"a.test"}) || l.Limits.Pids != 256 {
		t.Fatalf("allow %q deny %q pids %d", l.Allow, l.Deny, l.Limits.Pids)
	}
	if l, err = Load(other); err != nil || !slices.Equal(l.Allow, []string{"a.test"}) || len(l.Deny) != 0 {
		t.Fatalf("another repository: allow %q deny %q %v", l.Allow, l.Deny, err)
	}
	// A repository cannot add entries of its own this way.
	if err := os.WriteFile(filepath.Join(other, RepoFile), []byte("[[repository]]\npath = \"/\"\nallow = [\"evil.test\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(other); err == nil || !strings.Contains(err.Error(), `"repository"`) {
		t.Fatalf("a repository's [[repository]]: %v", err)
	}
}
