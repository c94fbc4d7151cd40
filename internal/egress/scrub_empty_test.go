package egress

import (
	"io"
	"strings"
	"testing"
)

// A scrubber with nothing to scrub passes a body on whole.
func TestEmptyScrubberPassesTheBody(t *testing.T) {
	sc := newScrubber(nil)
	for _, body := range []string{"", "hello from upstream", strings.Repeat("x", 100_000)} {
		got, err := io.ReadAll(newPatternReplacer(strings.NewReader(body), sc.pats, nil))
		if err != nil || string(got) != body {
			t.Errorf("body of %d bytes came through as %d bytes (%v)", len(body), len(got), err)
		}
	}
}
