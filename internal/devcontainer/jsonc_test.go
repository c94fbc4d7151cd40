package devcontainer

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStandardizeAcceptsCommentsAndTrailingCommas(t *testing.T) {
	cases := []struct {
		name, in string
		want     any
	}{
		{"line comment", "{\"a\": 1 // one\n}", map[string]any{"a": 1.0}},
		{"block comment", "{/* x */\"a\": /* y */ 1}", map[string]any{"a": 1.0}},
		{"multi-line block comment", "{\n/*\n * x\n */\n\"a\": 1}", map[string]any{"a": 1.0}},
		{"trailing comma in object", `{"a": 1,}`, map[string]any{"a": 1.0}},
		{"trailing comma in array", `{"a": [1, 2,]}`, map[string]any{"a": []any{1.0, 2.0}}},
		{"trailing comma before a comment", "{\"a\": [1, // last\n]}", map[string]any{"a": []any{1.0}}},
		{"trailing comma, block comment and newline", "{\"a\": 1, /* c */\n}", map[string]any{"a": 1.0}},
		{"comment markers in strings stay", `{"a": "http://x/*y*/"}`, map[string]any{"a": "http://x/*y*/"}},
		{"escaped quote in a string", `{"a": "say \"//\"", "b": 2,}`, map[string]any{"a": `say "//"`, "b": 2.0}},
		{"escaped backslash before the closing quote", `{"a": "c:\\", "b": "//",}`, map[string]any{"a": `c:\`, "b": "//"}},
		{"commas in strings stay", `{"a": ",}"}`, map[string]any{"a": ",}"}},
		{"byte-order mark", "\xef\xbb\xbf{\"a\": 1}", map[string]any{"a": 1.0}},
		{"comment at the end without a newline", `{"a": 1} // end`, map[string]any{"a": 1.0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := standardize([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(c.in) {
				t.Errorf("length changed: %d -> %d", len(c.in), len(out))
			}
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("not JSON after standardize: %v\n%s", err, out)
			}
			if g, _ := json.Marshal(got); string(g) != mustJSON(c.want) {
				t.Errorf("got %s, want %s", g, mustJSON(c.want))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStandardizeKeepsLinesForErrors(t *testing.T) {
	in := "{\n  // a comment\n  \"a\": 1,\n  \"b\": oops\n}"
	out, err := standardize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	err = json.Unmarshal(out, new(any))
	if err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if msg := decodeError([]byte(in), err).Error(); !strings.HasPrefix(msg, "line 4, column") {
		t.Errorf("error does not point at line 4: %s", msg)
	}
}

func TestStandardizeRefusesUnclosed(t *testing.T) {
	for _, in := range []string{`{"a": "open}`, "{\"a\": 1 /* open"} {
		if _, err := standardize([]byte(in)); err == nil {
			t.Errorf("%q: accepted", in)
		} else if msg := decodeError([]byte(in), err).Error(); !strings.HasPrefix(msg, "line 1, column") {
			t.Errorf("%q: error without a position: %s", in, msg)
		}
	}
}

func TestMembersKeepOrder(t *testing.T) {
	ms, ok, err := members(json.RawMessage(`{"z": 1, "a": 2, "m": 3, "a": 4}`))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key+"="+string(m.Value))
	}
	if got := strings.Join(keys, " "); got != "z=1 a=4 m=3" {
		t.Errorf("members = %s", got)
	}
	if _, ok, _ := members(json.RawMessage(`[1]`)); ok {
		t.Error("an array taken for an object")
	}
}
