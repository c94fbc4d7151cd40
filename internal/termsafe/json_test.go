package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// rawUnsafe returns the first rune of s that Unsafe reports, other than
// the whitespace JSON puts between tokens, or "".
func rawUnsafe(s string) string {
	for _, r := range s {
		if r != '\n' && r != '\t' && (Unsafe(r) || r == utf8.RuneError) {
			return string(r)
		}
	}
	return ""
}

func TestJSONEscapesWhatTextEscapes(t *testing.T) {
	tests := []struct {
		name, in string
		// want is the JSON string literal MarshalJSON writes for in.
		want string
	}{
		{"plain", "fix-login.txt", `"fix-login.txt"`},
		{"letters kept", "café/ñ/日本", `"café/ñ/日本"`},
		{"emoji kept", "a😀b", `"a😀b"`},
		{"bidi override", "evil\u202etxt.exe", `"evil\u202etxt.exe"`},
		{"bidi isolates", "a\u2066b\u2069", `"a\u2066b\u2069"`},
		{"arabic letter mark", "a\u061cb", `"a\u061cb"`},
		{"lrm rlm", "a\u200e\u200fb", `"a\u200e\u200fb"`},
		{"csi sequence", "x\x1b[2Jy", `"x\u001b[2Jy"`},
		{"osc 52", "\x1b]52;c;ZXZpbA==\x07", `"\u001b]52;c;ZXZpbA==\u0007"`},
		{"c1 csi", "a\u009b31mb", `"a\u009b31mb"`},
		{"nel", "a\u0085b", `"a\u0085b"`},
		{"del", "a\x7fb", `"a\u007fb"`},
		{"zero width space and joiners", "a\u200b\u200c\u200db", `"a\u200b\u200c\u200db"`},
		{"line and paragraph separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"byte order mark", "\ufeffa", `"\ufeffa"`},
		{"soft hyphen", "a\u00adb", `"a\u00adb"`},
		{"tag characters above the BMP", "a\U000e0041\U000e007fb", `"a\udb40\udc41\udb40\udc7fb"`},
		{"private use above the BMP", "a\U000f0000b", `"a\udb80\udc00b"`},
		{"backslash before an escaped rune", "a\\\u202eb", `"a\\\u202eb"`},
		{"newline and tab", "a\nb\tc", `"a\nb\tc"`},
		{"invalid utf-8 is what a decoder reads", "a\xffb", `"a\ufffdb"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := MarshalJSON(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("MarshalJSON(%q) = %s, want %s", tt.in, b, tt.want)
			}
			if r := rawUnsafe(string(b)); r != "" {
				t.Errorf("MarshalJSON(%q) = %q holds %q raw", tt.in, b, r)
			}
			var back string
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s does not decode: %v", b, err)
			}
			if want := strings.ToValidUTF8(tt.in, "\ufffd"); back != want {
				t.Errorf("decoded %q, want %q", back, want)
			}
		})
	}
}

// TestJSONEncoderRoundTrips: indented output of a structure whose keys and
// values carry every kind of unsafe rune holds none raw and decodes to the
// same structure.
func TestJSONEncoderRoundTrips(t *testing.T) {
	type row struct {
		Branch string            `json:"branch"`
		Paths  []string          `json:"paths"`
		With   map[string]string `json:"with"`
	}
	in := []row{{
		Branch: "fix\u202e",
		Paths:  []string{"x\x1b]0;pwned\x07\x1b[2J.txt", "c1\u009b2J", "tag\U000e0069", "del\x7f", "<b>&amp;</b>"},
		With:   map[string]string{"other\u2067": "p\u200b", "plain": "é"},
	}}
	var b bytes.Buffer
	enc := NewJSONEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(in); err != nil {
		t.Fatal(err)
	}
	if r := rawUnsafe(b.String()); r != "" {
		t.Errorf("encoder wrote %q raw:\n%s", r, b.String())
	}
	if !strings.HasSuffix(b.String(), "]\n") || !strings.Contains(b.String(), "\n  {\n    \"branch\"") {
		t.Errorf("not indented as json.Encoder indents:\n%s", b.String())
	}
	var back []row
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(back)
	want, _ := json.Marshal(in)
	if !bytes.Equal(got, want) {
		t.Errorf("round trip changed the values:\n got %s\nwant %s", got, want)
	}
}

// TestJSONOnForeignText: text that did not come from encoding/json (a
// decision log line) is made safe as well; what was valid stays valid and
// decodes the same.
func TestJSONOnForeignText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"untouched", `{"host":"api.example.com","port":443}`, `{"host":"api.example.com","port":443}`},
		{"raw bidi and c1 in a string", "{\"host\":\"a\u202eb\u009b\"}", `{"host":"a\u202eb\u009b"}`},
		{"raw escape byte", "{\"host\":\"a\x1b[2Jb\"}", `{"host":"a\u001b[2Jb"}`},
		{"carriage return", "{\"a\":1}\r", `{"a":1}\u000d`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(JSON([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if r := rawUnsafe(got); r != "" {
				t.Errorf("JSON(%q) holds %q raw", tt.in, r)
			}
		})
	}
}

// TestUnsafeAgreesWithString: every rune String escapes, Unsafe reports,
// and no other (a backslash aside, which String doubles for clarity).
func TestUnsafeAgreesWithString(t *testing.T) {
	for r := rune(0); r <= 0x10ffff; r++ {
		if r == '\\' || (r >= 0xd800 && r <= 0xdfff) {
			continue
		}
		s := string(r)
		escaped := String(s) != s
		if escaped != Unsafe(r) {
			t.Fatalf("U+%04X: String escapes it %v, Unsafe says %v", r, escaped, Unsafe(r))
		}
	}
}

// TestTOML: BurntSushi/toml's basic strings take the same escapes, and
// \U above U+FFFF; the text decodes to the same values.
func TestTOML(t *testing.T) {
	type cfg struct {
		Setup string            `toml:"setup"`
		Env   map[string]string `toml:"env"`
	}
	in := cfg{Setup: "make \u202e\u009b\x7f\x1b[2J \U000e0041 é", Env: map[string]string{"k\u2066": "v\u200b"}}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(in); err != nil {
		t.Fatal(err)
	}
	got := string(TOML(b.Bytes()))
	if !strings.Contains(got, `setup = "make \u202e\u009b\u007f\u001b[2J \U000e0041 é"`) {
		t.Errorf("TOML:\n%s", got)
	}
	if r := rawUnsafe(got); r != "" {
		t.Errorf("TOML holds %q raw:\n%s", r, got)
	}
	var back cfg
	if _, err := toml.Decode(got, &back); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if back.Setup != in.Setup || back.Env["k\u2066"] != "v\u200b" {
		t.Errorf("round trip: %+v", back)
	}
}
