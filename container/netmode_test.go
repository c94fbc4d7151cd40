package container

import (
	"strings"
	"testing"
)

func TestNetworkModes(t *testing.T) {
	for _, s := range []string{"none", "allowlist", "open"} {
		m, err := ParseNetworkMode(s)
		if err != nil || string(m) != s || m.Validate() != nil {
			t.Errorf("parse %q = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "host", "container:x", "Open", "bridge"} {
		if _, err := ParseNetworkMode(s); err == nil || !strings.Contains(err.Error(), "none, allowlist or open") {
			t.Errorf("parse %q: %v", s, err)
		}
	}
	if !NetworkNone.AtMostAsOpenAs(NetworkAllowlist) || !NetworkAllowlist.AtMostAsOpenAs(NetworkOpen) || !NetworkOpen.AtMostAsOpenAs(NetworkOpen) ||
		NetworkOpen.AtMostAsOpenAs(NetworkAllowlist) || NetworkAllowlist.AtMostAsOpenAs(NetworkNone) {
		t.Error("modes must be ordered none, allowlist, open")
	}
	if NetworkMode("host").AtMostAsOpenAs(NetworkOpen) {
		t.Error("an invalid mode counts as tighter")
	}
	if got := NetworkModeNames(); got != "none, allowlist or open" {
		t.Errorf("names = %q", got)
	}
	if got := NetworkModes(); len(got) != 3 || got[0] != NetworkNone {
		t.Errorf("modes = %v", got)
	}
	if s := (&Spec{Network: "host", User: "1:1"}); s.Validate() == nil {
		t.Error("a spec with host networking validated")
	}
	if s := (&Spec{Network: NetworkAllowlist, User: "1:1", CapDrop: []string{"ALL"}, Security: []string{"x"}, Limits: Limits{Pids: 1}}); s.Validate() == nil {
		t.Error("an allowlist spec without its network validated")
	}
}
