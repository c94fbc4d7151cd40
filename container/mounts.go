package container

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// RefuseUnsafeHostPath resolves path (symlinks included) and refuses it as a
// bind-mount source when it is the filesystem root, the user's home, an
// ancestor of the home, or a Docker daemon socket. No flag or config
// overrides this. It returns the resolved path, which is what must be
// mounted: resolving here and mounting the original would let a symlink be
// swapped in between.
func RefuseUnsafeHostPath(kind, path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", usererr.New("%s path %q is not absolute", kind, path)
	}
	resolved, err := resolve(path)
	if err != nil {
		return "", usererr.Wrap(err, "%s path %s cannot be resolved: %v", kind, path, err)
	}
	if resolved == "/" {
		return "", refusal(kind, path, resolved, "the filesystem root")
	}
	for _, home := range homes() {
		if resolved == home {
			return "", refusal(kind, path, resolved, "your home directory")
		}
		if worktree.Within(home, resolved) {
			return "", refusal(kind, path, resolved, "an ancestor of your home directory")
		}
	}
	if strings.HasSuffix(resolved, "/docker.sock") || strings.HasSuffix(resolved, ".sock") && isSocket(resolved) {
		return "", refusal(kind, path, resolved, "a daemon socket")
	}
	return resolved, nil
}

// resolve evaluates symlinks in path. A path that does not exist yet (a
// plan printed before anything is created) is resolved through its nearest
// existing ancestor.
func resolve(path string) (string, error) {
	path = filepath.Clean(path)
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Clean(filepath.Join(r, rest)), nil
		}
		if !os.IsNotExist(err) || filepath.Dir(p) == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

func refusal(kind, path, resolved, what string) error {
	shown := path
	if resolved != path {
		shown = path + " (resolves to " + resolved + ")"
	}
	return usererr.New("refusing to mount %s %s: it is %s", kind, shown, what).
		Hint("git sandbox never mounts /, your home directory, an ancestor of it, or a daemon socket; no option changes this")
}

func isSocket(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// homes returns the user's home directory as given and as resolved.
func homes() []string {
	var out []string
	for _, h := range []string{os.Getenv("HOME"), userHome()} {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		h = filepath.Clean(h)
		out = append(out, h)
		if r, err := filepath.EvalSymlinks(h); err == nil && r != h {
			out = append(out, r)
		}
	}
	return out
}

func userHome() string {
	h, _ := os.UserHomeDir()
	return h
}
