package container

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

func TestNetworkModes(t *testing.T) {
	for _, s := range []string{"none", "bridge"} {
		m, err := ParseNetworkMode(s)
		if err != nil || string(m) != s || m.Validate() != nil {
			t.Errorf("parse %q = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "host", "container:x", "Bridge"} {
		if _, err := ParseNetworkMode(s); err == nil || !strings.Contains(err.Error(), "none or bridge") {
			t.Errorf("parse %q: %v", s, err)
		}
	}
	if !NetworkNone.AtMostAsOpenAs(NetworkBridge) || !NetworkBridge.AtMostAsOpenAs(NetworkBridge) || NetworkBridge.AtMostAsOpenAs(NetworkNone) {
		t.Error("none must be tighter than bridge")
	}
	if NetworkMode("host").AtMostAsOpenAs(NetworkBridge) {
		t.Error("an invalid mode counts as tighter")
	}
	if got := NetworkModeNames(); got != "none or bridge" {
		t.Errorf("names = %q", got)
	}
	if got := NetworkModes(); len(got) != 2 || got[0] != NetworkNone {
		t.Errorf("modes = %v", got)
	}
	if s := (&Spec{Network: "host", User: "1:1"}); s.Validate() == nil {
		t.Error("a spec with host networking validated")
	}
	if dockerNetworkMode(NetworkBridge) != "bridge" || dockerNetworkMode(NetworkNone) != "none" {
		t.Error("docker network modes")
	}
}

func TestSDKErrorsMapToSentinels(t *testing.T) {
	nf := sdkErr(cerrdefs.ErrNotFound.WithMessage("no such container: x"))
	if !IsNotFound(nf) || IsConflict(nf) || !errors.Is(fmt.Errorf("inspect: %w", nf), ErrNotFound) {
		t.Errorf("not found: %v", nf)
	}
	if !strings.Contains(nf.Error(), "no such container: x") {
		t.Errorf("message lost: %q", nf.Error())
	}
	cf := sdkErr(cerrdefs.ErrConflict.WithMessage("is not running"))
	if !IsConflict(cf) || IsNotFound(cf) {
		t.Errorf("conflict: %v", cf)
	}
	other := errors.New("boom")
	if sdkErr(other) != other || sdkErr(nil) != nil {
		t.Error("other errors must pass unchanged")
	}
}
