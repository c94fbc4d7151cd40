package rescue

// What a snapshot written the fast way (quick.go) changed in the tree it
// started from, path by path. From it the snapshot tells what its new
// files cost and how many paths differ from the baseline by looking at
// those paths only: two diffs of the whole tree (one against the
// snapshot before, one against the baseline) cost more than the rest of
// such a snapshot. Whatever the delta cannot tell exactly (a directory
// gone or replaced whole, the snapshot before not the delta's base) is
// told by the diffs, as before.

import (
	"context"
	"encoding/hex"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// delta is the change from tree base to the snapshot's tree.
type delta struct {
	base  string
	edits []pathEdit
	// look is what the count needs of the baseline, read while the
	// snapshot was written (nil: read when counting).
	look *baselineLook
}

// pathEdit is one path of a delta: its entry in the base and now (the
// zero entry where there is no file), and the size of the file now.
type pathEdit struct {
	path     string
	old, new entryID
	size     int64
}

// entryID is a tree entry's mode (as a tree stores it) and hex id.
type entryID struct{ mode, id string }

func entryOf(e treeEntry, ok bool) entryID {
	if !ok {
		return entryID{}
	}
	return entryID{e.mode, hex.EncodeToString(e.id)}
}

// editedPaths are the paths the fast way sets (stage) or removes.
func editedPaths(stage []quickFile, ed *quickEdits) []string {
	out := make([]string, 0, len(stage)+len(ed.remove))
	for _, f := range stage {
		out = append(out, f.path)
	}
	for p := range ed.remove {
		out = append(out, p)
	}
	return out
}

// quickDelta is the delta of edits to the tree tr reads (stage the files
// hashed, for their sizes); nil when a directory of it went or was
// replaced whole (what was under it is not known here).
func quickDelta(tr *treeReader, ed *quickEdits, stage []quickFile) (*delta, error) {
	d := &delta{base: tr.root}
	for dir := range ed.fresh {
		if _, ok, err := tr.entry(dir); err != nil || ok {
			return nil, err
		}
	}
	sizes := make(map[string]int64, len(stage))
	for _, f := range stage {
		sizes[f.path] = f.size
	}
	add := func(p string, now entryID) (bool, error) {
		e, ok, err := tr.entry(p)
		if err != nil || ok && e.isTree() {
			return false, err
		}
		if old := entryOf(e, ok); old != now {
			d.edits = append(d.edits, pathEdit{path: p, old: old, new: now, size: sizes[p]})
		}
		return true, nil
	}
	for p, e := range ed.set {
		if ok, err := add(p, entryID{e[0], e[1]}); err != nil || !ok {
			return nil, err
		}
	}
	for p := range ed.remove {
		if _, set := ed.set[p]; set || ed.fresh[p] {
			continue
		}
		if ok, err := add(p, entryID{}); err != nil || !ok {
			return nil, err
		}
	}
	return d, nil
}

// listedDelta is the delta from tree base that changes list (nil without
// a base).
func listedDelta(base string, changes []agentrepo.TreeChange) *delta {
	if base == "" {
		return nil
	}
	d := &delta{base: base, edits: make([]pathEdit, len(changes))}
	for i, c := range changes {
		d.edits[i] = pathEdit{path: c.Path, old: entryID{c.OldMode, c.OldID}, new: entryID{c.NewMode, c.NewID}, size: c.Size}
	}
	return d
}

// cost is what the files a delta adds or changes hold: their sizes in
// the worktree when they were hashed (the blobs' sizes but for a
// conversion an attribute asks for).
func (d *delta) cost() int64 {
	var n int64
	for _, e := range d.edits {
		if e.new.id != "" && e.new.mode != "160000" {
			n += e.size
		}
	}
	return n
}

// blobSizes adds up the sizes of the blobs ids (0 when they cannot be
// read).
func blobSizes(ctx context.Context, g *gitcmd.Runner, ids []string) int64 {
	sizes, _ := g.ObjectSizes(ctx, ids)
	var n int64
	for _, v := range sizes {
		n += v
	}
	return n
}

// counting is what a snapshot's change count starts from: the snapshot
// it follows and the baseline (the Snapshotter sets it before a Read).
type counting struct{ prev, baseline string }

// baselineLook is what the count of a delta needs, read while the
// snapshot is written: the change count of the snapshot it follows (whose
// tree must be the delta's base, against the same baseline) and the
// baseline's entry at each edited path.
type baselineLook struct {
	done    chan struct{}
	from    counting
	changes int
	entries map[string]entryID
	ok      bool
}

// start reads, in the background, what the count of a delta from base
// at paths needs.
func (c counting) start(ctx context.Context, g *gitcmd.Runner, base string, paths []string) *baselineLook {
	l := &baselineLook{done: make(chan struct{}), from: c}
	if c.prev == "" || c.baseline == "" {
		close(l.done)
		return l
	}
	go func() {
		defer close(l.done)
		l.changes, l.entries, l.ok = readBaseline(ctx, g, c, base, paths)
	}()
	return l
}

// readBaseline reads the snapshot c.prev's change count (when its tree is
// base and it was counted against c.baseline) and the baseline's entry at
// each path; ok is false when that cannot be told so.
func readBaseline(ctx context.Context, g *gitcmd.Runner, c counting, base string, paths []string) (n int, entries map[string]entryID, ok bool) {
	tr, err := newTreeReader(ctx, g, c.baseline+"^{tree}", len(base))
	if err != nil {
		return 0, nil, false
	}
	defer tr.close()
	typ, body, err := tr.object(c.prev)
	if err != nil || typ != "commit" {
		return 0, nil, false
	}
	header, msg, _ := strings.Cut(string(body), "\n\n")
	snap, isSnap := parseMessage(msg)
	if !isSnap || !strings.HasPrefix(header, "tree "+base+"\n") {
		return 0, nil, false
	}
	if snap.Baseline == "" && (snap.Reason == ReasonStart || snap.Reason == ReasonSetup) {
		snap.Baseline = c.prev
	}
	if snap.Baseline != c.baseline || tr.prefetch(paths) != nil {
		return 0, nil, false
	}
	entries = make(map[string]entryID, len(paths))
	for _, p := range paths {
		b, found, err := tr.entry(p)
		if err != nil {
			return 0, nil, false
		}
		// A directory of the baseline where the delta has a file: the
		// baseline has no file at that path (the count is of files).
		entries[p] = entryOf(b, found && !b.isTree())
	}
	return snap.Changes, entries, true
}

// changesByDelta counts the paths of the snapshot's tree that differ from
// the baseline's: the count of the snapshot prev moved by each edited
// path. ok is false when that cannot be told so.
func changesByDelta(ctx context.Context, g *gitcmd.Runner, d *delta, prev, baseline string) (n int, ok bool) {
	look := d.look
	want := counting{prev: prev, baseline: baseline}
	if look == nil || look.from != want {
		paths := make([]string, len(d.edits))
		for i, e := range d.edits {
			paths[i] = e.path
		}
		look = want.start(ctx, g, d.base, paths)
	}
	<-look.done
	if !look.ok {
		return 0, false
	}
	n = look.changes
	for _, e := range d.edits {
		was, seen := look.entries[e.path]
		if !seen {
			return 0, false
		}
		n += differs(e.new, was) - differs(e.old, was)
	}
	return n, true
}

func differs(a, b entryID) int {
	if a != b {
		return 1
	}
	return 0
}
