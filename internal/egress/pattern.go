package egress

import (
	"bytes"
	"io"
	"sort"
)

// patterns is a set of byte strings looked for together, each with its
// replacement (none when to is nil). A match is the one that starts
// first; of two starting at the same byte, the longer.
//
// Each pattern is found through an anchor: its longest run of letters and
// digits, or a shorter pattern's anchor that it contains. The encodings
// of one value (raw, URL-escaped, base64 in both alphabets, with and
// without padding) share their runs of letters and digits, so the dozen
// encodings of a secret cost about four searches of the stream, not a
// dozen.
type patterns struct {
	from, to [][]byte
	anchors  []anchor
	maxLen   int
	byFirst  [256][]int // the patterns beginning with each byte
}

// anchor is a string every one of its patterns contains.
type anchor struct {
	s      []byte
	refs   []anchorRef
	maxOff int // the largest off of refs
}

// anchorRef is a pattern holding an anchor, and where in it.
type anchorRef struct{ pat, off int }

// minAnchor is the shortest run of letters and digits used as an anchor;
// a pattern with no such run is its own anchor.
const minAnchor = 6

func newPatterns(from, to [][]byte) *patterns {
	ps := &patterns{from: from, to: to}
	order := make([]int, len(from))
	for i := range order {
		order[i] = i
	}
	// Shorter patterns first: their anchors are found in the longer
	// encodings that contain them.
	sort.SliceStable(order, func(a, b int) bool { return len(from[order[a]]) < len(from[order[b]]) })
	for _, i := range order {
		f := from[i]
		ps.maxLen = max(ps.maxLen, len(f))
		ps.byFirst[f[0]] = append(ps.byFirst[f[0]], i)
		found := false
		for ai := range ps.anchors {
			a := &ps.anchors[ai]
			if off := bytes.Index(f, a.s); off >= 0 {
				a.refs = append(a.refs, anchorRef{i, off})
				a.maxOff = max(a.maxOff, off)
				found = true
				break
			}
		}
		if !found {
			s, off := alnumRun(f)
			ps.anchors = append(ps.anchors, anchor{s: s, refs: []anchorRef{{i, off}}, maxOff: off})
		}
	}
	return ps
}

// alnumRun is the longest run of ASCII letters and digits in f and where
// it starts, or f itself when that run is shorter than minAnchor.
func alnumRun(f []byte) ([]byte, int) {
	best, bestAt := 0, 0
	for i := 0; i < len(f); {
		j := i
		for j < len(f) && isAlnum(f[j]) {
			j++
		}
		if j-i > best {
			best, bestAt = j-i, i
		}
		i = j + 1
	}
	if best < minAnchor {
		return f, 0
	}
	return f[bestAt : bestAt+best], bestAt
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// index returns where in b the first match starts and which pattern it
// is, or -1, -1.
func (ps *patterns) index(b []byte) (at, which int) {
	at, which = -1, -1
	for _, a := range ps.anchors {
		for off := 0; off < len(b); {
			j := bytes.Index(b[off:], a.s)
			if j < 0 {
				break
			}
			j += off
			if at >= 0 && j-a.maxOff > at {
				break // every later match of this anchor starts later
			}
			for _, r := range a.refs {
				st := j - r.off
				if st < 0 || at >= 0 && st > at {
					continue
				}
				f := ps.from[r.pat]
				if bytes.HasPrefix(b[st:], f) && (at < 0 || st < at || len(f) > len(ps.from[which])) {
					at, which = st, r.pat
				}
			}
			off = j + 1
		}
	}
	return at, which
}

// containsAny reports whether b holds a pattern.
func (ps *patterns) containsAny(b []byte) bool {
	for _, a := range ps.anchors {
		if bytes.Contains(b, a.s) {
			at, _ := ps.index(b)
			return at >= 0
		}
	}
	return false
}

// replace returns s with every match replaced, or s itself when it holds
// none.
func (ps *patterns) replace(s string) string {
	b := []byte(s)
	at, which := ps.index(b)
	if at < 0 {
		return s
	}
	var out []byte
	for at >= 0 {
		out = append(append(out, b[:at]...), ps.to[which]...)
		b = b[at+len(ps.from[which]):]
		at, which = ps.index(b)
	}
	return string(append(out, b...))
}

// partialSuffix is the length of the longest end of b that begins some
// pattern (and is shorter than it).
func (ps *patterns) partialSuffix(b []byte) int {
	if ps.maxLen == 0 {
		return 0 // no pattern at all
	}
	tail := b[len(b)-min(ps.maxLen-1, len(b)):]
	// Longest first: from the left of the part of b a pattern could
	// begin in, each byte that begins a pattern.
	for i, c := range tail {
		for _, pi := range ps.byFirst[c] {
			if f := ps.from[pi]; len(f) > len(tail)-i && bytes.HasPrefix(f, tail[i:]) {
				return len(tail) - i
			}
		}
	}
	return 0
}

// streamReplacer finds patterns in a stream. On a match it either fails
// with the error onMatch returns, or writes the pattern's replacement.
// It holds back only the bytes that could be the start of a pattern, so a
// stream of events is passed on as it comes.
type streamReplacer struct {
	src     io.Reader
	pats    *patterns
	onMatch func(i int) error
	pending []byte // read, not yet examined to the end
	out     []byte // ready to be returned
	err     error  // from src, or a match
	buf     []byte
}

func newStreamReplacer(src io.Reader, from, to []string, onMatch func(i int) error) *streamReplacer {
	var f, t [][]byte
	for i, s := range from {
		f = append(f, []byte(s))
		if to != nil {
			t = append(t, []byte(to[i]))
		}
	}
	return newPatternReplacer(src, newPatterns(f, t), onMatch)
}

func newPatternReplacer(src io.Reader, pats *patterns, onMatch func(i int) error) *streamReplacer {
	return &streamReplacer{src: src, pats: pats, onMatch: onMatch, buf: make([]byte, 32*1024)}
}

func (r *streamReplacer) Read(p []byte) (int, error) {
	if len(r.out) == 0 && len(r.pending) == 0 && r.err == nil && len(p) >= len(r.buf) {
		// The common case, without a copy: read straight into p and hand
		// it back when it holds no pattern, keeping only an end that could
		// begin one.
		n, err := r.src.Read(p)
		if !r.pats.containsAny(p[:n]) {
			keep := 0
			if err == nil {
				keep = r.pats.partialSuffix(p[:n])
			}
			r.pending = append(r.pending, p[n-keep:n]...)
			r.err = err
			if n-keep > 0 || err != nil {
				return n - keep, err
			}
		} else {
			r.pending = append(r.pending, p[:n]...)
			r.err = err
			if merr := r.process(err != nil); merr != nil {
				r.err = merr
				r.pending, r.out = nil, nil
				return 0, merr
			}
		}
	}
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		n, err := r.src.Read(r.buf)
		r.pending = append(r.pending, r.buf[:n]...)
		if err != nil {
			r.err = err
		}
		if merr := r.process(err != nil); merr != nil {
			r.err = merr
			r.pending, r.out = nil, nil
			return 0, merr
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// process moves what is certainly not (the start of) a pattern from
// pending to out, replacing patterns on the way; at the end, everything.
func (r *streamReplacer) process(end bool) error {
	for {
		at, which := r.pats.index(r.pending)
		if at < 0 {
			break
		}
		if r.onMatch != nil {
			if err := r.onMatch(which); err != nil {
				return err
			}
		}
		r.out = append(r.out, r.pending[:at]...)
		if r.pats.to != nil {
			r.out = append(r.out, r.pats.to[which]...)
		}
		r.pending = r.pending[at+len(r.pats.from[which]):]
	}
	keep := 0
	if !end {
		keep = r.pats.partialSuffix(r.pending)
	}
	r.out = append(r.out, r.pending[:len(r.pending)-keep]...)
	r.pending = append(r.pending[:0:0], r.pending[len(r.pending)-keep:]...)
	return nil
}
