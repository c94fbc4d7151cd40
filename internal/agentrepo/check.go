package agentrepo

import (
	"bytes"
	"fmt"
	"strings"
)

// CheckPath refuses a path git must never write into a checkout: any
// component that a filesystem could take for .git (any case, trailing dots
// or spaces, the 8.3 short name git~1, invisible characters HFS+ ignores),
// "." and "..", and empty components. It is applied to every tree entry the
// agent hands back and to every path land would write, on top of git's own
// object checks.
func CheckPath(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("invalid path %q", p)
	}
	for _, c := range strings.Split(p, "/") {
		if err := CheckName(c); err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
	}
	return nil
}

// CheckName refuses one tree entry name (see CheckPath).
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid name %q", name)
	}
	n := strings.ToLower(stripIgnorable(name))
	n = strings.TrimRight(n, " .")
	if n == ".git" || n == "git~1" || strings.HasPrefix(n, ".git:") {
		return fmt.Errorf("name %q would be taken for .git", name)
	}
	return nil
}

// stripIgnorable removes the code points HFS+ ignores in file names, so
// ".g\u200cit" compares as ".git".
func stripIgnorable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
			return -1
		}
		return r
	}, s)
}

// IsGitmodules reports whether a tree entry name is, or could be taken
// for, .gitmodules.
func IsGitmodules(name string) bool {
	n := strings.ToLower(strings.TrimRight(stripIgnorable(name), " .\r\n\t"))
	return n == ".gitmodules" || n == "gitmod~1"
}

// CheckGitmodules refuses a .gitmodules whose content could make a later
// checkout write somewhere unexpected: carriage returns (a trailing CR in a
// path is read differently by different git versions), and paths or URLs
// that start with '-' and would be read as options.
func CheckGitmodules(content []byte) error {
	if bytes.IndexByte(content, '\r') >= 0 {
		return fmt.Errorf(".gitmodules contains a carriage return")
	}
	for _, line := range strings.Split(string(content), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if (k == "path" || k == "url") && strings.HasPrefix(v, "-") {
			return fmt.Errorf(".gitmodules %s %q starts with '-'", k, v)
		}
		if k == "path" && (CheckPath(v) != nil || strings.HasPrefix(v, "/")) {
			return fmt.Errorf(".gitmodules path %q is not a safe path", v)
		}
	}
	return nil
}
