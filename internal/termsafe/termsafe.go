// Package termsafe makes text an agent controls safe to print on a terminal.
//
// Branch names, commit messages, file names and container output summaries
// can all be written by the agent. Printed raw, an escape sequence in one of
// them can move the cursor, rewrite earlier lines, retitle the window or set
// the clipboard (OSC 52). Everything the tool prints that the agent could have
// chosen goes through this package first.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every control character, C1 control, invalid UTF-8
// byte and bidirectional override escaped as a visible \x.. or \u.... form.
// Newlines and tabs are escaped too: the result is always one line.
func String(s string) string {
	return escape(s, false)
}

// Text is String for multi-line text such as diffs and messages: newlines
// and tabs are kept, every other control character is escaped, and a
// backslash stays a backslash (readability wins over telling a typed "\x1b"
// from an escaped one: neither acts on the terminal).
func Text(s string) string {
	return escape(s, true)
}

func escape(s string, keepLines bool) string {
	if isPlain(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\\' && !keepLines:
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		case isBidiControl(r) || (!unicode.IsPrint(r) && !unicode.IsSpace(r)):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// isPlain reports whether s is printable ASCII with no backslash, the common
// case that needs no copy.
func isPlain(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' && !keepLines {
			return false
		}
	}
	return true
}

func isBidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		r == 0x200e || r == 0x200f || r == 0x061c
}
