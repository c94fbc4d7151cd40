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
	"bytes"
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// delta is the change from tree base to the snapshot's tree.
type delta struct {
	base  string
	edits []pathEdit
}

// pathEdit is one path of a delta: its entry in the base and now (the
// zero entry where there is no file).
type pathEdit struct {
	path     string
	old, new entryID
}

// entryID is a tree entry's mode (as a tree stores it) and hex id.
type entryID struct{ mode, id string }

func entryOf(e treeEntry, ok bool) entryID {
	if !ok {
		return entryID{}
	}
	return entryID{e.mode, hex.EncodeToString(e.id)}
}

// quickDelta is the delta of edits to the tree tr reads; nil when a
// directory of it went or was replaced whole (what was under it is not
// known here).
func quickDelta(tr *treeReader, ed *quickEdits) (*delta, error) {
	d := &delta{base: tr.root}
	for dir := range ed.fresh {
		if _, ok, err := tr.entry(dir); err != nil || ok {
			return nil, err
		}
	}
	add := func(p string, now entryID) (bool, error) {
		e, ok, err := tr.entry(p)
		if err != nil || ok && e.isTree() {
			return false, err
		}
		if old := entryOf(e, ok); old != now {
			d.edits = append(d.edits, pathEdit{path: p, old: old, new: now})
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

// newBlobs are the ids of the files a delta adds or changes.
func (d *delta) newBlobs() []string {
	var ids []string
	for _, e := range d.edits {
		if e.new.id != "" && e.new.mode != "160000" {
			ids = append(ids, e.new.id)
		}
	}
	return ids
}

// blobSizes adds up the sizes of the blobs ids from the object headers of
// the user's store (nothing is read whole).
func blobSizes(ctx context.Context, g *gitcmd.Runner, ids []string) int64 {
	if len(ids) == 0 {
		return 0
	}
	in := bytes.NewBufferString(strings.Join(ids, "\n") + "\n")
	sizes, err := g.Run(ctx, in, "cat-file", "--batch-check=%(objectsize)")
	if err != nil {
		return 0
	}
	var n int64
	for _, l := range strings.Fields(string(sizes)) {
		v, _ := strconv.ParseInt(l, 10, 64)
		n += v
	}
	return n
}

// changesByDelta counts the paths of the snapshot's tree that differ from
// the baseline's: the count of the snapshot prev (whose tree must be the
// delta's base, measured against the same baseline) moved by each edited
// path. ok is false when that cannot be told so.
func changesByDelta(ctx context.Context, g *gitcmd.Runner, d *delta, prev, baseline string) (n int, ok bool, err error) {
	tr, err := newTreeReader(ctx, g, baseline+"^{tree}", len(d.base))
	if err != nil {
		return 0, false, err
	}
	defer tr.close()
	typ, body, err := tr.object(prev)
	if err != nil || typ != "commit" {
		return 0, false, err
	}
	header, msg, _ := strings.Cut(string(body), "\n\n")
	snap, isSnap := parseMessage(msg)
	if !isSnap || !strings.HasPrefix(header, "tree "+d.base+"\n") {
		return 0, false, nil
	}
	if snap.Baseline == "" && (snap.Reason == ReasonStart || snap.Reason == ReasonSetup) {
		snap.Baseline = prev
	}
	if snap.Baseline != baseline {
		return 0, false, nil
	}
	paths := make([]string, len(d.edits))
	for i, e := range d.edits {
		paths[i] = e.path
	}
	if err := tr.prefetch(paths); err != nil {
		return 0, false, err
	}
	n = snap.Changes
	for _, e := range d.edits {
		b, found, err := tr.entry(e.path)
		if err != nil || found && b.isTree() {
			return 0, false, err
		}
		was := entryOf(b, found)
		n += differs(e.new, was) - differs(e.old, was)
	}
	return n, true, nil
}

func differs(a, b entryID) int {
	if a != b {
		return 1
	}
	return 0
}
