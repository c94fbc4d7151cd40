package agentrepo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// maxIndexSize bounds how much of the agent's index is read.
const maxIndexSize = 256 << 20

// IndexEntry is one stage-0 entry of the agent's index.
type IndexEntry struct {
	Path string
	// Mode is git's octal mode ("100644", "160000", …) and ID the object.
	Mode string
	ID   string
}

// Index returns the entries of the agent's index (stage 0 only). Like
// Head, it reads one file confined beneath gitDir and runs nothing; the
// entries are the agent's word, so every path is checked (no .git
// component, no "..", nothing absolute) and entries that fail are left out.
// A missing index is no entries.
func Index(gitDir string) ([]IndexEntry, error) {
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return nil, fmt.Errorf("open agent repository: %w", err)
	}
	defer root.Close()
	f, err := root.Open("index")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read agent index: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxIndexSize {
		return nil, fmt.Errorf("read agent index: not a regular file of at most %d bytes", maxIndexSize)
	}
	var idx index.Index
	if err := index.NewDecoder(io.LimitReader(f, maxIndexSize)).Decode(&idx); err != nil {
		return nil, fmt.Errorf("read agent index: %w", err)
	}
	var out []IndexEntry
	for _, e := range idx.Entries {
		// go-git names stage 1 "Merged"; a merged entry is stage 0.
		if e.Stage != 0 || CheckPath(e.Name) != nil {
			continue
		}
		switch e.Mode {
		case filemode.Regular, filemode.Executable, filemode.Symlink, filemode.Submodule:
		default:
			continue
		}
		out = append(out, IndexEntry{Path: e.Name, Mode: fmt.Sprintf("%06o", uint32(e.Mode)), ID: e.Hash.String()})
	}
	return out, nil
}

// IndexStamp returns a stamp of the agent's index file that changes
// whenever the file does: its device, inode, size, and modification and
// change times, read from the opened file (confined beneath gitDir, as
// Index reads it). The change time cannot be set by the agent, so a
// rewritten index always gets a new stamp. A missing index is "none".
func IndexStamp(gitDir string) (string, error) {
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return "", fmt.Errorf("open agent repository: %w", err)
	}
	defer root.Close()
	f, err := root.Open("index")
	if errors.Is(err, os.ErrNotExist) {
		return "none", nil
	}
	if err != nil {
		return "", fmt.Errorf("read agent index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read agent index: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("read agent index: no stat data")
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}
