package rescue

import (
	"encoding/hex"
	"path"
	"sort"
	"strings"
)

// editedTrees makes the trees along the edited paths, deepest first, and
// returns the new root tree's id and the trees to write (each tree's id
// is computed here: a child's is needed before its parent is made).
func editedTrees(tr *treeReader, ed *quickEdits) (string, []packObject, error) {
	touched := map[string][]string{} // directory → edited names in it
	children := map[string][]string{}
	mark := func(p string) {
		for d := path.Dir(p); ; d = path.Dir(d) {
			if _, ok := touched[d]; !ok {
				touched[d] = nil
				if d != "." {
					children[path.Dir(d)] = append(children[path.Dir(d)], d)
				}
			}
			if d == "." {
				return
			}
		}
	}
	for _, edits := range []map[string]bool{setPaths(ed), ed.remove} {
		for p := range edits {
			mark(p)
			touched[path.Dir(p)] = append(touched[path.Dir(p)], path.Base(p))
		}
	}
	dirs := make([]string, 0, len(touched))
	for d := range touched {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return depth(dirs[i]) > depth(dirs[j]) })
	made := map[string][]byte{} // directory → its new tree (nil: empty)
	var trees []packObject
	for _, d := range dirs {
		entries, err := editedDir(tr, ed, d, touched[d], children[d], made)
		if err != nil {
			return "", nil, err
		}
		if len(entries) == 0 {
			if d == "." {
				return "", nil, errNotQuick // an empty worktree: the index's way
			}
			made[d] = nil
			continue
		}
		t := encodeTree(entries, tr.hexLen)
		made[d] = t.id
		trees = append(trees, t)
	}
	return hex.EncodeToString(made["."]), trees, nil
}

// setPaths are the paths ed sets.
func setPaths(ed *quickEdits) map[string]bool {
	out := make(map[string]bool, len(ed.set))
	for p := range ed.set {
		out[p] = true
	}
	return out
}

func depth(d string) int {
	if d == "." {
		return 0
	}
	return strings.Count(d, "/") + 1
}

// quickEntry is an entry of a tree being written: mode as a tree stores
// it and raw id.
type quickEntry struct {
	mode string
	id   []byte
}

// editedDir returns the entries of directory d once edited: its old ones
// (none when it went away meanwhile), the files set and removed in it
// (names), and its subdirectories written anew (children, in made).
func editedDir(tr *treeReader, ed *quickEdits, d string, names, children []string, made map[string][]byte) (map[string]quickEntry, error) {
	out := map[string]quickEntry{}
	if !freshDir(ed, d) {
		old, _, err := tr.dir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range old {
			out[e.name] = quickEntry{e.mode, e.id}
		}
	}
	for _, name := range names {
		p := join2(d, name)
		if ed.remove[p] {
			delete(out, name)
		}
		if e, ok := ed.set[p]; ok {
			raw, err := hex.DecodeString(e[1])
			if err != nil {
				return nil, errNotQuick
			}
			out[name] = quickEntry{e[0], raw}
		}
	}
	for _, c := range children {
		name := path.Base(c)
		if _, isFile := ed.set[c]; isFile {
			continue // a file now; nothing can be under it
		}
		id := made[c]
		if id == nil {
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

// encodeTree returns the tree object of entries, with the id git gives
// it.
func encodeTree(entries map[string]quickEntry, hexLen int) packObject {
	var body []byte
	for _, n := range sortedNames(entries) {
		e := entries[n]
		body = append(append(append(append(body, e.mode...), ' '), n...), 0)
		body = append(body, e.id...)
	}
	return packObject{kind: packTree, id: objectID("tree", body, hexLen), body: body}
}
