// Package recovery finds what a git sandbox process killed midway left.
// A start writes the record it plans into a mark in the new sandbox's
// state directory before it makes anything, and holds the mark's lock
// (an flock, gone with the process however it ends) until the sandbox is
// whole; then it removes the mark. A mark whose lock is free is a start
// that was killed: its planned record names everything it may have made
// (worktree, branch, containers, networks), so the next start of that
// branch, or git sandbox doctor, removes it all as rm does. (A land killed
// midway is land's own journal: land.Recover.)
package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// MarkName is the name of the mark in a sandbox's state directory.
const MarkName = "starting"

// Mark is a start under way.
type Mark struct {
	f *os.File
}

// Begin marks a start under way at path with the record it plans, and
// holds the mark's lock until Done or Release.
func Begin(path string, rec *record.Record) (*Mark, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mark the start: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, usererr.New("another start of %s is under way", termsafe.String(rec.Branch)).
				Hint("wait for it: git sandbox ps shows the sandbox once it is made").
				WithCode(usererr.ExitRefused)
		}
		return nil, fmt.Errorf("mark the start: %w", err)
	}
	if err := writeAll(f, b); err != nil {
		f.Close()
		return nil, fmt.Errorf("mark the start: %w", err)
	}
	return &Mark{f: f}, nil
}

func writeAll(f *os.File, b []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

// Update writes the record the start now plans into the mark (its
// volumes came from an engine's warm pool, under other names).
func (m *Mark) Update(rec *record.Record) error {
	b, err := json.Marshal(rec)
	if err == nil {
		err = writeAll(m.f, b)
	}
	if err != nil {
		return fmt.Errorf("mark the start: %w", err)
	}
	return nil
}

// Done removes the mark: the sandbox is whole.
func (m *Mark) Done() {
	_ = os.Remove(m.f.Name())
	m.Release()
}

// Release lets the mark's lock go (the start failed and removed what it
// made, the mark with its directory).
func (m *Mark) Release() { m.f.Close() }

// Interrupted returns the record planned by a start that was killed
// before the sandbox at dir was whole, holding the mark's lock until the
// returned function is called; nil when there is no such start (no mark,
// or its start is still under way). A mark that is not whole (the start
// was killed writing it) comes back as an empty record: nothing but the
// directory was made.
func Interrupted(dir string) (*record.Record, func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, MarkName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the mark of a start: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil, nil // under way
	}
	var rec record.Record
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		b := make([]byte, st.Size())
		if _, err := f.ReadAt(b, 0); err == nil {
			_ = json.Unmarshal(b, &rec)
		}
	}
	return &rec, func() { f.Close() }, nil
}

// List returns the state directories under repoDir that hold a mark.
func List(repoDir string) []string {
	marks, _ := filepath.Glob(filepath.Join(repoDir, "*", MarkName))
	dirs := make([]string, len(marks))
	for i, m := range marks {
		dirs[i] = filepath.Dir(m)
	}
	return dirs
}

// Start removes what a start killed before the sandbox at dir was whole
// made: remove gets the record it planned (removing as rm does); a start
// killed writing its mark had made the directory only, which goes into
// trash. It reports whether there was such a start.
func Start(dir, trash string, remove func(*record.Record) error) (bool, error) {
	rec, unlock, err := Interrupted(dir)
	if rec == nil || err != nil {
		return false, err
	}
	defer unlock()
	if rec.Branch == "" {
		return true, worktree.MoveIntoTrash(dir, trash)
	}
	return true, remove(rec)
}

// Unheld reports whether nobody holds the lock at path: for a
// supervisor's lock, that the sandbox runs without its supervisor (it was
// killed).
func Unheld(path string) bool {
	unlock, err := record.TryLock(path)
	if err != nil {
		return false
	}
	unlock()
	return true
}
