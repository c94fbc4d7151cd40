package rescue

// The fast way's new objects go into the store as one pack. Written one
// by one (git hash-object -w, git mktree), each blob and tree is a file
// of its own: made, written, linked into place — most of what a watched
// snapshot of 200 files cost, and as much as C git's own add and
// write-tree pay. git index-pack --stdin writes one pack and its index
// instead.
//
// git stays the judge of what a file is stored as: git hash-object (no
// -w) gives each file's blob id, with the attributes and filters that
// apply to its path. A file whose bytes as they are hash to that id goes
// into the pack as it is; any other (an eol conversion, a clean filter)
// is written by git hash-object -w, as before. The agent is frozen while
// this reads; a file that changes anyway between the two reads fails the
// pack (its hash is checked as it is sent), and the index's way takes
// the snapshot.

import (
	"bufio"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Object types as a pack's entry headers give them.
const (
	packTree = 2
	packBlob = 3
)

// packObject is one object of the fast way's pack: a tree (its body) or
// a blob (a file of the worktree, read when the pack is sent).
type packObject struct {
	kind int
	id   []byte // raw
	body []byte // a tree's
	path string // a blob's, relative to the worktree
	size int64
}

// newObjectHash is the hash of the store's object format, by the length
// of its hex ids.
func newObjectHash(hexLen int) hash.Hash {
	if hexLen == 64 {
		return sha256.New()
	}
	return sha1.New()
}

// objectHeader is what git hashes before an object's content.
func objectHeader(kind string, size int64) []byte {
	return []byte(kind + " " + strconv.FormatInt(size, 10) + "\x00")
}

// openFile opens a file of the worktree, not through a symlink at its
// last component.
func openFile(worktree, p string) (*os.File, error) {
	return os.OpenFile(filepath.Join(worktree, p), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// rawBlob reports whether the file at p, as it is, hashes to wantHex (the
// id git gave it), and its size.
func rawBlob(worktree, p, wantHex string) (int64, bool, error) {
	f, err := openFile(worktree, p)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false, errNotQuick
	}
	h := newObjectHash(len(wantHex))
	h.Write(objectHeader("blob", fi.Size()))
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, false, err
	}
	return n, n == fi.Size() && hex.EncodeToString(h.Sum(nil)) == wantHex, nil
}

// writePack writes objs into the store with one git index-pack, each
// object once (two files of the same content are one blob, two
// directories of the same files one tree).
func writePack(ctx context.Context, g *gitcmd.Runner, worktree string, objs []packObject, hexLen int) error {
	seen := make(map[string]bool, len(objs))
	objs = slices.DeleteFunc(slices.Clone(objs), func(o packObject) bool {
		dup := seen[string(o.id)]
		seen[string(o.id)] = true
		return dup
	})
	if len(objs) == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := streamPack(pw, worktree, objs, hexLen)
		pw.CloseWithError(err)
		sent <- err
	}()
	_, err := g.Run(ctx, pr, "index-pack", "--stdin")
	// A git that stopped reading leaves the writer blocked: let it go.
	pr.CloseWithError(errors.New("git index-pack stopped reading"))
	serr := <-sent
	switch {
	case errors.Is(serr, errNotQuick):
		return serr
	case err != nil:
		return fmt.Errorf("snapshot: %w", err)
	case serr != nil:
		return fmt.Errorf("snapshot: %w", serr)
	}
	return nil
}

// errChanged: a file was not what it was a moment before.
var errChanged = fmt.Errorf("a file changed while the snapshot read it: %w", errNotQuick)

// streamPack writes a version 2 pack of objs (whole objects, no deltas)
// and its trailer.
func streamPack(w io.Writer, worktree string, objs []packObject, hexLen int) error {
	trailer := newObjectHash(hexLen)
	bw := bufio.NewWriterSize(io.MultiWriter(w, trailer), 64<<10)
	head := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(head[8:], uint32(len(objs)))
	bw.Write(head)
	zw, _ := zlib.NewWriterLevel(bw, zlib.BestSpeed)
	for _, o := range objs {
		bw.Write(entryHeader(o.kind, o.size))
		zw.Reset(bw)
		var err error
		if o.kind == packBlob {
			err = sendBlob(zw, worktree, o, hexLen)
		} else {
			_, err = zw.Write(o.body)
		}
		if err == nil {
			err = zw.Close()
		}
		if err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(trailer.Sum(nil))
	return err
}

// entryHeader is a pack entry's type and size: the type and the size's
// low four bits, then seven bits a byte, each but the last with its top
// bit set.
func entryHeader(kind int, size int64) []byte {
	b := []byte{byte(kind<<4) | byte(size&0x0f)}
	for size >>= 4; size > 0; size >>= 7 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
	}
	return b
}

// sendBlob sends the file of o, hashing it as it goes: not the size or
// id it had when it was looked at, it fails the pack.
func sendBlob(w io.Writer, worktree string, o packObject, hexLen int) error {
	f, err := openFile(worktree, o.path)
	if err != nil {
		return errChanged
	}
	defer f.Close()
	h := newObjectHash(hexLen)
	h.Write(objectHeader("blob", o.size))
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(f, o.size+1))
	if err != nil {
		return err
	}
	if n != o.size || string(h.Sum(nil)) != string(o.id) {
		return errChanged
	}
	return nil
}
