package agentrepo

import (
	"fmt"
	"os"
	"syscall"

	"github.com/go-git/go-billy/v5"
)

// regularFS is the agent's git directory as go-git sees it: a file is
// opened only if it is a regular file, and never in a way that can block.
// The agent can make any object or pack file a FIFO, whose open would hang
// the host process (deaf to signals while in it) until someone writes.
type regularFS struct{ billy.Filesystem }

func (r regularFS) Open(name string) (billy.File, error) {
	return r.OpenFile(name, os.O_RDONLY, 0)
}

func (r regularFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC) != 0 {
		return nil, fmt.Errorf("%s: the agent's repository is opened for reading only", name)
	}
	fi, err := r.Filesystem.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(name, fi.Mode())
	}
	f, err := r.Filesystem.OpenFile(name, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	st, ok := f.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		f.Close()
		return nil, fmt.Errorf("%s: cannot check the file type", name)
	}
	if fi, err = st.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(name, fi.Mode())
		}
		return nil, err
	}
	return f, nil
}

func (r regularFS) Chroot(path string) (billy.Filesystem, error) {
	fs, err := r.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return regularFS{fs}, nil
}
