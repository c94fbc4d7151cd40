package container

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"
)

func validSpec() *Spec {
	s := &Spec{Name: "n", Image: "i", User: "1000:1000", Network: "none", Limits: Limits{Pids: 10, MemoryBytes: 1 << 30, CPUs: 1.5},
		Mounts: []Mount{{Source: "/a", Target: "/workspace"}, {Source: "/b", Target: "/workspace/.git", ReadOnly: true}}}
	s.Harden()
	return s
}

func TestValidate(t *testing.T) {
	if err := validSpec().Validate(); err != nil {
		t.Fatalf("valid spec refused: %v", err)
	}
	bad := map[string]func(*Spec){
		"host network":      func(s *Spec) { s.Network = "host" },
		"no user":           func(s *Spec) { s.User = "" },
		"no hardening":      func(s *Spec) { s.CapDrop = nil },
		"no pids limit":     func(s *Spec) { s.Limits.Pids = 0 },
		"relative target":   func(s *Spec) { s.Mounts[0].Target = "workspace" },
		"duplicate target":  func(s *Spec) { s.Mounts[1].Target = "/workspace/" },
		"comma in a source": func(s *Spec) { s.Mounts[0].Source = "/a,b" },
		"alias, no network": func(s *Spec) { s.NetworkAlias = "agent" },
		"alias not a label": func(s *Spec) { s.Network, s.NetworkName, s.NetworkAlias = NetworkAllowlist, "n", "a.b" },
		"host, no address":  func(s *Spec) { s.Hosts = []Host{{Name: "proxy"}} },
		"host with a colon": func(s *Spec) { s.Hosts = []Host{{Name: "a:1.2.3.4", Addr: netip.MustParseAddr("10.0.0.1")}} },
		"host with a space": func(s *Spec) { s.Hosts = []Host{{Name: "a b", Addr: netip.MustParseAddr("10.0.0.1")}} },
	}
	s0 := validSpec()
	s0.Hosts = []Host{{Name: "git-sandbox-proxy-0123.x", Addr: netip.MustParseAddr("10.213.0.30")}}
	if err := s0.Validate(); err != nil {
		t.Errorf("a host name and address refused: %v", err)
	}
	s := validSpec()
	s.Network, s.NetworkName, s.NetworkAlias = NetworkAllowlist, "n", "git-sandbox-agent"
	if err := s.Validate(); err != nil {
		t.Errorf("an alias on the container's network refused: %v", err)
	}
	for name, mutate := range bad {
		s := validSpec()
		mutate(s)
		if s.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCloneCopiesTheEntrypoint(t *testing.T) {
	s := validSpec()
	s.Entrypoint = []string{"/git-sandbox"}
	c := s.Clone()
	c.Entrypoint[0] = "/changed"
	if s.Entrypoint[0] != "/git-sandbox" {
		t.Error("Clone shares the entrypoint")
	}
}

func TestNames(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)
	a := Name("repo-1", "my repo", "feat/x;evil")
	if !valid.MatchString(a) || !strings.HasPrefix(a, "git-sandbox-my-repo-feat-x-evil-") {
		t.Errorf("Name = %q", a)
	}
	if a == Name("repo-2", "my repo", "feat/x;evil") || a == Name("repo-1", "my repo", "feat/x;evil2") {
		t.Error("names collide")
	}
	if h := Hostname("feat/x_y"); h != "feat-x-y" {
		t.Errorf("Hostname = %q", h)
	}
	if h := Hostname("///"); h != "sandbox" {
		t.Errorf("Hostname = %q", h)
	}
}
