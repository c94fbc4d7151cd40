package rescue

import (
	"errors"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// lowSpace is the free space under which a failed write is put down to a
// full filesystem.
const lowSpace = 1 << 20

// NoSpace turns err, a failure to write a snapshot of branch (or what it
// needs first), into a clear message when one of dirs (the repository's
// git directory, the sandbox's state directory) is on a filesystem with no
// room left; other errors come back as they are. Git writes objects and
// refs through temporary files and renames, so a failed snapshot leaves
// the earlier ones and every ref as they were.
func NoSpace(err error, branch string, dirs ...string) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*BudgetSpent](err); ok {
		return err
	}
	for _, d := range dirs {
		var st syscall.Statfs_t
		if syscall.Statfs(d, &st) != nil {
			continue
		}
		if free := st.Bavail * uint64(st.Bsize); free < lowSpace || errors.Is(err, syscall.ENOSPC) {
			name := termsafe.String(branch)
			return usererr.Wrap(err, "cannot write the snapshot of %s: no space left on the filesystem of %s (%v)", name, d, err).
				Hint("the earlier snapshots and every ref are as they were; make room there, then take it again: git sandbox rescue snapshot %s", name)
		}
	}
	return err
}
