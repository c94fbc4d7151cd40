package visible

// The first fill of a visible store reuses the user's packs that hold only
// what the branches and tags reach (a fresh clone's pack, a repository
// repacked with nothing unreachable): they are hard-linked into the store
// (copied when the store is on another file system), not packed again.
// Whether a pack qualifies is checked exactly, against every object the
// branches and tags reach; a pack holding anything else (the stash, a
// snapshot, a remote-tracking branch's commits, something dangling) is
// never linked, and what the linked packs lack is packed as before.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// fill packs into an empty store what the ids reach, reusing the user's
// packs that hold nothing else. It returns the objects that came in and
// how many packs were reused.
func (s Store) fill(ctx context.Context, host *gitcmd.Runner, ids []string) (int, int, error) {
	candidates := userPacks(host)
	if len(candidates) == 0 {
		n, _, err := writePack(ctx, host, s.Objects(), strings.Join(ids, "\n")+"\n", "--revs")
		return n, 0, err
	}
	reach, err := reachable(ctx, host, ids)
	if err != nil {
		return 0, 0, err
	}
	covered := make([]bool, len(reach))
	n, reused := 0, 0
	for _, p := range candidates {
		k, err := s.reusePack(p, reach, covered)
		if err != nil {
			return 0, 0, err
		}
		if k > 0 {
			n += k
			reused++
		}
	}
	var rest strings.Builder
	for i, id := range reach {
		if !covered[i] {
			rest.WriteString(hex.EncodeToString([]byte(id)) + "\n")
		}
	}
	if rest.Len() > 0 {
		k, _, err := writePack(ctx, host, s.Objects(), rest.String())
		if err != nil {
			return 0, 0, err
		}
		n += k
	}
	return n, reused, nil
}

// userPacks lists the packs of the user's own object directory that have
// an index: not those of a partial clone (.promisor) or cruft packs of
// unreachable objects (.mtimes), which could never qualify anyway.
func userPacks(host *gitcmd.Runner) []string {
	dir := host.ObjectDir
	if dir == "" {
		dir = filepath.Join(host.GitDir, "objects")
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "pack", "pack-*.pack"))
	var out []string
	for _, m := range matches {
		base := strings.TrimSuffix(m, ".pack")
		if exists(base+".idx") && !exists(base+".promisor") && !exists(base+".mtimes") {
			out = append(out, base)
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// reachable returns every object the ids reach, as raw hashes, sorted.
func reachable(ctx context.Context, host *gitcmd.Runner, ids []string) ([]string, error) {
	out, err := host.Run(ctx, strings.NewReader(strings.Join(ids, "\n")+"\n"), "rev-list", "--objects", "--no-object-names", "--missing=allow-promisor", "--stdin")
	if err != nil {
		return nil, fmt.Errorf("list what branches and tags reach: %w", err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	reach := make([]string, 0, len(lines))
	for _, l := range lines {
		raw, err := hex.DecodeString(string(l))
		if err != nil || len(raw) < 20 {
			continue
		}
		reach = append(reach, string(raw))
	}
	slices.Sort(reach)
	return slices.Compact(reach), nil
}

// reusePack brings the user's pack base (path without .pack) into the
// store when every object its index names is in reach, marking them in
// covered; it returns how many objects it holds (0: not reused). The pack
// and index are linked (or copied) into a scratch directory first and
// checked there, so what is checked is what comes in.
func (s Store) reusePack(base string, reach []string, covered []bool) (int, error) {
	if len(reach) == 0 {
		return 0, nil
	}
	tmp, err := os.MkdirTemp(s.Dir, scratchPrefix)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	name := filepath.Base(base)
	for _, ext := range []string{".idx", ".pack"} {
		if err := linkOrCopy(base+ext, filepath.Join(tmp, name+ext)); err != nil {
			return 0, nil // gone meanwhile (a gc): not reused
		}
	}
	names, err := packNames(filepath.Join(tmp, name), len(reach[0]))
	if err != nil {
		return 0, nil
	}
	marks := make([]int, 0, len(names))
	for _, id := range names {
		i, ok := slices.BinarySearch(reach, id)
		if !ok {
			return 0, nil
		}
		marks = append(marks, i)
	}
	for _, ext := range []string{".pack", ".idx"} {
		if err := os.Rename(filepath.Join(tmp, name+ext), filepath.Join(s.packDir(), name+ext)); err != nil {
			return 0, err
		}
	}
	for _, i := range marks {
		covered[i] = true
	}
	return len(names), nil
}

// linkOrCopy hard-links from to to, or copies it when they are on
// different file systems (or links are refused).
func linkOrCopy(from, to string) error {
	err := os.Link(from, to)
	if err == nil || !(errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK)) {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// packNames reads the object names (hashLen bytes each) of a version 2
// pack index (base.idx),
// after checking that the pack (base.pack) is the one the index was made
// for (the pack's trailing checksum is recorded in the index).
func packNames(base string, hashLen int) ([]string, error) {
	idx, err := os.ReadFile(base + ".idx")
	if err != nil {
		return nil, err
	}
	if len(idx) < 8+256*4 || !bytes.Equal(idx[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, fmt.Errorf("%s.idx: not a version 2 pack index", base)
	}
	n := int(binary.BigEndian.Uint32(idx[8+255*4:]))
	// The rest: n names, n CRCs, n offsets, large offsets, then the
	// pack's checksum and the index's, each one hash long.
	namesEnd := 8 + 256*4 + n*hashLen
	if namesEnd+n*8+2*hashLen > len(idx) {
		return nil, fmt.Errorf("%s.idx: truncated", base)
	}
	if err := samePack(base+".pack", idx[len(idx)-2*hashLen:len(idx)-hashLen]); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range n {
		names[i] = string(idx[8+256*4+i*hashLen : 8+256*4+(i+1)*hashLen])
	}
	return names, nil
}

// samePack checks that the pack ends with the checksum sum.
func samePack(path string, sum []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < int64(12+len(sum)) {
		return fmt.Errorf("%s: not a pack", path)
	}
	tail := make([]byte, len(sum))
	if _, err := f.ReadAt(tail, fi.Size()-int64(len(sum))); err != nil {
		return err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(bufio.NewReader(io.NewSectionReader(f, 0, 4)), hdr[:]); err != nil || string(hdr[:]) != "PACK" {
		return fmt.Errorf("%s: not a pack", path)
	}
	if !bytes.Equal(tail, sum) {
		return fmt.Errorf("%s does not match its index", path)
	}
	return nil
}

// Usage is the disk a visible store takes.
type Usage struct {
	// Packs counts the store's packs; Bytes is what their files hold.
	Packs int
	Bytes int64
	// Shared is the part of Bytes in files that are the user's own pack
	// files, hard-linked: it takes no disk of its own while the user's
	// repository keeps those packs.
	Shared int64
}

// Usage measures the store's packs; userObjects is the user's object
// directory, whose pack files a linked one shares. A store not made yet
// is no packs.
func (s Store) Usage(userObjects string) (Usage, error) {
	var u Usage
	entries, err := os.ReadDir(s.packDir())
	if errors.Is(err, os.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, err
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if strings.HasSuffix(e.Name(), ".pack") {
			u.Packs++
		}
		u.Bytes += fi.Size()
		if theirs, err := os.Stat(filepath.Join(userObjects, "pack", e.Name())); err == nil && os.SameFile(fi, theirs) {
			u.Shared += fi.Size()
		}
	}
	return u, nil
}
