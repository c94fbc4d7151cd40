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
	"io"
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
		case Unsafe(r):
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

// Unsafe reports whether r must not reach a terminal as it is: a C0 or C1
// control or DEL, a bidirectional control (U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069), the line and paragraph separators
// (U+2028, U+2029), and every other rune that is neither printable nor a
// space: format characters (U+200B–U+200D, U+2060–U+2064, U+FEFF, the tag
// characters U+E0000–U+E007F), private-use, unassigned and surrogate code
// points. String, Text and JSON escape exactly these, so text and JSON
// output agree.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x7f:
		return false
	case r < 0xa0:
		return true
	}
	return isBidiControl(r) || r == 0x2028 || r == 0x2029 || (!unicode.IsPrint(r) && !unicode.IsSpace(r))
}

func isBidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		r == 0x200e || r == 0x200f || r == 0x061c
}

// Writer escapes what is written through it as Text does, for a stream of
// output a container chose (logs, setup, verify). A UTF-8 sequence split
// across writes is held back until it is complete, so it prints as the
// character it is; Flush writes out what is held.
type Writer struct {
	W       io.Writer
	pending []byte
}

// NewWriter returns a Writer that writes escaped text to w.
func NewWriter(w io.Writer) *Writer { return &Writer{W: w} }

// Write escapes p and writes it.
func (w *Writer) Write(p []byte) (int, error) {
	buf := append(w.pending, p...)
	w.pending = nil
	// Hold back an incomplete UTF-8 sequence at the end (at most 3 bytes).
	for back := 1; back <= 3 && back <= len(buf); back++ {
		c := buf[len(buf)-back]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-back:]) {
				w.pending = append([]byte(nil), buf[len(buf)-back:]...)
				buf = buf[:len(buf)-back]
			}
			break
		}
	}
	if len(buf) > 0 {
		if _, err := io.WriteString(w.W, Text(string(buf))); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes, escaped, a held-back incomplete sequence.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	s := Text(string(w.pending))
	w.pending = nil
	_, err := io.WriteString(w.W, s)
	return err
}

// Join escapes each of elems (see String) and joins them with sep.
func Join(elems []string, sep string) string {
	out := make([]string, len(elems))
	for i, s := range elems {
		out[i] = String(s)
	}
	return strings.Join(out, sep)
}
