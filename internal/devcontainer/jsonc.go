package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// standardize turns JSON with comments (// and /* */) and trailing commas —
// what the devcontainer specification allows — into plain JSON. Every byte
// it drops becomes a space (newlines stay), so offsets in the result are
// offsets in the input and errors point at the line the author wrote. A
// leading byte-order mark is blanked too.
func standardize(in []byte) ([]byte, error) {
	out := bytes.Clone(in)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	if bytes.HasPrefix(out, []byte("\xef\xbb\xbf")) {
		blank(0, 3)
	}
	comma := -1 // a comma that is trailing if the next token closes
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case c == '"':
			j := i + 1
			for ; j < len(out) && out[j] != '"'; j++ {
				if out[j] == '\\' {
					j++
				}
			}
			if j >= len(out) {
				return nil, &syntaxError{offset: int64(i), msg: "string not closed"}
			}
			i = j
			comma = -1
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			j := i
			for j < len(out) && out[j] != '\n' {
				j++
			}
			blank(i, j)
			i = j - 1
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			if end < 0 {
				return nil, &syntaxError{offset: int64(i), msg: "comment not closed"}
			}
			j := i + 2 + end + 2
			blank(i, j)
			i = j - 1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == ',':
			comma = i
		case c == '}' || c == ']':
			if comma >= 0 {
				out[comma] = ' '
			}
			comma = -1
		default:
			comma = -1
		}
	}
	return out, nil
}

// syntaxError is a JSONC error at a byte offset.
type syntaxError struct {
	offset int64
	msg    string
}

func (e *syntaxError) Error() string { return e.msg }

// position turns a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	line = 1 + bytes.Count(data[:offset], []byte("\n"))
	col = int(offset) - bytes.LastIndexByte(data[:offset], '\n')
	return line, col
}

// decodeError says where in data a standardize or json error is.
func decodeError(data []byte, err error) error {
	var off int64 = -1
	var se *syntaxError
	var je *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.offset
	case errors.As(err, &je):
		off = je.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return err
	}
	line, col := position(data, off)
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// member is one key of a JSON object, in document order.
type member struct {
	Key   string
	Value json.RawMessage
	// Offset is where the key ends in raw.
	Offset int64
}

// members decodes a JSON object keeping the order of its keys; a repeated
// key keeps its first place and its last value. ok is false when raw is not
// an object.
func members(raw json.RawMessage) (ms []member, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if d, isDelim := tok.(json.Delim); !isDelim || d != '{' {
		return nil, false, nil
	}
	seen := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, true, err
		}
		key, _ := tok.(string)
		off := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, true, err
		}
		if i, dup := seen[key]; dup {
			ms[i].Value = v
			continue
		}
		seen[key] = len(ms)
		ms = append(ms, member{Key: key, Value: v, Offset: off})
	}
	if _, err := dec.Token(); err != nil {
		return nil, true, err
	}
	return ms, true, nil
}
