package rawterm

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/moby/term"
)

// TestDetachable: Ctrl-P Ctrl-Q detaches, in one read or split over two,
// and never reaches the session; a Ctrl-P followed by another key is
// passed on with it.
func TestDetachable(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		detached       bool
	}{
		{"keys", "ls\r\x10\x11more", "ls\r", true},
		{"keys one byte at a time", "ab\x10\x11c", "ab", true},
		{"Ctrl-P alone", "a\x10b\x11", "a\x10b\x11", false},
		{"Ctrl-C is a key", "\x03", "\x03", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.in)
			if tc.name == "keys one byte at a time" {
				r = iotest.OneByteReader(r)
			}
			calls := 0
			got, err := io.ReadAll(Detachable(r, func() { calls++ }))
			if tc.detached {
				if !errors.As(err, new(term.EscapeError)) || calls != 1 {
					t.Errorf("read ended with %v after %d detach(es), want one detach", err, calls)
				}
			} else if err != nil || calls != 0 {
				t.Errorf("read ended with %v after %d detach(es), want none", err, calls)
			}
			if string(got) != tc.want {
				t.Errorf("the session got %q, want %q", got, tc.want)
			}
		})
	}
}
