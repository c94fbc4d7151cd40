// Package atomicfile writes a file so that a reader sees the old one or
// the new one, never a part.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path through a temporary file in the
// same directory, so a reader sees the old file or the new one (and a
// stopped container with path bind-mounted sees the new one when it
// starts again).
func Write(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
