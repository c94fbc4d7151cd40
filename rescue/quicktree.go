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
	var batch bytes.Buffer
	var want []string
	enc := &treeEncoder{hexLen: tr.hexLen}
	for _, d := range dirs {
		entries, err := editedDir(tr, ed, d, touched[d], children[d], made)
		if err != nil {
			return "", err
		}
		if len(entries) == 0 {
			if d == "." {
				return "", errNotQuick // an empty worktree: the index's way
			}
			made[d] = nil
			continue
		}
		id := enc.encode(entries, &batch)
		made[d] = id
		want = append(want, hex.EncodeToString(id))
	}
	if err := mktree(ctx, g, &batch, want); err != nil {
		return "", err
	}
	return hex.EncodeToString(made["."]), nil
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

// treeEncoder turns entries into a tree object, reusing its buffer.
type treeEncoder struct {
	hexLen int
	body   []byte
}

// encode returns the raw id git gives the tree of entries, and adds the
// tree to a git mktree -z --batch input.
func (t *treeEncoder) encode(entries map[string]quickEntry, batch *bytes.Buffer) []byte {
	t.body = t.body[:0]
	for _, n := range sortedNames(entries) {
		e := entries[n]
		t.body = append(append(append(append(t.body, e.mode...), ' '), n...), 0)
		t.body = append(t.body, e.id...)
		kind := "blob"
		switch e.mode {
		case "40000":
			kind = "tree"
		case "160000":
			kind = "commit"
		}
		batch.WriteString(e.mode)
		batch.WriteByte(' ')
		batch.WriteString(kind)
		batch.WriteByte(' ')
		batch.Write(hex.AppendEncode(nil, e.id))
		batch.WriteByte('\t')
		batch.WriteString(n)
		batch.WriteByte(0)
	}
	batch.WriteByte(0)
	var h hash.Hash = sha1.New()
	if t.hexLen == 64 {
		h = sha256.New()
	}
	h.Write([]byte("tree " + strconv.Itoa(len(t.body)) + "\x00"))
	h.Write(t.body)
	return h.Sum(nil)
}

// mktree writes the trees of batch and checks they are the ids wanted.
func mktree(ctx context.Context, g *gitcmd.Runner, batch *bytes.Buffer, want []string) error {
	if len(want) == 0 {
		return nil
	}
	// --missing: every entry is an id just hashed or one of the last
	// tree's, and the answers are checked against the ids computed here.
	out, err := g.Run(ctx, batch, "mktree", "-z", "--batch", "--missing")
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
