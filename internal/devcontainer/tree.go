package devcontainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Limits on what is read from the tree: the files a devcontainer names are
// small, and a hostile repository must not make the host read gigabytes.
const (
	maxFileSize    = 1 << 20
	maxLinkSize    = 4096
	maxLinkHops    = 40
	modeTree       = "040000"
	modeSymlink    = "120000"
	modeGitlink    = "160000"
	modeExecutable = "100755"
)

// Errors of resolving a path in the tree.
var (
	errEscapes  = errors.New("leads out of the repository")
	errAbsolute = errors.New("is an absolute path")
	errLoop     = errors.New("has too many levels of symbolic links")
	errNotDir   = errors.New("goes through a file as if it were a directory")
	errGitlink  = errors.New("is inside a submodule, which is not part of this repository's tree")
)

// entry is one object in a tree.
type entry struct {
	Mode string
	Type string
	ID   string
}

// tree reads one committed tree of the user's repository through git
// (ls-tree, cat-file): no checkout, no worktree, nothing the agent can
// write is involved.
type tree struct {
	g     *gitcmd.Runner
	root  string
	cache map[string]map[string]entry
}

func openTree(ctx context.Context, g *gitcmd.Runner, commit string) (*tree, error) {
	if commit == "" || strings.HasPrefix(commit, "-") {
		return nil, fmt.Errorf("devcontainer: %q is not a commit", commit)
	}
	id, err := g.PeelToTree(ctx, commit)
	if errors.Is(err, gitcmd.ErrNotExist) {
		return nil, fmt.Errorf("devcontainer: %s is not a commit in this repository", commit)
	}
	if err != nil {
		return nil, fmt.Errorf("devcontainer: %w", err)
	}
	return &tree{g: g, root: id.String(), cache: map[string]map[string]entry{}}, nil
}

// list returns the entries of one tree object by name.
func (t *tree) list(ctx context.Context, id string) (map[string]entry, error) {
	if m, ok := t.cache[id]; ok {
		return m, nil
	}
	out, err := t.g.Run(ctx, nil, "ls-tree", "-z", "--full-tree", id)
	if err != nil {
		return nil, err
	}
	m := map[string]entry{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		e, name, ok := parseTreeLine(string(rec))
		if !ok {
			return nil, fmt.Errorf("ls-tree: unexpected line %q", rec)
		}
		m[name] = e
	}
	t.cache[id] = m
	return m, nil
}

// parseTreeLine parses "<mode> <type> <id>\t<path>".
func parseTreeLine(s string) (entry, string, bool) {
	meta, name, ok := strings.Cut(s, "\t")
	if !ok {
		return entry{}, "", false
	}
	f := strings.Fields(meta)
	if len(f) != 3 {
		return entry{}, "", false
	}
	return entry{Mode: f[0], Type: f[1], ID: f[2]}, name, true
}

// blob reads a blob of at most limit bytes.
func (t *tree) blob(ctx context.Context, id string, limit int64) ([]byte, error) {
	size, err := t.g.Output(ctx, "cat-file", "-s", id)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("cat-file -s: %q", size)
	}
	if n > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d this file may have", n, limit)
	}
	return t.g.Run(ctx, nil, "cat-file", "blob", id)
}

// resolve finds p (slash-separated, relative to the root) in the tree the
// way a filesystem would, following symbolic links — but only within the
// tree: a link to an absolute path, or a ".." above the root, is refused,
// as is a loop. It returns the path with every link resolved and the entry
// found (a tree for a directory). A missing path is fs.ErrNotExist.
func (t *tree) resolve(ctx context.Context, p string) (string, entry, error) {
	if path.IsAbs(p) {
		return "", entry{}, errAbsolute
	}
	type dir struct{ name, id string }
	var stack []dir
	todo := strings.Split(p, "/")
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return "", entry{}, errEscapes
			}
			stack = stack[:len(stack)-1]
			continue
		}
		cur := t.root
		if len(stack) > 0 {
			cur = stack[len(stack)-1].id
		}
		entries, err := t.list(ctx, cur)
		if err != nil {
			return "", entry{}, err
		}
		e, ok := entries[c]
		if !ok {
			return "", entry{}, fs.ErrNotExist
		}
		switch e.Mode {
		case modeSymlink:
			hops++
			if hops > maxLinkHops {
				return "", entry{}, errLoop
			}
			target, err := t.blob(ctx, e.ID, maxLinkSize)
			if err != nil {
				return "", entry{}, err
			}
			if path.IsAbs(string(target)) {
				return "", entry{}, errEscapes
			}
			// Relative to the directory holding the link: the stack.
			todo = append(strings.Split(string(target), "/"), todo...)
		case modeTree:
			stack = append(stack, dir{c, e.ID})
		case modeGitlink:
			return "", entry{}, errGitlink
		default:
			if strings.Join(todo, "") != "" {
				return "", entry{}, errNotDir
			}
			names := make([]string, 0, len(stack)+1)
			for _, d := range stack {
				names = append(names, d.name)
			}
			return path.Join(append(names, c)...), e, nil
		}
	}
	names := []string{"."}
	id := t.root
	for _, d := range stack {
		names = append(names, d.name)
		id = d.id
	}
	return path.Join(names...), entry{Mode: modeTree, Type: "tree", ID: id}, nil
}
