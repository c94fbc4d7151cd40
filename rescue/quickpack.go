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
// apply to its path. A file read here whose bytes hash to that id goes
// into the pack as read; any other (an eol conversion, a clean filter, a
// file that changed between the two reads) is written by git hash-object
// -w, as before, and must then get the id git gave first. The pack holds
// what was read and hashed, so it cannot differ from the ids in the
// trees. Files over packFileMax, or past packBudget in all, are written
// by hash-object -w too: the pack's blobs are held in memory.

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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

// What of the changed files the pack carries: each file up to
// packFileMax, up to packBudget in all.
const (
	packFileMax = 1 << 20
	packBudget  = 32 << 20
)

// packObject is one object of the fast way's pack.
type packObject struct {
	kind int
	id   []byte // raw
	body []byte
}

// newObjectHash is the hash of the store's object format, by the length
// of its hex ids.
func newObjectHash(hexLen int) hash.Hash {
	if hexLen == 64 {
		return sha256.New()
	}
	return sha1.New()
}

// objectID is the raw id of an object of that kind and body.
func objectID(kind string, body []byte, hexLen int) []byte {
	h := newObjectHash(hexLen)
	h.Write([]byte(kind + " " + strconv.Itoa(len(body)) + "\x00"))
	h.Write(body)
	return h.Sum(nil)
}

// packable reads the file at p (not through a symlink at its last
// component, and never waiting on a FIFO put in its place) and returns it
// as a blob when its bytes hash to wantHex, the id git gave it; nil when
// they do not, or when it is over max.
func packable(worktree, p, wantHex string, max int64) (*packObject, error) {
	f, err := os.OpenFile(filepath.Join(worktree, p), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errNotQuick
	}
	body, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(body)) > max {
		return nil, err
	}
	id := objectID("blob", body, len(wantHex))
	if hex.EncodeToString(id) != wantHex {
		return nil, nil
	}
	return &packObject{kind: packBlob, id: id, body: body}, nil
}

// writePack writes objs into the store with one git index-pack, each
// object once (two files of the same content are one blob, two
// directories of the same files one tree).
func writePack(ctx context.Context, g *gitcmd.Runner, objs []packObject, hexLen int) error {
	seen := make(map[string]bool, len(objs))
	objs = slices.DeleteFunc(slices.Clone(objs), func(o packObject) bool {
		dup := seen[string(o.id)]
		seen[string(o.id)] = true
		return dup
	})
	if len(objs) == 0 {
		return nil
	}
	if _, err := g.Run(ctx, encodePack(objs, hexLen), "index-pack", "--stdin"); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// encodePack is a version 2 pack of objs (whole objects, no deltas) and
// its trailer.
func encodePack(objs []packObject, hexLen int) *bytes.Buffer {
	var pack bytes.Buffer
	head := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(head[8:], uint32(len(objs)))
	pack.Write(head)
	zw, _ := zlib.NewWriterLevel(&pack, zlib.BestSpeed)
	for _, o := range objs {
		pack.Write(entryHeader(o.kind, int64(len(o.body))))
		zw.Reset(&pack)
		zw.Write(o.body) // a bytes.Buffer's writes do not fail
		zw.Close()
	}
	trailer := newObjectHash(hexLen)
	trailer.Write(pack.Bytes())
	pack.Write(trailer.Sum(nil))
	return &pack
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
