package land

import (
	"slices"
	"testing"
)

func TestNotNested(t *testing.T) {
	got := NotNested([]string{"sub/", "sub/f", "subway", "bad\x01name", "lib"}, []string{"sub", "lib"})
	if want := []string{"subway", "bad\x01name"}; !slices.Equal(got, want) {
		t.Errorf("NotNested = %q, want %q", got, want)
	}
	if got := NotNested(nil, []string{"sub"}); got != nil {
		t.Errorf("nothing skipped: %q", got)
	}
}
