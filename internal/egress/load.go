package egress

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// Limits of what LoadConfigFiles takes: the configuration, the roots
// bundle and a few certificates.
const (
	maxLoadFiles     = 16
	maxLoadFileBytes = 8 << 20
)

var loadableName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// LoadableName reports whether a file of the proxy's configuration
// directory can be loaded under its name: a plain name, no path, not
// hidden.
func LoadableName(name string) bool { return loadableName.MatchString(name) }

// LoadConfigFiles is the proxy's configuration reaching an engine that
// cannot see this machine's files (copy mode): it reads a tar of regular
// files with plain names (LoadableName) from r, replaces the regular
// files of configDir with them (mode 0644, the directory 0755: the proxy
// runs as another user than the loader), and opens logDir to every user
// (0777), where the proxy's user appends its decision log. It runs as
// git-sandbox __proxy-load in the proxy's own image; nothing else of the
// tar is written: no link, directory, device, path or oversized file.
func LoadConfigFiles(r io.Reader, configDir, logDir string) error {
	files, err := readConfigTar(r)
	if err != nil {
		return err
	}
	old, err := os.ReadDir(configDir)
	if err != nil {
		return err
	}
	for _, ent := range old {
		if _, keep := files[ent.Name()]; !keep && ent.Type().IsRegular() {
			if err := os.Remove(filepath.Join(configDir, ent.Name())); err != nil {
				return err
			}
		}
	}
	for name, data := range files {
		if err := atomicfile.Write(filepath.Join(configDir, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := openDir(configDir, 0o755, 4|1); err != nil {
		return err
	}
	return openDir(logDir, 0o777, 4|2|1)
}

// openDir gives dir mode. A loader that is not the directory's owner (on
// Kubernetes every Pod runs as one uid, and a claim is opened to it
// through its group) leaves the mode as it is when it may itself do there
// what the proxy, as the same user, needs (access bits want, as
// access(2) takes them).
func openDir(dir string, mode os.FileMode, want uint32) error {
	err := os.Chmod(dir, mode)
	if errors.Is(err, os.ErrPermission) && syscall.Access(dir, want) == nil {
		return nil
	}
	return err
}

// readConfigTar reads the files of a configuration tar, refusing anything
// else.
func readConfigTar(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the proxy's configuration: %w", err)
		}
		switch {
		case h.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("read the proxy's configuration: %q is not a regular file", h.Name)
		case !LoadableName(h.Name):
			return nil, fmt.Errorf("read the proxy's configuration: %q is not a plain file name", h.Name)
		case h.Size > maxLoadFileBytes:
			return nil, fmt.Errorf("read the proxy's configuration: %s is larger than %d bytes", h.Name, maxLoadFileBytes)
		case len(files) >= maxLoadFiles:
			return nil, fmt.Errorf("read the proxy's configuration: more than %d files", maxLoadFiles)
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxLoadFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read the proxy's configuration: %w", err)
		}
		files[h.Name] = data
	}
}
