package land

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// maxMarkerScan bounds how much of a file StillConflicted reads looking
// for markers.
const maxMarkerScan = 16 << 20

// StillConflicted lists which of paths, left conflicted by an update,
// still hold conflict markers in the worktree at worktree now. The files
// are an agent's: each is opened beneath the worktree, not through a
// link, only if it is a regular file, and at most maxMarkerScan bytes of
// it are read.
func StillConflicted(worktree string, paths []string) []string {
	root, err := os.OpenRoot(worktree)
	if err != nil {
		return nil
	}
	defer root.Close()
	var left []string
	for _, p := range paths {
		// os.Root follows a link that stays beneath it, O_NOFOLLOW or not.
		if fi, err := root.Lstat(filepath.FromSlash(p)); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		f, err := root.OpenFile(filepath.FromSlash(p), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		if err == nil && fi.Mode().IsRegular() {
			b, err := io.ReadAll(io.LimitReader(f, maxMarkerScan))
			if err == nil && HasMarkers(b) {
				left = append(left, p)
			}
		}
		f.Close()
	}
	return left
}
