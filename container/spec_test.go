package container

import (
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
	}
	for name, mutate := range bad {
		s := validSpec()
		mutate(s)
		if s.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDocker(t *testing.T) {
	cfg, hc := validSpec().Docker()
	if cfg.User != "1000:1000" || hc.NetworkMode != "none" || *hc.PidsLimit != 10 || hc.Memory != 1<<30 || hc.MemorySwap != 1<<30 || hc.NanoCPUs != 1_500_000_000 {
		t.Errorf("config %+v host %+v", cfg, hc)
	}
	if hc.Privileged || len(hc.CapAdd) != 0 || hc.CapDrop[0] != "ALL" || hc.SecurityOpt[0] != "no-new-privileges" || !*hc.Init {
		t.Errorf("hardening lost: %+v", hc)
	}
	if len(hc.Mounts) != 2 || !hc.Mounts[1].ReadOnly || string(hc.Mounts[1].Type) != "bind" {
		t.Errorf("mounts = %+v", hc.Mounts)
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

func TestExitCodeOf(t *testing.T) {
	for in, want := range map[string]int{"Exited (0) 2 seconds ago": 0, "Exited (137) About a minute ago": 137} {
		if got, ok := exitCodeOf(in); !ok || got != want {
			t.Errorf("exitCodeOf(%q) = %d, %v", in, got, ok)
		}
	}
	if _, ok := exitCodeOf("Up 3 minutes"); ok {
		t.Error("a running container has no exit code")
	}
}
