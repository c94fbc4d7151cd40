// Package visible owns the object stores an agent's repository may read:
// the repository's visible store, which holds what the user's branches and
// tags reach and nothing else (no stash, no refs/sandbox/ snapshots,
// nothing dangling), and the store of what one sandbox was given beyond it
// (the commit it started at when no branch holds it, the work carried in,
// update's merge).
//
// Both are plain object directories of packs, written on the host and
// mounted read-only into the agent's container; the user's own object
// store is never mounted there. A pack comes in whole or not at all: it is
// written in a directory beside the store, then its .pack and, last, its
// .idx are renamed in (git uses a pack only once its index is there).
//
// The visible store is kept incrementally. Beside it, a tips file names the
// commits (and tags) it was last packed from; each Refresh packs only
// what the refs reach now and those tips did not, so after a repository's
// first start the cost follows its new commits. When the store has more
// than MaxPacks packs, all but the largest are rolled into one.
package visible

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// MaxPacks is how many packs the visible store may hold before Refresh
// rolls all but the largest into one (git looks an object up in each
// pack's index in turn).
var MaxPacks = 32

// Refs is what the visible store was packed from, as git for-each-ref
// prints it: "<id> <refname>" lines of refs/heads/ and refs/tags/.
type Refs []byte

// IDs returns the object ids the refs name.
func (r Refs) IDs() []string {
	var ids []string
	for _, line := range strings.Split(string(r), "\n") {
		if id, _, ok := strings.Cut(line, " "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// With returns the refs with name (a full ref name) at id: its line
// replaced, or added where its name sorts.
func (r Refs) With(id, name string) Refs {
	var lines []string
	for _, line := range strings.Split(string(r), "\n") {
		if _, ref, ok := strings.Cut(line, " "); ok && ref != name {
			lines = append(lines, line)
		}
	}
	lines = append(lines, id+" "+name)
	slices.SortStableFunc(lines, func(a, b string) int {
		_, ra, _ := strings.Cut(a, " ")
		_, rb, _ := strings.Cut(b, " ")
		return strings.Compare(ra, rb)
	})
	return Refs(strings.Join(lines, "\n") + "\n")
}

// Result is what a Refresh did.
type Result struct {
	// Refs are the branches and tags of the user's repository now; every
	// object they reach is in the store.
	Refs Refs
	// Objects counts the objects packed by this refresh (0: nothing new).
	Objects int
	// Rolled counts the packs rolled into one (0: none).
	Rolled int
	// Reused counts the user's packs brought in as they are (0: none).
	Reused int
}

// Store is one repository's visible store: Dir holds objects/ (what is
// mounted), the tips file, the lock and the scratch directories of packs
// being written.
type Store struct {
	Dir string
}

// Objects is the object directory agents' repositories borrow from.
func (s Store) Objects() string { return filepath.Join(s.Dir, "objects") }

func (s Store) tipsFile() string { return filepath.Join(s.Dir, "tips") }
func (s Store) lockFile() string { return filepath.Join(s.Dir, "lock") }
func (s Store) packDir() string  { return filepath.Join(s.Objects(), "pack") }

// Refresh brings the store up to the user's branches and tags (host is the
// user's repository) and extra (commits a sandbox starts at whose branch
// is not made yet), and returns the branches and tags. Concurrent refreshes of one store
// (two starts) take turns on a lock; a refresh killed half-way leaves a
// scratch directory, or a pack without its index, that the next one
// removes, and a tips file that still names only what is in the store.
func (s Store) Refresh(ctx context.Context, host *gitcmd.Runner, extra ...string) (*Result, error) {
	if err := os.MkdirAll(s.packDir(), 0o755); err != nil {
		return nil, fmt.Errorf("visible store: %w", err)
	}
	unlock, err := lock(ctx, s.lockFile())
	if err != nil {
		return nil, fmt.Errorf("visible store: %w", err)
	}
	defer unlock()
	s.removeLeftovers()
	refs, err := host.Run(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/tags/")
	if err != nil {
		return nil, fmt.Errorf("visible store: %w", err)
	}
	res := &Result{Refs: refs}
	for _, id := range extra {
		if _, err := gitcmd.ParseHash(id); err != nil {
			return nil, fmt.Errorf("visible store: %w", err)
		}
	}
	now := dedup(append(res.Refs.IDs(), extra...))
	prev, err := s.packedTips(ctx, host)
	if err != nil {
		return nil, err
	}
	packs, err := s.packs()
	if err != nil {
		return nil, err
	}
	if len(prev) == 0 && len(packs) == 0 && len(now) > 0 {
		// The first fill: the user's packs that hold only what is
		// reachable come in as they are.
		if res.Objects, res.Reused, err = s.fill(ctx, host, now); err != nil {
			return nil, fmt.Errorf("visible store: %w", err)
		}
		if err := writeAtomic(s.tipsFile(), []byte(strings.Join(now, "\n")+"\n")); err != nil {
			return nil, fmt.Errorf("visible store: %w", err)
		}
	} else if !subset(now, prev) {
		var in strings.Builder
		for _, id := range now {
			in.WriteString(id + "\n")
		}
		in.WriteString("--not\n")
		for _, id := range prev {
			in.WriteString(id + "\n")
		}
		// The tips of the last pack may be gone from the user's store (a
		// rewritten branch, then gc): the visible store still has them.
		r := *host
		r.Env = append(slices.Clone(host.Env), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+quoteAlternate(s.Objects()))
		n, _, err := writePack(ctx, &r, s.Objects(), in.String(), "--revs")
		if err != nil {
			return nil, fmt.Errorf("visible store: %w", err)
		}
		res.Objects = n
		if err := writeAtomic(s.tipsFile(), []byte(strings.Join(now, "\n")+"\n")); err != nil {
			return nil, fmt.Errorf("visible store: %w", err)
		}
	}
	if res.Rolled, err = s.rollUp(ctx, host); err != nil {
		return nil, err
	}
	return res, nil
}

// packedTips returns the ids of the tips file that the store holds: a tip
// whose pack is gone is packed again.
func (s Store) packedTips(ctx context.Context, host *gitcmd.Runner) ([]string, error) {
	b, err := os.ReadFile(s.tipsFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("visible store: %w", err)
	}
	var ids []string
	for _, id := range strings.Fields(string(b)) {
		if _, err := gitcmd.ParseHash(id); err == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	st := &gitcmd.Runner{GitDir: host.GitDir, ObjectDir: s.Objects(), Isolated: true}
	out, err := st.Run(ctx, strings.NewReader(strings.Join(ids, "\n")+"\n"), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, fmt.Errorf("visible store: %w", err)
	}
	var have []string
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasSuffix(line, " missing") {
			have = append(have, line)
		}
	}
	return have, nil
}

// rollUp packs every pack but the largest into one when there are more
// than MaxPacks, and returns how many it rolled.
func (s Store) rollUp(ctx context.Context, host *gitcmd.Runner) (int, error) {
	packs, err := s.packs()
	if err != nil || len(packs) <= MaxPacks {
		return 0, err
	}
	slices.SortFunc(packs, func(a, b pack) int { return int(b.size - a.size) })
	var in strings.Builder
	fmt.Fprintf(&in, "^%s\n", packs[0].name)
	for _, p := range packs[1:] {
		fmt.Fprintf(&in, "%s\n", p.name)
	}
	st := &gitcmd.Runner{GitDir: host.GitDir, ObjectDir: s.Objects(), Isolated: true}
	_, rolled, err := writePack(ctx, st, s.Objects(), in.String(), "--stdin-packs")
	if err != nil {
		return 0, fmt.Errorf("visible store: roll up packs: %w", err)
	}
	// The new pack is in: the old ones can go (a reader that misses an
	// object in a vanished pack looks for packs again and finds it).
	for _, p := range packs[1:] {
		if p.name == rolled {
			continue
		}
		base := strings.TrimSuffix(p.name, ".pack")
		for _, ext := range []string{".idx", ".rev", ".bitmap", ".pack"} {
			_ = os.Remove(filepath.Join(s.packDir(), base+ext))
		}
	}
	return len(packs) - 1, nil
}

type pack struct {
	name string // pack-<hash>.pack
	size int64
}

// packs lists the store's packs that have an index.
func (s Store) packs() ([]pack, error) {
	entries, err := os.ReadDir(s.packDir())
	if err != nil {
		return nil, fmt.Errorf("visible store: %w", err)
	}
	var out []pack
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.packDir(), base+".idx")); err != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, pack{name: e.Name(), size: fi.Size()})
	}
	return out, nil
}

// removeLeftovers removes what a killed refresh left: scratch directories
// and packs whose index never came in (git ignores those anyway).
func (s Store) removeLeftovers() {
	if old, err := filepath.Glob(filepath.Join(s.Dir, scratchPrefix+"*")); err == nil {
		for _, d := range old {
			_ = os.RemoveAll(d)
		}
	}
	entries, err := os.ReadDir(s.packDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.packDir(), base+".idx")); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(filepath.Join(s.packDir(), e.Name()))
		}
	}
}

// Give packs into objects (an object directory: a sandbox's given store)
// what include reaches and exclude does not (commits, trees or tags of the
// user's repository, host), and returns how many objects it packed.
func Give(ctx context.Context, host *gitcmd.Runner, objects string, include, exclude []string) (int, error) {
	if len(include) == 0 {
		return 0, nil
	}
	for _, id := range append(slices.Clone(include), exclude...) {
		if _, err := gitcmd.ParseHash(id); err != nil {
			return 0, fmt.Errorf("give objects: %w", err)
		}
	}
	in := strings.Join(include, "\n") + "\n--not\n"
	for _, id := range exclude {
		in += id + "\n"
	}
	n, _, err := writePack(ctx, host, objects, in, "--revs")
	if err != nil {
		return 0, fmt.Errorf("give objects: %w", err)
	}
	return n, nil
}

// scratchPrefix names the directories packs are written in, beside the
// object directory (never inside what is mounted).
const scratchPrefix = ".pack-tmp-"

// writePack runs git pack-objects with args and stdin in a scratch
// directory beside objects and moves the pack into objects/pack: the .pack
// first, the .idx last. An empty pack is not kept. It returns the number of
// objects in the pack.
func writePack(ctx context.Context, r *gitcmd.Runner, objects, stdin string, args ...string) (int, string, error) {
	packDir := filepath.Join(objects, "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		return 0, "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(objects), scratchPrefix)
	if err != nil {
		return 0, "", err
	}
	defer os.RemoveAll(tmp)
	pr, err := packRunner(r, tmp)
	if err != nil {
		return 0, "", err
	}
	argv := append([]string{"pack-objects", "-q", "--delta-base-offset", "--missing=allow-promisor"}, args...)
	out, err := pr.Run(ctx, strings.NewReader(stdin), append(argv, filepath.Join(tmp, "pack"))...)
	if err != nil {
		return 0, "", err
	}
	sum := strings.TrimSpace(string(out))
	if _, err := gitcmd.ParseHash(sum); err != nil {
		return 0, "", fmt.Errorf("git pack-objects printed %q, not a pack's name", sum)
	}
	base := "pack-" + sum
	n, err := packCount(filepath.Join(tmp, base+".pack"))
	if err != nil || n == 0 {
		return 0, "", err
	}
	for _, ext := range []string{".pack", ".rev", ".idx"} {
		err := os.Rename(filepath.Join(tmp, base+ext), filepath.Join(packDir, base+ext))
		if err != nil && !(ext == ".rev" && errors.Is(err, os.ErrNotExist)) {
			return 0, "", err
		}
	}
	return n, base + ".pack", nil
}

// packRunner is r with a scratch object directory in tmp as the one git
// writes to, and r's own object directory borrowed: git pack-objects
// writes its temporary file in the object directory it writes to and then
// renames it to the name it is given, which fails across file systems (a
// state directory on a tmpfs, the repository on a disk). This way the
// file is written, renamed and finally moved into the store all on the
// store's file system; nothing is written into r's object directory.
func packRunner(r *gitcmd.Runner, tmp string) (*gitcmd.Runner, error) {
	scratch := filepath.Join(tmp, "objects")
	if err := os.MkdirAll(filepath.Join(scratch, "pack"), 0o755); err != nil {
		return nil, err
	}
	own := r.ObjectDir
	if own == "" {
		own = filepath.Join(r.GitDir, "objects")
	}
	alternates := quoteAlternate(own)
	var env []string
	for _, kv := range r.Env {
		if v, ok := strings.CutPrefix(kv, "GIT_ALTERNATE_OBJECT_DIRECTORIES="); ok {
			alternates += ":" + v
			continue
		}
		env = append(env, kv)
	}
	pr := *r
	pr.ObjectDir = scratch
	pr.Env = append(env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+alternates)
	return &pr, nil
}

// quoteAlternate writes a path for GIT_ALTERNATE_OBJECT_DIRECTORIES, whose
// entries are separated by ":" and may be quoted as C strings.
func quoteAlternate(p string) string {
	if !strings.ContainsAny(p, ":\"\\") {
		return p
	}
	r := strings.NewReplacer("\\", "\\\\", "\"", "\\\"")
	return "\"" + r.Replace(p) + "\""
}

// packCount reads the number of objects from a pack's header.
func packCount(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var hdr [12]byte
	if _, err := io.ReadFull(bufio.NewReader(f), hdr[:]); err != nil {
		return 0, fmt.Errorf("read pack header: %w", err)
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) {
		return 0, fmt.Errorf("%s is not a pack", path)
	}
	return int(binary.BigEndian.Uint32(hdr[8:])), nil
}

// writeAtomic replaces path with b: written beside it, then renamed.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lock takes an exclusive lock on path, waiting for as long as another
// refresh holds it (its pack may take minutes on a large repository's
// first start) unless ctx ends first.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	pause := 10 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*2, 200*time.Millisecond)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func dedup(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// subset reports whether every id of a is in b.
func subset(a, b []string) bool {
	in := make(map[string]bool, len(b))
	for _, id := range b {
		in[id] = true
	}
	for _, id := range a {
		if !in[id] {
			return false
		}
	}
	return true
}
