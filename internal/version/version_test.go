package version

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3"
	if got := String(); got != "v1.2.3" {
		t.Errorf("String() = %q, want the version the Makefile set", got)
	}
	// Unset: the VCS revision when the toolchain embedded one (a test
	// binary has none), else "dev".
	Version = "dev"
	if got := String(); got != "dev" && !(strings.HasPrefix(got, "dev-") && len(got) == len("dev-")+12) {
		t.Errorf("String() = %q, want dev or dev-<12 hex digits>", got)
	}
}
