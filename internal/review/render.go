package review

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"unicode"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// ANSI styles used on a terminal.
const (
	reset     = "\x1b[0m"
	bold      = "\x1b[1m"
	red       = "\x1b[31m"
	green     = "\x1b[32m"
	cyan      = "\x1b[36m"
	yellow    = "\x1b[33m"
	redHi     = "\x1b[7;31m"
	greenHi   = "\x1b[7;32m"
	maxPaired = 64 // longest block of changed lines given word highlights
)

// Render writes a unified diff, escaping every line so nothing in it acts
// on the terminal. With color, removed and added lines are red and green,
// and the words that differ inside a changed line are highlighted.
func Render(w io.Writer, patch []byte, color bool) error {
	bw := bufio.NewWriter(w)
	lines := strings.SplitAfter(string(patch), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i := 0; i < len(lines); {
		line := strings.TrimSuffix(lines[i], "\n")
		if !color {
			bw.WriteString(termsafe.Text(line))
			bw.WriteByte('\n')
			i++
			continue
		}
		if strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---") {
			// A block of removals, possibly followed by additions.
			j := i
			for j < len(lines) && isChange(lines[j], '-') {
				j++
			}
			k := j
			for k < len(lines) && isChange(lines[k], '+') {
				k++
			}
			writeBlock(bw, trimAll(lines[i:j]), trimAll(lines[j:k]))
			i = k
			continue
		}
		switch {
		case strings.HasPrefix(line, "diff --git"), strings.HasPrefix(line, "index "),
			strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "),
			strings.HasPrefix(line, "new file mode"), strings.HasPrefix(line, "deleted file mode"),
			strings.HasPrefix(line, "old mode"), strings.HasPrefix(line, "new mode"),
			strings.HasPrefix(line, "similarity"), strings.HasPrefix(line, "rename "):
			bw.WriteString(bold + termsafe.Text(line) + reset)
		case strings.HasPrefix(line, "@@"):
			bw.WriteString(cyan + termsafe.Text(line) + reset)
		case strings.HasPrefix(line, "+"):
			bw.WriteString(green + termsafe.Text(line) + reset)
		case strings.HasPrefix(line, "Binary files"):
			bw.WriteString(yellow + termsafe.Text(line) + reset)
		default:
			bw.WriteString(termsafe.Text(line))
		}
		bw.WriteByte('\n')
		i++
	}
	return bw.Flush()
}

func isChange(line string, sign byte) bool {
	return len(line) > 0 && line[0] == sign && !strings.HasPrefix(line, string([]byte{sign, sign, sign, ' '}))
}

func trimAll(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = strings.TrimSuffix(l, "\n")
	}
	return out
}

// writeBlock writes removed and added lines; when they pair up one to one
// the differing words inside each pair are highlighted.
func writeBlock(w *bufio.Writer, removed, added []string) {
	if len(removed) == len(added) && len(removed) <= maxPaired {
		var plus bytes.Buffer
		for i := range removed {
			minus, pl := wordDiff(removed[i][1:], added[i][1:])
			w.WriteString(red + "-" + minus + reset + "\n")
			plus.WriteString(green + "+" + pl + reset + "\n")
		}
		w.Write(plus.Bytes())
		return
	}
	for _, l := range removed {
		w.WriteString(red + termsafe.Text(l) + reset + "\n")
	}
	for _, l := range added {
		w.WriteString(green + termsafe.Text(l) + reset + "\n")
	}
}

// wordDiff returns the old and new line with the words that differ
// highlighted (inside the line's base colour).
func wordDiff(a, b string) (string, string) {
	ta, tb := tokens(a), tokens(b)
	index := map[string]rune{}
	var table []string
	encode := func(ts []string) []rune {
		rs := make([]rune, len(ts))
		for i, t := range ts {
			r, ok := index[t]
			if !ok {
				r = rune(len(table) + 1)
				index[t] = r
				table = append(table, t)
			}
			rs[i] = r
		}
		return rs
	}
	ra, rb := encode(ta), encode(tb)
	dmp := diffmatchpatch.New()
	diffs := dmp.DiffMainRunes(ra, rb, false)
	var oldB, newB strings.Builder
	for _, d := range diffs {
		var text strings.Builder
		for _, r := range d.Text {
			text.WriteString(table[r-1])
		}
		s := termsafe.Text(text.String())
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			oldB.WriteString(s)
			newB.WriteString(s)
		case diffmatchpatch.DiffDelete:
			oldB.WriteString(redHi + s + reset + red)
		case diffmatchpatch.DiffInsert:
			newB.WriteString(greenHi + s + reset + green)
		}
	}
	return oldB.String(), newB.String()
}

// tokens splits a line into words, runs of spaces, and single other
// characters.
func tokens(s string) []string {
	var out []string
	start := -1
	kind := 0
	classify := func(r rune) int {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			return 1
		case unicode.IsSpace(r):
			return 2
		}
		return 3
	}
	for i, r := range s {
		k := classify(r)
		if start >= 0 && (k != kind || k == 3) {
			out = append(out, s[start:i])
			start = -1
		}
		if start < 0 {
			start, kind = i, k
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// RenderWords writes git's porcelain word diff (--word-diff=porcelain) in
// colour: removed words red, added words green, on one line as git shows
// them, everything escaped.
func RenderWords(w io.Writer, patch []byte) error {
	bw := bufio.NewWriter(w)
	inHunk := false
	lineOpen := false
	for _, line := range strings.Split(strings.TrimSuffix(string(patch), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "diff --git"):
			inHunk = false
			bw.WriteString(bold + termsafe.Text(line) + reset + "\n")
			continue
		case strings.HasPrefix(line, "@@"):
			inHunk = true
			bw.WriteString(cyan + termsafe.Text(line) + reset + "\n")
			continue
		case !inHunk:
			bw.WriteString(bold + termsafe.Text(line) + reset + "\n")
			continue
		}
		if line == "" {
			continue
		}
		text := termsafe.Text(line[1:])
		switch line[0] {
		case '~':
			bw.WriteByte('\n')
			lineOpen = false
			continue
		case '-':
			bw.WriteString(red + "[-" + text + "-]" + reset)
		case '+':
			bw.WriteString(green + "{+" + text + "+}" + reset)
		case '\\':
			if lineOpen {
				bw.WriteByte('\n')
			}
			bw.WriteString(termsafe.Text(line))
		default:
			bw.WriteString(text)
		}
		lineOpen = true
	}
	if lineOpen {
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
