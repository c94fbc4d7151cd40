package termsafe

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "fix-login", "fix-login"},
		{"unicode kept", "café/ñ", "café/ñ"},
		{"csi cursor", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"osc 52 clipboard", "\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`},
		{"newline", "a\nb", `a\x0ab`},
		{"tab", "a\tb", `a\x09b`},
		{"c1 csi", "a\u009b2Jb", `a\u009b2Jb`},
		{"invalid utf8", "a\xffb", `a\xffb`},
		{"bidi override", "a\u202eb", `a\u202eb`},
		{"backslash is escaped so output is unambiguous", `a\x1b`, `a\\x1b`},
		{"del", "a\x7fb", `a\x7fb`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"zero width space", "a\u200bb", `a\u200bb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	in := "subject\n\n\tbody \x1b]0;title\x07 end"
	want := "subject\n\n\tbody \\x1b]0;title\\x07 end"
	if got := Text(in); got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
}

func TestTextKeepsBackslash(t *testing.T) {
	if got := Text(`\ No newline at end of file`); got != `\ No newline at end of file` {
		t.Errorf("Text = %q", got)
	}
}

func TestWriter(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	for _, chunk := range []string{"ok \x1b[2J\x1b]52;c;eA==\x07", "\xc3", "\xa9 done\n", "\xe2\x80"} {
		if n, err := w.Write([]byte(chunk)); err != nil || n != len(chunk) {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `ok \x1b[2J\x1b]52;c;eA==\x07é done` + "\n" + `\xe2\x80`
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
