package rescue

// A watched snapshot that does not read the private index: the tree is
// the last watched snapshot's tree with the reported paths changed. The
// files that changed are hashed (git hash-object, the same conversions
// update-index applies), the trees along their paths are read from the
// last tree (git cat-file --batch) and written anew, with the new blobs,
// as one pack (git index-pack, quickpack.go); nothing else is read. git
// update-index and write-tree each read and write the whole private index
// (100,000 entries: most of what a snapshot of 200 changed files cost);
// this reads none of it.
//
// The private index then lags behind the snapshots: the watch state says
// so, and the next snapshot that goes through the index (another reason,
// anything the fast way does not handle) looks at everything, which
// brings it up to date. Only what the fast way is sure to do as git add
// --all would is done here; anything else — a symlink, a name git may
// refuse, an ignore or attributes file, a nested repository, a path the
// agent tracks that the tree lacks — is left to the index.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// maxQuickPaths: more reported paths than this go through the index.
const maxQuickPaths = 5_000

// treeEntry is one entry of a tree object.
type treeEntry struct {
	mode string // as a tree stores it: "100644", "40000"
	name string
	id   []byte // raw
}

func (e treeEntry) isTree() bool { return e.mode == "40000" }

// errNotQuick: the fast way does not handle what changed.
var errNotQuick = errors.New("not for the fast way")

// quickFile is a file the fast way stages.
type quickFile struct {
	path, mode string
	inTree     bool
	size       int64
}

// quickEdits are the changes to the last tree.
type quickEdits struct {
	// set: path → new entry (mode, hex id); remove: paths to drop.
	set    map[string][2]string
	remove map[string]bool
	// fresh are directories that went away (their old entries are not
	// kept, whatever comes in their place).
	fresh map[string]bool
}

// quickTree returns the tree of the worktree: base (the tree at the
// watcher's last token) with the reported paths as they are now, the
// files left out for their size, and the change from base (nil when it
// cannot be told path by path). errNotQuick when the index must do it.
func (s *Local) quickTree(ctx context.Context, g *gitcmd.Runner, v *agentView, base string, paths []string) (quickResult, error) {
	if len(paths) > maxQuickPaths || base == "" {
		return quickResult{}, errNotQuick
	}
	tr, err := newTreeReader(ctx, g, base, len(base))
	if err != nil {
		return quickResult{}, err
	}
	defer tr.close()
	ed := &quickEdits{set: map[string][2]string{}, remove: map[string]bool{}, fresh: map[string]bool{}}
	files, err := s.quickClassify(tr, paths, ed)
	if err != nil {
		return quickResult{}, err
	}
	stage, large, err := s.quickFilter(ctx, g, v, files, ed)
	if err != nil || len(stage) == 0 && len(ed.remove) == 0 && len(ed.fresh) == 0 {
		return quickResult{tree: base, large: large, delta: &delta{base: base}}, err
	}
	// What the change count needs of the baseline is read meanwhile.
	look := s.counting.start(ctx, s.host(), base, editedPaths(stage, ed))
	blobs, err := s.quickHash(ctx, g, stage, ed)
	if err != nil {
		return quickResult{}, err
	}
	tree, trees, err := editedTrees(tr, ed)
	if err != nil {
		return quickResult{}, err
	}
	if err := writePack(ctx, g, append(blobs, trees...), tr.hexLen); err != nil {
		return quickResult{}, err
	}
	d, err := quickDelta(tr, ed, stage)
	if d != nil {
		d.look = look
	}
	return quickResult{tree: tree, large: large, delta: d}, err
}

// quickResult is what the fast way wrote.
type quickResult struct {
	tree  string
	large []LargeFile
	delta *delta
}

// quickClassify looks at each reported path (lstat only): gone, a
// directory, or a regular file to stage.
func (s *Local) quickClassify(tr *treeReader, paths []string, ed *quickEdits) ([]quickFile, error) {
	dirs := map[string]bool{} // leading directory → a plain directory of the worktree
	var files []quickFile
	sort.Strings(paths)
	if err := tr.prefetch(paths); err != nil {
		return nil, err
	}
	for _, p := range paths {
		clean := strings.TrimSuffix(p, "/")
		if clean == "" || !quickName(clean) {
			return nil, errNotQuick
		}
		if clean != p {
			ed.fresh[clean] = true
			ed.remove[clean] = true
			continue
		}
		if !s.plainDirs(path.Dir(p), dirs) {
			ed.remove[p] = true // gone, or beyond a symlink: as update-index drops it
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.Worktree, p))
		switch {
		case errors.Is(err, os.ErrNotExist):
			ed.remove[p] = true
		case err != nil:
			return nil, errNotQuick
		case fi.IsDir():
			if e, ok, err := tr.entry(p); err != nil {
				return nil, err
			} else if ok && !e.isTree() {
				ed.remove[p] = true
			}
		case fi.Mode().IsRegular():
			e, ok, err := tr.entry(p)
			if err != nil {
				return nil, err
			}
			if ok && e.mode == "160000" {
				return nil, errNotQuick
			}
			mode := "100644"
			if fi.Mode()&0o100 != 0 {
				mode = "100755"
			}
			files = append(files, quickFile{path: p, mode: mode, inTree: ok && !e.isTree(), size: fi.Size()})
		default:
			return nil, errNotQuick // a symlink, a FIFO, a socket: the index's way
		}
	}
	return files, nil
}

// quickName reports whether every part of p is a name the fast way may
// store as git add would: not .git nor any name git may refuse or that
// changes how other files are read (.gitignore, .gitattributes,
// .gitmodules, NTFS short names, trailing dots and spaces).
func quickName(p string) bool {
	for _, part := range strings.Split(p, "/") {
		low := strings.ToLower(part)
		if part == "" || strings.HasPrefix(low, ".git") || strings.HasPrefix(low, "git~") ||
			strings.HasSuffix(part, ".") || strings.HasSuffix(part, " ") || strings.ContainsAny(part, "\\\n") {
			return false
		}
	}
	return true
}

// plainDirs reports whether dir and each directory above it in the
// worktree is a plain directory, not a symlink (known caches the
// answers).
func (s *Local) plainDirs(dir string, known map[string]bool) bool {
	for d := dir; d != "."; d = path.Dir(d) {
		if ok, seen := known[d]; seen {
			if !ok {
				return false
			}
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.Worktree, d))
		ok := err == nil && fi.IsDir()
		known[d] = ok
		if !ok {
			return false
		}
	}
	return true
}

// quickFilter leaves out the untracked files an ignore rule covers and
// the files too large; it returns the files to hash. A new file under a
// nested repository is the index's to handle.
func (s *Local) quickFilter(ctx context.Context, g *gitcmd.Runner, v *agentView, files []quickFile, ed *quickEdits) ([]quickFile, []LargeFile, error) {
	var stage []quickFile
	var large []LargeFile
	var untracked bytes.Buffer
	for _, f := range files {
		if s.underRepo(f.path) {
			return nil, nil, errNotQuick
		}
		if l, ok := s.tooBig(v, f.path, f.inTree); ok {
			large = append(large, l)
			if f.inTree {
				ed.remove[f.path] = true
			}
			continue
		}
		if !f.inTree {
			untracked.WriteString(f.path + "\x00")
		}
		stage = append(stage, f)
	}
	if untracked.Len() == 0 {
		return stage, large, nil
	}
	out, err := g.Run(ctx, &untracked, "check-ignore", "--no-index", "-z", "--stdin")
	var ge *gitcmd.Error
	if err != nil && !(errors.As(err, &ge) && ge.Code == 1) {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	ignored := map[string]bool{}
	for _, p := range gitcmd.SplitLines(out) {
		ignored[p] = true
	}
	kept := stage[:0]
	for _, f := range stage {
		switch {
		case !ignored[f.path]:
			kept = append(kept, f)
		case s.tracks(v, f.path, false):
			// Ignored, and the agent tracks it (git add -f): the index's
			// way stages it as the agent's git did.
			return nil, nil, errNotQuick
		}
	}
	return kept, large, nil
}

// underRepo reports whether a leading directory of p holds a .git.
func (s *Local) underRepo(p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if _, err := os.Lstat(filepath.Join(s.Worktree, d, ".git")); err == nil {
			return true
		}
	}
	return false
}

// errChanged: a file was not what it was a moment before.
var errChanged = fmt.Errorf("a file changed while the snapshot read it: %w", errNotQuick)

// quickHash finds the files' blob ids as git add would store them and
// sets them in ed; it returns the blobs the pack carries, as read
// (quickpack.go). The others (stored otherwise than they are in the
// worktree, too large to hold, or changed since git read them) are
// written here by git hash-object -w, which must give the same ids.
func (s *Local) quickHash(ctx context.Context, g *gitcmd.Runner, files []quickFile, ed *quickEdits) ([]packObject, error) {
	if len(files) == 0 {
		return nil, nil
	}
	ids, err := s.hashParts(ctx, g, files, false)
	if err != nil {
		return nil, err
	}
	var blobs []packObject
	var loose []quickFile
	var looseIDs []string
	budget := int64(packBudget)
	for i, f := range files {
		var b *packObject
		if f.size <= min(packFileMax, budget) {
			if b, err = packable(s.Worktree, f.path, ids[i], min(packFileMax, budget)); err != nil {
				return nil, errNotQuick
			}
		}
		if b != nil {
			budget -= int64(len(b.body))
			blobs = append(blobs, *b)
		} else {
			loose, looseIDs = append(loose, f), append(looseIDs, ids[i])
		}
	}
	if len(loose) > 0 {
		written, err := s.hashFiles(ctx, g, loose, true)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(written, looseIDs) {
			return nil, errChanged
		}
	}
	for i, f := range files {
		ed.set[f.path] = [2]string{f.mode, ids[i]}
		delete(ed.remove, f.path)
	}
	return blobs, nil
}

// hashParts gives the files' blob ids (and with write, writes the blobs)
// with git hash-object: two processes for many files, one on each core,
// as the agent is paused while they read.
func (s *Local) hashParts(ctx context.Context, g *gitcmd.Runner, files []quickFile, write bool) ([]string, error) {
	parts := [][]quickFile{files}
	if len(files) >= 64 {
		parts = [][]quickFile{files[:len(files)/2], files[len(files)/2:]}
	}
	hashed := make([][]string, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashed[i], errs[i] = s.hashFiles(ctx, g, part, write)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var ids []string
	for i := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		ids = append(ids, hashed[i]...)
	}
	return ids, nil
}

// hashFiles gives the blob ids of files with one git hash-object (with
// write, writing the blobs), run in the worktree so each path's
// attributes apply as update-index applies them; errNotQuick when it
// cannot read one (the index's way skips it and says so).
func (s *Local) hashFiles(ctx context.Context, g *gitcmd.Runner, files []quickFile, write bool) ([]string, error) {
	var in bytes.Buffer
	for _, f := range files {
		in.WriteString(f.path + "\n")
	}
	args := []string{"hash-object", "--stdin-paths"}
	if write {
		args = append(args, "-w")
	}
	cmd := g.Command(ctx, args...)
	cmd.Dir = s.Worktree
	cmd.Stdin = &in
	out, err := cmd.Output()
	ids := strings.Fields(string(out))
	if err != nil || len(ids) != len(files) {
		return nil, errNotQuick
	}
	return ids, nil
}
