package rescue

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// writeEdits writes the trees along the edited paths, deepest first, and
// returns the new root tree. Each tree's id is computed here (a child's
// is needed before its parent is written) and the trees are written by
// one git mktree --batch, whose answers must be the same ids.
func writeEdits(ctx context.Context, g *gitcmd.Runner, tr *treeReader, ed *quickEdits) (string, error) {
	touched := map[string][]string{} // directory → edited names in it
	mark := func(p string) {
		for d := path.Dir(p); ; d = path.Dir(d) {
			if _, ok := touched[d]; !ok {
				touched[d] = nil
			}
			if d == "." {
				return
			}
		}
	}
	for p := range ed.set {
		mark(p)
		touched[path.Dir(p)] = append(touched[path.Dir(p)], path.Base(p))
	}
	for p := range ed.remove {
		mark(p)
		touched[path.Dir(p)] = append(touched[path.Dir(p)], path.Base(p))
	}
	dirs := make([]string, 0, len(touched))
	for d := range touched {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return depth(dirs[i]) > depth(dirs[j]) })
	made := map[string]string{} // directory → its new tree ("" empty)
	var batch bytes.Buffer
	var want []string
	for _, d := range dirs {
		entries, err := editedDir(tr, ed, d, made)
		if err != nil {
			return "", err
		}
		if len(entries) == 0 {
			if d == "." {
				return "", errNotQuick // an empty worktree: the index's way
			}
			made[d] = ""
			continue
		}
		id := treeID(entries, tr.hexLen)
		made[d] = id
		want = append(want, id)
		writeMktree(&batch, entries)
	}
	if err := mktree(ctx, g, &batch, want); err != nil {
		return "", err
	}
	return made["."], nil
}

func depth(d string) int {
	if d == "." {
		return 0
	}
	return strings.Count(d, "/") + 1
}

// quickEntry is an entry of a tree being written: mode as a tree stores
// it and hex id.
type quickEntry struct{ mode, id string }

// editedDir returns the entries of directory d once edited: its old ones
// (none when it went away meanwhile), the files set and removed in it,
// and its subdirectories written anew (made).
func editedDir(tr *treeReader, ed *quickEdits, d string, made map[string]string) (map[string]quickEntry, error) {
	out := map[string]quickEntry{}
	if !freshDir(ed, d) {
		old, _, err := tr.dir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range old {
			out[e.name] = quickEntry{e.mode, hex.EncodeToString(e.id)}
		}
	}
	for name := range out {
		if ed.remove[join2(d, name)] {
			delete(out, name)
		}
	}
	for p, e := range ed.set {
		if path.Dir(p) == d {
			out[path.Base(p)] = quickEntry{e[0], e[1]}
		}
	}
	for c, id := range made {
		if path.Dir(c) != d || c == "." {
			continue
		}
		name := path.Base(c)
		if _, isFile := ed.set[c]; isFile {
			continue // a file now; nothing can be under it
		}
		if id == "" {
			if e, ok := out[name]; ok && e.mode == "40000" {
				delete(out, name)
			}
			continue
		}
		out[name] = quickEntry{"40000", id}
	}
	return out, nil
}

func join2(d, name string) string {
	if d == "." {
		return name
	}
	return d + "/" + name
}

// freshDir reports whether d or a directory above it went away since the
// last tree: its old entries are gone.
func freshDir(ed *quickEdits, d string) bool {
	for ; d != "."; d = path.Dir(d) {
		if ed.fresh[d] {
			return true
		}
	}
	return false
}

// sortedNames orders a tree's names as git does: a tree's name as if it
// ended with "/".
func sortedNames(entries map[string]quickEntry) []string {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	key := func(n string) string {
		if entries[n].mode == "40000" {
			return n + "/"
		}
		return n
	}
	sort.Slice(names, func(i, j int) bool { return key(names[i]) < key(names[j]) })
	return names
}

// treeID is the id git gives the tree of entries.
func treeID(entries map[string]quickEntry, hexLen int) string {
	var body bytes.Buffer
	for _, n := range sortedNames(entries) {
		e := entries[n]
		raw, _ := hex.DecodeString(e.id)
		body.WriteString(e.mode + " " + n + "\x00")
		body.Write(raw)
	}
	var h hash.Hash = sha1.New()
	if hexLen == 64 {
		h = sha256.New()
	}
	h.Write([]byte("tree " + strconv.Itoa(body.Len()) + "\x00"))
	h.Write(body.Bytes())
	return hex.EncodeToString(h.Sum(nil))
}

// writeMktree adds one tree to a git mktree -z --batch input.
func writeMktree(b *bytes.Buffer, entries map[string]quickEntry) {
	for _, n := range sortedNames(entries) {
		e := entries[n]
		kind := "blob"
		switch e.mode {
		case "40000":
			kind = "tree"
		case "160000":
			kind = "commit"
		}
		fmt.Fprintf(b, "%s %s %s\t%s\x00", e.mode, kind, e.id, n)
	}
	b.WriteByte(0)
}

// mktree writes the trees of batch and checks they are the ids wanted.
func mktree(ctx context.Context, g *gitcmd.Runner, batch *bytes.Buffer, want []string) error {
	if len(want) == 0 {
		return nil
	}
	out, err := g.Run(ctx, batch, "mktree", "-z", "--batch")
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	got := strings.Fields(string(out))
	if !slices.Equal(got, want) {
		// Not what was computed: the index's way writes the tree.
		return errNotQuick
	}
	return nil
}
