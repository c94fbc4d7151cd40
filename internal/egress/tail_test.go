package egress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.log")
	tail := func(from, max int64) (string, string) {
		t.Helper()
		var b bytes.Buffer
		if err := TailLog(&b, path, from, max); err != nil {
			t.Fatal(err)
		}
		head, rest, _ := strings.Cut(b.String(), "\n")
		return head, rest
	}
	if head, rest := tail(0, 1<<20); head != "OFFSET 0" || rest != "" {
		t.Errorf("no log yet: %q %q", head, rest)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(path, []byte("one\ntwo\nthr"), 0o600))
	if head, rest := tail(0, 1<<20); head != "OFFSET 8" || rest != "one\ntwo\n" {
		t.Errorf("a line being written is left for the next look: %q %q", head, rest)
	}
	if head, rest := tail(4, 3); head != "OFFSET 4" || rest != "" {
		t.Errorf("less room than a line: %q %q", head, rest)
	}
	// Rotated: the older generation's rest, then the new one.
	must(os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600))
	must(os.Rename(path, PreviousGeneration(path)))
	must(os.WriteFile(path, []byte("four\n"), 0o600))
	if head, rest := tail(8, 1<<20); head != "OFFSET 5" || rest != "three\nfour\n" {
		t.Errorf("after a rotation: %q %q", head, rest)
	}
}
