package termsafe

import (
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON returns the JSON text b with every rune Unsafe reports written as a
// \u escape (a surrogate pair above U+FFFF), so that the text decodes to
// exactly the values it did and prints nothing a terminal acts on.
// encoding/json escapes the C0 controls and U+2028/U+2029 itself, but
// writes DEL, the C1 controls and the bidirectional and invisible format
// characters raw.
//
// Outside strings valid JSON holds only ASCII, so only string contents
// change; a byte that is not UTF-8 becomes \ufffd, what a decoder reads for
// it. A raw control character other than a space, tab or newline (not
// valid JSON anywhere) is escaped too, so that no input, however broken,
// reaches the terminal raw.
func JSON(b []byte) []byte { return escapeQuoted(b, appendUnicodeEscape) }

// TOML is JSON for TOML text as github.com/BurntSushi/toml writes it
// (every string and quoted key a basic string, which takes the same \u
// escapes; above U+FFFF \UXXXXXXXX, as TOML has no surrogates). That
// encoder escapes the C0 controls and DEL only.
func TOML(b []byte) []byte { return escapeQuoted(b, appendTOMLEscape) }

// escapeQuoted writes every unsafe rune of b with esc.
func escapeQuoted(b []byte, esc func([]byte, rune) []byte) []byte {
	i := 0
	for i < len(b) && jsonPlain(b[i]) {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		c := b[i]
		if jsonPlain(c) {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = esc(out, utf8.RuneError)
		case Unsafe(r):
			out = esc(out, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// jsonPlain reports whether c is printable ASCII or the whitespace
// encoding/json writes between tokens.
func jsonPlain(c byte) bool {
	return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t'
}

const hexDigits = "0123456789abcdef"

// appendUnicodeEscape appends r as \uXXXX, or as a UTF-16 surrogate pair
// of two such escapes above U+FFFF, as JSON spells any character.
func appendUnicodeEscape(out []byte, r rune) []byte {
	units := []rune{r}
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		units = []rune{hi, lo}
	}
	for _, u := range units {
		out = append(out, '\\', 'u', hexDigits[u>>12&0xf], hexDigits[u>>8&0xf], hexDigits[u>>4&0xf], hexDigits[u&0xf])
	}
	return out
}

// appendTOMLEscape appends r as \uXXXX, or \UXXXXXXXX above U+FFFF.
func appendTOMLEscape(out []byte, r rune) []byte {
	if r <= 0xffff {
		return appendUnicodeEscape(out, r)
	}
	out = append(out, '\\', 'U')
	for shift := 28; shift >= 0; shift -= 4 {
		out = append(out, hexDigits[r>>shift&0xf])
	}
	return out
}

// MarshalJSON is json.Marshal with the result passed through JSON: the one
// way the tool turns a value into JSON it prints.
func MarshalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return JSON(b), nil
}

// JSONEncoder writes values as json.Encoder does, each passed through JSON
// before it reaches the writer: the one way the tool prints JSON.
type JSONEncoder struct {
	w              io.Writer
	prefix, indent string
	keepHTML       bool
}

// NewJSONEncoder returns an encoder that writes to w.
func NewJSONEncoder(w io.Writer) *JSONEncoder { return &JSONEncoder{w: w} }

// SetIndent is json.Encoder.SetIndent.
func (e *JSONEncoder) SetIndent(prefix, indent string) { e.prefix, e.indent = prefix, indent }

// SetEscapeHTML is json.Encoder.SetEscapeHTML (on by default).
func (e *JSONEncoder) SetEscapeHTML(on bool) { e.keepHTML = !on }

// Encode writes v as JSON followed by a newline, in one write.
func (e *JSONEncoder) Encode(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent(e.prefix, e.indent)
	enc.SetEscapeHTML(!e.keepHTML)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := e.w.Write(JSON(buf.Bytes()))
	return err
}
