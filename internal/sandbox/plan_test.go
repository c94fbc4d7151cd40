package sandbox

import (
	"slices"
	"testing"
)

func TestResolveEnv(t *testing.T) {
	t.Setenv("GS_TEST_TOKEN", "secret")
	got, err := resolveEnv([]string{"GS_TEST_TOKEN", "FOO=bar", "GS_TEST_UNSET_VAR"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"GS_TEST_TOKEN=secret", "FOO=bar"}) {
		t.Errorf("resolveEnv = %q", got)
	}
	if _, err := resolveEnv([]string{"=x"}); err == nil {
		t.Error("an empty name was accepted")
	}
}
