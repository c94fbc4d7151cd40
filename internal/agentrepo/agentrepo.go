// Package agentrepo owns the agent's private repository: the git directory
// each sandbox's agent commits into, mounted read-write into its container
// and never opened by a host git process.
//
// It creates that repository (alternates to the stores of what the agent
// may read, internal/visible; the user's refs copied; an index matching the
// worktree), reads its HEAD with
// plain file reads confined beneath it, and brings the agent's commits back
// into the user's repository as checked objects only (see Sync).
package agentrepo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// InitOptions describe a new private repository.
type InitOptions struct {
	// GitDir is where the private repository is created.
	GitDir string
	// HostCommonDir is the user's repository: its hooks become the
	// private repository's hooks path (mounted read-only at the same
	// path). Its object store is not borrowed: see Alternates.
	HostCommonDir string
	// Alternates are the object directories the private repository
	// borrows from, each mounted read-only at the same path: the
	// repository's visible store and the sandbox's given store
	// (internal/visible). Required.
	Alternates []string
	// Refs are the user's branches and tags as for-each-ref prints them
	// ("<id> <refname>" lines), every object they reach in Alternates;
	// they become the private repository's packed refs.
	Refs []byte
	// HooksDir is the user's hooks directory (mounted read-only at the same
	// path); "" means HostCommonDir/hooks.
	HooksDir string
	// Branch is the sandbox branch checked out in the worktree.
	Branch string
	// WorktreeIndex is the host's index of the linked worktree; copying it
	// makes git status in the container clean at start.
	WorktreeIndex string
	// UserName and UserEmail become the agent's commit identity.
	UserName, UserEmail string
}

// Init creates the private repository. It copies the user's branches and
// tags (as packed refs) so the agent sees the same history, and nothing of
// the user's configuration except an identity.
func Init(o InitOptions) error {
	if _, err := os.Lstat(o.GitDir); err == nil {
		return fmt.Errorf("create agent repository: %s already exists", o.GitDir)
	}
	if len(o.Alternates) == 0 {
		return fmt.Errorf("create agent repository: no object store to borrow from")
	}
	var alternates strings.Builder
	for _, a := range o.Alternates {
		if !filepath.IsAbs(a) || strings.ContainsAny(a, "\n\r") {
			return fmt.Errorf("create agent repository: alternate %q is not an absolute path", a)
		}
		alternates.WriteString(a + "\n")
	}
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(o.GitDir, d), 0o755); err != nil {
			return fmt.Errorf("create agent repository: %w", err)
		}
	}
	files := map[string][]byte{
		"HEAD":                    []byte("ref: refs/heads/" + o.Branch + "\n"),
		"config":                  []byte(privateConfig(o)),
		"objects/info/alternates": []byte(alternates.String()),
		"packed-refs":             append([]byte("# pack-refs with: sorted \n"), o.Refs...),
		"description":             []byte("git sandbox: the agent's repository for " + o.Branch + "\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(o.GitDir, name), b, 0o644); err != nil {
			return fmt.Errorf("create agent repository: %w", err)
		}
	}
	if o.WorktreeIndex != "" {
		if err := copyFile(o.WorktreeIndex, filepath.Join(o.GitDir, "index")); err != nil {
			return fmt.Errorf("create agent repository: copy index: %w", err)
		}
	}
	return nil
}

func privateConfig(o InitOptions) string {
	var b strings.Builder
	b.WriteString("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n")
	hooks := o.HooksDir
	if hooks == "" {
		hooks = filepath.Join(o.HostCommonDir, "hooks")
	}
	fmt.Fprintf(&b, "\thooksPath = %s\n", quoteConfig(hooks))
	if o.UserName != "" || o.UserEmail != "" {
		b.WriteString("[user]\n")
		if o.UserName != "" {
			fmt.Fprintf(&b, "\tname = %s\n", quoteConfig(o.UserName))
		}
		if o.UserEmail != "" {
			fmt.Fprintf(&b, "\temail = %s\n", quoteConfig(o.UserEmail))
		}
	}
	return b.String()
}

// CopyConfig is the configuration of an agent repository that lives on a
// remote engine (copy mode): an identity, and no hooks (the user's hooks
// are on this machine).
func CopyConfig(userName, userEmail string) string {
	var b strings.Builder
	b.WriteString("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n")
	fmt.Fprintf(&b, "[user]\n\tname = %s\n\temail = %s\n", quoteConfig(userName), quoteConfig(userEmail))
	return b.String()
}

func quoteConfig(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	s = strings.ReplaceAll(s, "\n", " ")
	return `"` + s + `"`
}

// Gitfile is the content of the gitfile mounted over /workspace/.git.
func Gitfile(gitDir string) []byte { return []byte("gitdir: " + gitDir + "\n") }

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

var (
	hexID = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
)

// ValidRef reports whether name is a ref name the agent may hand back
// (see validRef).
func ValidRef(name string) bool { return validRef(name) }

// ValidID reports whether s is a full object id.
func ValidID(s string) bool { return hexID.MatchString(s) }

// validRef accepts what git accepts as a ref name under refs/ (the agent
// may name its branch "x;touch${IFS}MARK;#": the name is only ever used
// as a path beneath the agent's directory and printed escaped).
func validRef(name string) bool {
	if !strings.HasPrefix(name, "refs/") || strings.Contains(name, "..") || strings.Contains(name, "//") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".lock") || strings.Contains(name, "@{") {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// ErrNoHead is returned when the agent's HEAD names no commit.
var ErrNoHead = errors.New("the agent's repository has no HEAD commit")

// Head returns the commit the agent's HEAD points at, and the ref it goes
// through ("" when detached). It reads files only, confined beneath gitDir
// (a symlink out of it is not followed), and runs nothing: everything in
// that directory is the agent's.
func Head(gitDir string) (commit, ref string, err error) {
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return "", "", fmt.Errorf("open agent repository: %w", err)
	}
	defer root.Close()
	name := "HEAD"
	for depth := 0; depth < 5; depth++ {
		b, err := readSmall(root, name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", ref, fmt.Errorf("read agent %s: %w", name, err)
		}
		if err == nil {
			line := strings.TrimSpace(string(b))
			if target, ok := strings.CutPrefix(line, "ref:"); ok {
				target = strings.TrimSpace(target)
				if !validRef(target) {
					return "", "", fmt.Errorf("agent HEAD names an invalid ref")
				}
				name, ref = target, target
				continue
			}
			if hexID.MatchString(line) {
				return line, ref, nil
			}
			return "", ref, fmt.Errorf("agent %s holds no commit id", name)
		}
		if name == "HEAD" {
			return "", "", ErrNoHead
		}
		id, err := packedRef(root, name)
		if err != nil {
			return "", ref, err
		}
		return id, ref, nil
	}
	return "", ref, fmt.Errorf("agent HEAD: too many symbolic refs")
}

func readSmall(root *os.Root, name string) ([]byte, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// openRegular opens an agent-written file for reading only if it is a
// regular file. A FIFO would block the open (and the process, deaf to
// signals while in it) until someone writes; a device could be anything.
// The open is non-blocking and the type is checked again on the opened
// file, so a swap between the two checks gains nothing.
func openRegular(root *os.Root, name string) (*os.File, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(name, fi.Mode())
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(name, fi.Mode())
		}
		return nil, err
	}
	return f, nil
}

func notRegular(name string, m os.FileMode) error {
	return fmt.Errorf("%s in the agent's repository is not a regular file (%s)", name, fileKind(m))
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

func packedRef(root *os.Root, name string) (string, error) {
	f, err := openRegular(root, "packed-refs")
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNoHead
	}
	if err != nil {
		return "", fmt.Errorf("read agent packed-refs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	suffix := []byte(" " + name)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasSuffix(line, suffix) {
			id := string(line[:len(line)-len(suffix)])
			if hexID.MatchString(id) {
				return id, nil
			}
		}
	}
	return "", ErrNoHead
}
