// Package proxyimage owns the egress proxy's image: git sandbox's own
// binary, static, and nothing else. The proxy holds every secret's value
// and the sandbox CA's key, so nothing an image names may run beside it:
// not a sandbox's image, not a devcontainer's, not a warm one. This
// package finds the running binary, refuses one that could not run alone
// (dynamically linked), names the image after the binary's content
// (Binary.Tag), and writes the image as an archive an engine loads without
// any registry (WriteArchive). The engine side (is it there, load it) is
// the caller's.
package proxyimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/version"
)

// Repository is the image repository of every proxy image.
const Repository = "git-sandbox-proxy"

// Path is where the binary is in the image; it is the image's only file.
const Path = "/git-sandbox"

// Labels of a proxy image.
const (
	// LabelProxy marks an image as git sandbox's egress proxy image.
	LabelProxy = "git-sandbox.proxy"
	// LabelSHA256 is the sha256 of the binary the image holds.
	LabelSHA256 = "git-sandbox.proxy.sha256"
	// LabelVersion is the version of the binary it holds.
	LabelVersion = "git-sandbox.version"
)

// Binary is the git-sandbox binary the proxy runs: the running one.
type Binary struct {
	// File is what is read for the image: the running program
	// (/proc/self/exe), so a binary replaced on disk since it started
	// does not end up in its image.
	File string `json:"-"`
	// SHA256 is the hex sha256 of the file's content.
	SHA256 string `json:"sha256"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
}

// Tag is the image's reference: the repository, then the version and the
// first 12 hex digits of the binary's sha256, so two binaries never share
// a tag and one binary has the same tag on every engine.
func (b Binary) Tag() string {
	return Repository + ":" + tagVersion(version.String()) + "-" + b.SHA256[:12]
}

var tagUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// tagVersion is v as a tag may hold it: [A-Za-z0-9_.-], not starting with
// '.' or '-', short enough to leave room for the hash.
func tagVersion(v string) string {
	v = tagUnsafe.ReplaceAllString(v, "_")
	if len(v) > 100 {
		v = v[:100]
	}
	if v == "" || v[0] == '.' || v[0] == '-' {
		v = "v" + v
	}
	return v
}

// self is the file of the running program.
func self() (string, error) {
	const proc = "/proc/self/exe"
	if _, err := os.Stat(proc); err == nil {
		return proc, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(exe)
}

// Self returns the running binary, checked to be one that can run alone
// in the proxy's image. cacheFile keeps its hash across runs, keyed by the
// file's identity (device, inode, size, times), so a start does not read
// the whole binary every time; "" keeps nothing.
func Self(cacheFile string) (Binary, error) {
	path, err := self()
	if err != nil {
		return Binary{}, fmt.Errorf("find git-sandbox's own binary for the egress proxy: %w", err)
	}
	return Inspect(path, cacheFile)
}

// cacheEntry is what the cache file holds: the identity of the file the
// hash was taken of, and the result.
type cacheEntry struct {
	Identity string `json:"identity"`
	Binary   Binary `json:"binary"`
}

// Inspect checks the binary at path (CheckStatic) and hashes it, or takes
// both from cacheFile when the file is the one hashed before. A binary
// that fails the check is returned with its refusal (ErrNotStatic in its
// chain), and not kept in the cache.
func Inspect(path, cacheFile string) (Binary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Binary{}, fmt.Errorf("read git-sandbox's own binary for the egress proxy: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Binary{}, fmt.Errorf("read git-sandbox's own binary for the egress proxy: %w", err)
	}
	id := identity(fi)
	if b, ok := readCache(cacheFile, id); ok {
		b.File = path
		return b, nil
	}
	static := CheckStatic(f, path)
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return Binary{}, fmt.Errorf("read git-sandbox's own binary for the egress proxy: %w", err)
	}
	b := Binary{File: path, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}
	if static != nil {
		return b, static
	}
	writeCache(cacheFile, cacheEntry{Identity: id, Binary: b})
	return b, nil
}

// identity names one version of a file: a file written again has another
// change time, whatever its modification time says.
func identity(fi os.FileInfo) string {
	id := fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id += fmt.Sprintf("/%d/%d/%d.%d", st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
	}
	return runtime.GOOS + "/" + id
}

func readCache(file, id string) (Binary, bool) {
	if file == "" {
		return Binary{}, false
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return Binary{}, false
	}
	var c cacheEntry
	if json.Unmarshal(data, &c) != nil || c.Identity != id || len(c.Binary.SHA256) != 64 {
		return Binary{}, false
	}
	return c.Binary, true
}

// writeCache replaces the cache file; a failure only costs the next run a
// hash. It makes no directory: a dry run before any start leaves no state
// behind.
func writeCache(file string, c cacheEntry) {
	if file == "" {
		return
	}
	data, err := json.Marshal(c)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-proxy-binary-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		return
	}
	_ = os.Rename(tmp.Name(), file)
}
