package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
)

// Nested is a git repository inside a sandbox worktree that git would
// find from a directory of it: a .git entry (directory, gitfile or
// symlink) below the worktree's top, or a directory laid out as a bare
// repository (HEAD, objects/ and refs/). A git run in such a directory
// reads that repository's configuration, which the agent wrote.
type Nested struct {
	// Path is the entry git recognises, relative to the worktree and
	// slash-separated: "src/.git", or "fixtures/repo/HEAD" for a bare
	// layout (whose HEAD is what makes git take it for a repository).
	Path string `json:"path"`
	// Bare marks a bare layout.
	Bare bool `json:"bare,omitempty"`
	// Kept is where the entry is kept while quarantined.
	Kept string `json:"kept,omitempty"`
	// Gitlink is the commit snapshots recorded for the repository (a .git
	// entry with a commit checked out), "" when none.
	Gitlink string `json:"gitlink,omitempty"`
}

// Repo is the nested repository's directory, relative to the worktree.
func (n Nested) Repo() string { return path.Dir(n.Path) }

// FindNested walks a worktree (never following a symlink, never entering a
// .git directory) and returns every nested repository in it. The
// worktree's own .git (git's gitfile of the linked worktree) is not one.
func FindNested(root string) ([]Nested, error) {
	var out []Nested
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			// An unreadable directory holds nothing git could read either.
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".git":
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.Name() == ".git":
			out = append(out, Nested{Path: rel})
			if d.IsDir() {
				return filepath.SkipDir
			}
		case d.Name() == "HEAD" && d.Type().IsRegular() && isBareLayout(filepath.Dir(p)):
			out = append(out, Nested{Path: rel, Bare: true})
		}
		return nil
	})
	return out, err
}

// isBareLayout reports whether dir has the objects/ and refs/ directories
// that, with a HEAD file, make git take it for a repository.
func isBareLayout(dir string) bool {
	for _, sub := range []string{"objects", "refs"} {
		fi, err := os.Lstat(filepath.Join(dir, sub))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// QuarantineRecord is the file that lists what a quarantine directory
// keeps: dir + ".json".
func QuarantineRecord(dir string) string { return dir + ".json" }

// Quarantined returns the nested repositories quarantined in dir (none
// when nothing is).
func Quarantined(dir string) ([]Nested, error) {
	b, err := os.ReadFile(QuarantineRecord(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the quarantine record: %w", err)
	}
	var list []Nested
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("read the quarantine record %s: %w", QuarantineRecord(dir), err)
	}
	return list, nil
}

func writeQuarantined(dir string, list []Nested) error {
	if len(list) == 0 {
		err := os.Remove(QuarantineRecord(dir))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	tmp := QuarantineRecord(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, QuarantineRecord(dir))
}

// ErrCrossDevice is returned (joined) by Quarantine for entries it could
// not move because the worktree is on another file system than dir.
var ErrCrossDevice = errors.New("the worktree is on another file system than the sandbox's state")

// A Place is where a worktree's files are, for the quarantine: this
// machine's directory (LocalPlace), or an engine's volume read and written
// by a helper there. The quarantine's rules and its record (on this
// machine, beside the sandbox's state) are the same for both.
type Place interface {
	// FindNested lists the worktree's nested repositories, as FindNested
	// does.
	FindNested(ctx context.Context) ([]Nested, error)
	// KeptAt is where the quarantine's n-th entry is kept.
	KeptAt(n int) string
	// Move moves each entry out of the worktree to its Kept (back, from
	// Kept to its Path). It returns one error per entry, nil for one
	// moved: fs.ErrNotExist when there was nothing to move, fs.ErrExist
	// when the place it goes to is taken (nothing is overwritten).
	Move(ctx context.Context, list []Nested, back bool) []error
}

// LocalPlace is a worktree on this machine at Root, whose quarantined
// entries are kept in Dir.
type LocalPlace struct{ Root, Dir string }

// FindNested walks the worktree.
func (l LocalPlace) FindNested(context.Context) ([]Nested, error) { return FindNested(l.Root) }

// KeptAt is a file of Dir.
func (l LocalPlace) KeptAt(n int) string { return filepath.Join(l.Dir, strconv.Itoa(n)) }

// Move renames each entry (a rename across file systems is
// ErrCrossDevice).
func (l LocalPlace) Move(_ context.Context, list []Nested, back bool) []error {
	if !back {
		if err := os.MkdirAll(l.Dir, 0o700); err != nil {
			return repeat(err, len(list))
		}
	}
	errs := make([]error, len(list))
	for i, n := range list {
		from, to := filepath.Join(l.Root, filepath.FromSlash(n.Path)), n.Kept
		if back {
			from, to = to, from
		}
		if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
			errs[i] = fs.ErrNotExist
			continue
		}
		if _, err := os.Lstat(to); err == nil {
			errs[i] = fs.ErrExist
			continue
		}
		if err := os.Rename(from, to); errors.Is(err, syscall.EXDEV) {
			errs[i] = ErrCrossDevice
		} else {
			errs[i] = err
		}
	}
	return errs
}

// repeat is n times err.
func repeat(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Quarantine moves every nested repository's entry out of the worktree
// at root into dir (a directory of the sandbox's state, outside the
// worktree): QuarantineIn for a worktree on this machine.
func Quarantine(root, dir string, gitlink func(repo string) string) ([]Nested, error) {
	return QuarantineIn(context.Background(), LocalPlace{Root: root, Dir: dir}, dir, gitlink)
}

// QuarantineIn moves every nested repository's entry out of the worktree
// of p to where p keeps them, so no git run in the worktree finds it, and
// records each in dir's record (QuarantineRecord, on this machine) before
// moving it: an interrupted quarantine loses nothing. gitlink returns the
// commit snapshots recorded for a repository directory. It returns every
// entry quarantined, the earlier ones included.
func QuarantineIn(ctx context.Context, p Place, dir string, gitlink func(repo string) string) ([]Nested, error) {
	found, err := p.FindNested(ctx)
	if err != nil {
		return nil, fmt.Errorf("find nested repositories: %w", err)
	}
	list, err := Quarantined(dir)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return list, nil
	}
	start := len(list)
	for _, n := range found {
		n.Kept = p.KeptAt(len(list))
		if !n.Bare && gitlink != nil {
			n.Gitlink = gitlink(n.Repo())
		}
		list = append(list, n)
	}
	if err := writeQuarantined(dir, list); err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	var errs []error
	kept := list[:start]
	for i, err := range p.Move(ctx, list[start:], false) {
		n := list[start+i]
		switch {
		case err == nil:
			kept = append(kept, n)
		case errors.Is(err, ErrCrossDevice):
			errs = append(errs, fmt.Errorf("%s: %w", n.Path, ErrCrossDevice))
		case errors.Is(err, fs.ErrExist):
			errs = append(errs, fmt.Errorf("quarantine %s: %s is taken", n.Path, n.Kept))
		case errors.Is(err, fs.ErrNotExist):
			// Gone since it was found: nothing to keep.
		default:
			errs = append(errs, fmt.Errorf("quarantine %s: %w", n.Path, err))
		}
	}
	if len(kept) != len(list) {
		if err := writeQuarantined(dir, kept); err != nil {
			errs = append(errs, err)
		}
	}
	return kept, errors.Join(errs...)
}

// RestoreQuarantined moves every quarantined entry back into the worktree
// at root: RestoreQuarantinedIn for a worktree on this machine.
func RestoreQuarantined(root, dir string) ([]Nested, error) {
	return RestoreQuarantinedIn(context.Background(), LocalPlace{Root: root, Dir: dir}, dir)
}

// RestoreQuarantinedIn moves every entry dir's record lists back into the
// worktree of p and removes the record. An entry whose place is taken is
// an error naming both (nothing is overwritten, and it stays recorded).
// It returns the entries restored.
func RestoreQuarantinedIn(ctx context.Context, p Place, dir string) ([]Nested, error) {
	list, err := Quarantined(dir)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	var restored, left []Nested
	var errs []error
	for i, err := range p.Move(ctx, list, true) {
		n := list[i]
		switch {
		case err == nil:
			restored = append(restored, n)
		case errors.Is(err, fs.ErrNotExist):
			// Recorded, never moved (an interrupted quarantine).
		case errors.Is(err, fs.ErrExist):
			errs = append(errs, fmt.Errorf("%s exists, and the nested repository's %s kept at %s would replace it", n.Path, path.Base(n.Path), n.Kept))
			left = append(left, n)
		default:
			errs = append(errs, fmt.Errorf("restore %s: %w", n.Path, err))
			left = append(left, n)
		}
	}
	if err := writeQuarantined(dir, left); err != nil {
		errs = append(errs, err)
	}
	return restored, errors.Join(errs...)
}
