package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RepoEgress is a [[repository]] table of the user's config: allow and
// deny entries that apply to the sandboxes of one repository only.
type RepoEgress struct {
	// Path is the repository's main worktree.
	Path  string   `toml:"path"`
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
}

// applyRepoEgress adds the entries of the [[repository]] tables naming
// repoDir to the user's allow and deny lists.
func (l *Loaded) applyRepoEgress(repoDir string) {
	if repoDir == "" {
		return
	}
	for _, r := range l.Repositories {
		if samePath(r.Path, repoDir) {
			l.Allow = append(l.Allow, r.Allow...)
			l.Deny = append(l.Deny, r.Deny...)
		}
	}
}

func samePath(a, b string) bool {
	if a == "" {
		return false
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// AppendRepoEgress adds entries to the allow (or, with deny, the deny)
// list of repoDir in the user's config file: a [[repository]] table
// appended at its end, so that what the file says and how it says it stay
// as they are. The file is made if missing.
func AppendRepoEgress(repoDir string, deny bool, entries []string) (string, error) {
	path := UserPath()
	if path == "" {
		return "", fmt.Errorf("no user config: neither GIT_SANDBOX_CONFIG nor a home directory is set")
	}
	key := "allow"
	if deny {
		key = "deny"
	}
	quoted := make([]string, len(entries))
	for i, e := range entries {
		quoted[i] = strconv.Quote(e)
	}
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("read config: %w", err)
	}
	var b strings.Builder
	if len(old) > 0 && old[len(old)-1] != '\n' {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n# added by git sandbox net %s --repo\n[[repository]]\npath = %s\n%s = [%s]\n",
		key, strconv.Quote(filepath.Clean(repoDir)), key, strings.Join(quoted, ", "))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return "", fmt.Errorf("write config: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	return path, nil
}
