package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Entry is one worktree of git worktree list --porcelain.
type Entry struct {
	Path     string
	Head     string
	Branch   string // full ref name, "" when detached
	Bare     bool
	Detached bool
	Locked   bool
	Prunable bool
}

// List parses git worktree list --porcelain -z.
func List(ctx context.Context, g *gitcmd.Runner) ([]Entry, error) {
	out, err := g.Run(ctx, nil, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	return parseList(out), nil
}

func parseList(out []byte) []Entry {
	var list []Entry
	var cur *Entry
	for _, field := range strings.Split(string(out), "\x00") {
		if field == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(field, " ")
		if key == "worktree" {
			list = append(list, Entry{Path: val})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.Head = val
		case "branch":
			cur.Branch = val
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "locked":
			cur.Locked = true
		case "prunable":
			cur.Prunable = true
		}
	}
	return list
}

// CheckedOutAt returns the worktree that has the branch (full ref name)
// checked out, if any.
func CheckedOutAt(ctx context.Context, g *gitcmd.Runner, ref string) (*Entry, error) {
	list, err := List(ctx, g)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Branch == ref {
			return &list[i], nil
		}
	}
	return nil, nil
}

// AddOptions describe a new linked worktree.
type AddOptions struct {
	Path   string // where the worktree goes; its parent is created
	Branch string // the new branch
	Start  string // the commit it starts at
	Reason string // lock reason shown by git worktree list
	// Lock, when set, is a file locked around git worktree add: it reads
	// the administrative directories of the other worktrees, and one that
	// another process is making at the same moment (no commondir yet)
	// makes it fail.
	Lock string
}

// Add creates a new branch at Start checked out in a new linked worktree,
// locked so that git worktree prune and a plain git worktree remove leave it
// alone. Hooks do not run (the gateway turns them off).
func Add(ctx context.Context, g *gitcmd.Runner, o AddOptions) error {
	if err := os.MkdirAll(filepath.Dir(o.Path), 0o700); err != nil {
		return fmt.Errorf("create worktree parent: %w", err)
	}
	if o.Lock != "" {
		unlock, err := lockFile(o.Lock)
		if err != nil {
			return err
		}
		defer unlock()
	}
	args := []string{"worktree", "add", "--quiet", "--no-track", "--lock"}
	if o.Reason != "" {
		args = append(args, "--reason", o.Reason)
	}
	args = append(args, "-b", o.Branch, o.Path, o.Start)
	if _, err := g.Run(ctx, nil, args...); err != nil {
		return fmt.Errorf("create worktree: %w", err)
	}
	return nil
}

// AdminDir returns the git directory git keeps for the linked worktree at
// path (.git/worktrees/<name>), read from the worktree's own gitfile. That
// gitfile is written by git on the host and shadowed inside the container,
// so the agent cannot have changed it; it is still checked to point into
// the repository.
func AdminDir(commonDir, path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return "", fmt.Errorf("read worktree gitfile: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s/.git is not a gitfile", path)
	}
	target = filepath.Clean(strings.TrimSpace(target))
	if !Within(target, filepath.Join(commonDir, "worktrees")) {
		return "", fmt.Errorf("%s/.git points outside the repository (%s)", path, target)
	}
	return target, nil
}

// Remove deletes a sandbox's linked worktree and git's record of it. The
// worktree is locked, hence the double --force; its files are deleted
// without following symlinks. When the directory is already gone only git's
// record of it is removed: git worktree prune is never run, because it would
// also prune the user's own worktrees that are merely unmounted.
func Remove(ctx context.Context, commonDir string, g *gitcmd.Runner, path string) error {
	if _, err := os.Lstat(path); err == nil {
		if _, err := g.Run(ctx, nil, "worktree", "remove", "--force", "--force", path); err == nil {
			return nil
		}
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove worktree: %w", err)
		}
	}
	return removeRecord(commonDir, path)
}

// removeRecord removes git's record of the linked worktree at path (its
// directory under the common dir's worktrees/), if there is one.
func removeRecord(commonDir, path string) error {
	admin, err := adminDirFor(commonDir, path)
	if err != nil || admin == "" {
		return err
	}
	if err := os.RemoveAll(admin); err != nil {
		return fmt.Errorf("remove worktree record: %w", err)
	}
	return nil
}

// MoveAside moves a linked worktree into the directory trash (created if
// missing, and on the same file system: else the worktree is deleted here
// and now) under a fresh name, and removes git's record of it. It returns
// at once however many files the worktree holds; deleting them is left to
// whoever empties trash.
func MoveAside(commonDir, path, trash string) error {
	if err := MoveIntoTrash(path, trash); err != nil {
		return fmt.Errorf("remove worktree: %w", err)
	}
	return removeRecord(commonDir, path)
}

// moveInto renames path into dir under a fresh name.
func moveInto(path, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	return os.Rename(path, filepath.Join(tmp, filepath.Base(path)))
}

// MoveIntoTrash renames a directory into trash under a fresh name, falling
// back to deleting it when it cannot be renamed there.
func MoveIntoTrash(path, trash string) error {
	if _, err := os.Lstat(path); err != nil {
		return nil
	}
	if err := moveInto(path, trash); err != nil {
		return os.RemoveAll(path)
	}
	return nil
}

// adminDirFor finds the .git/worktrees/<name> directory whose gitdir file
// names path, or "" when git has no record of it.
func adminDirFor(commonDir, path string) (string, error) {
	base := filepath.Join(commonDir, "worktrees")
	entries, err := os.ReadDir(base)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	want := filepath.Join(path, ".git")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(base, e.Name(), "gitdir"))
		if err != nil {
			continue
		}
		if filepath.Clean(strings.TrimSpace(string(b))) == want {
			return filepath.Join(base, e.Name()), nil
		}
	}
	return "", nil
}

// StripGitlinks removes submodule entries (gitlinks) from a worktree's
// index. A sandbox worktree is the agent's: a gitlink in its host-side index
// makes the user's own `git status` there run git inside that directory,
// where the agent may have put a .git whose config runs commands. Without
// the entry, git only lists the directory. g must be bound to the
// worktree's git directory; nothing of the worktree is read.
func StripGitlinks(ctx context.Context, g *gitcmd.Runner) error {
	out, err := g.Run(ctx, nil, "ls-files", "--stage", "-z")
	if err != nil {
		return fmt.Errorf("strip gitlinks: %w", err)
	}
	var paths strings.Builder
	for _, rec := range strings.Split(string(out), "\x00") {
		if strings.HasPrefix(rec, "160000 ") {
			if _, p, ok := strings.Cut(rec, "\t"); ok {
				paths.WriteString(p)
				paths.WriteByte(0)
			}
		}
	}
	if paths.Len() == 0 {
		return nil
	}
	if _, err := g.Run(ctx, strings.NewReader(paths.String()), "update-index", "--force-remove", "-z", "--stdin"); err != nil {
		return fmt.Errorf("strip gitlinks: %w", err)
	}
	return nil
}

// lockFile takes an exclusive flock on path (created if missing), gone
// with the process however it ends.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
