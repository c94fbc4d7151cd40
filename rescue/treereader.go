package rescue

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// treeReader reads the trees of one root tree from the user's store
// through a git cat-file --batch, each directory once.
type treeReader struct {
	b *gitcmd.Batch
	// root names the root tree (an id, or a name cat-file resolves such
	// as commit^{tree}); hexLen is the length of the store's ids.
	root   string
	hexLen int
	dirs   map[string][]treeEntry // directory → its entries (nil: not a tree)
}

func newTreeReader(ctx context.Context, g *gitcmd.Runner, root string, hexLen int) (*treeReader, error) {
	b, err := g.StartBatch(ctx, "cat-file", "--batch")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &treeReader{b: b, root: root, hexLen: hexLen, dirs: map[string][]treeEntry{}}, nil
}

func (r *treeReader) close() { _ = r.b.Close() }

// object reads the object called name: its type and content.
func (r *treeReader) object(name string) (string, []byte, error) {
	if _, err := io.WriteString(r.b.In, name+"\n"); err != nil {
		return "", nil, fmt.Errorf("snapshot: git cat-file: %w", err)
	}
	return r.next(name)
}

// next reads the answer to the request for name.
func (r *treeReader) next(name string) (string, []byte, error) {
	head, err := r.b.Out.ReadString('\n')
	f := strings.Fields(head)
	if err != nil || len(f) != 3 {
		return "", nil, fmt.Errorf("snapshot: git cat-file: %s: %q", name, head)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return "", nil, fmt.Errorf("snapshot: git cat-file: %q", head)
	}
	body := make([]byte, n+1)
	if _, err := io.ReadFull(r.b.Out, body); err != nil {
		return "", nil, fmt.Errorf("snapshot: git cat-file: %w", err)
	}
	return f[1], body[:n], nil
}

// tree parses an answer that must be a tree.
func (r *treeReader) tree(name, typ string, body []byte) ([]treeEntry, error) {
	if typ != "tree" {
		return nil, fmt.Errorf("snapshot: git cat-file: %s is a %s, not a tree", name, typ)
	}
	es, err := parseTree(body, r.hexLen/2)
	if es == nil && err == nil {
		es = []treeEntry{}
	}
	return es, err
}

func parseTree(b []byte, idLen int) ([]treeEntry, error) {
	var out []treeEntry
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		nul := bytes.IndexByte(b, 0)
		if sp < 0 || nul < sp || len(b) < nul+1+idLen {
			return nil, errors.New("snapshot: a tree object that cannot be read")
		}
		out = append(out, treeEntry{mode: string(b[:sp]), name: string(b[sp+1 : nul]), id: b[nul+1 : nul+1+idLen]})
		b = b[nul+1+idLen:]
	}
	return out, nil
}

// idOf returns the name to ask for directory d: the root's, or the id
// its parent (read already) gives it; "" when it is no tree there.
func (r *treeReader) idOf(d string) string {
	if d == "." || d == "" {
		return r.root
	}
	for _, e := range r.dirs[path.Dir(d)] {
		if e.name == path.Base(d) && e.isTree() {
			return hex.EncodeToString(e.id)
		}
	}
	return ""
}

// dir returns the entries of directory d of the root tree; ok is false
// when it is no tree there.
func (r *treeReader) dir(d string) ([]treeEntry, bool, error) {
	if es, seen := r.dirs[d]; seen {
		return es, es != nil, nil
	}
	if d != "." && d != "" {
		if _, ok, err := r.dir(path.Dir(d)); err != nil || !ok {
			r.dirs[d] = nil
			return nil, false, err
		}
	}
	if err := r.readLevel([]string{d}); err != nil {
		return nil, false, err
	}
	es := r.dirs[d]
	return es, es != nil, nil
}

// entry returns the entry at p in the root tree.
func (r *treeReader) entry(p string) (treeEntry, bool, error) {
	es, ok, err := r.dir(path.Dir(p))
	if err != nil || !ok {
		return treeEntry{}, false, err
	}
	for _, e := range es {
		if e.name == path.Base(p) {
			return e, true, nil
		}
	}
	return treeEntry{}, false, nil
}

// prefetch reads the directories along paths, each level's in one go
// (all its requests written, then all the answers read): a few round
// trips with git instead of one for each directory.
func (r *treeReader) prefetch(paths []string) error {
	var levels [][]string
	seen := map[string]bool{}
	for _, p := range paths {
		for d := path.Dir(strings.TrimSuffix(p, "/")); !seen[d]; d = path.Dir(d) {
			seen[d] = true
			k := depth(d)
			for len(levels) <= k {
				levels = append(levels, nil)
			}
			levels[k] = append(levels[k], d)
			if d == "." {
				break
			}
		}
	}
	for _, level := range levels {
		if err := r.readLevel(level); err != nil {
			return err
		}
	}
	return nil
}

// readLevel reads the directories dirs (their parents read already).
func (r *treeReader) readLevel(dirs []string) error {
	var ask []string
	var ids []string
	for _, d := range dirs {
		if _, done := r.dirs[d]; done {
			continue
		}
		id := r.idOf(d)
		if id == "" {
			r.dirs[d] = nil
			continue
		}
		ask, ids = append(ask, d), append(ids, id)
	}
	if len(ask) == 0 {
		return nil
	}
	// Written from a goroutine: git answers while it reads, and the
	// answers are read here meanwhile.
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(r.b.In, strings.Join(ids, "\n")+"\n")
		written <- err
	}()
	for i, d := range ask {
		typ, body, err := r.next(ids[i])
		if err != nil {
			return err
		}
		es, err := r.tree(ids[i], typ, body)
		if err != nil {
			return err
		}
		r.dirs[d] = es
	}
	if err := <-written; err != nil {
		return fmt.Errorf("snapshot: git cat-file: %w", err)
	}
	return nil
}
