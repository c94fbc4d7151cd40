package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// MergeTreeRequest names the two sides a merge joins.
type MergeTreeRequest struct {
	// Ours and Theirs are the commits merged, or with Base the trees.
	// Full names are required: git names a file it moves aside after the
	// side it came from (path~<commit>), and the conflict's paths are read
	// back through them.
	Ours, Theirs Hash
	// Base, when set, is the merge base: Ours and Theirs are then trees,
	// merged as changes from Base. (git 2.39 has no --merge-base: two
	// throwaway commits whose only parent is Base are merged.)
	Base Hash
	// OursLabel and TheirsLabel, when set, name the sides in the conflict
	// markers of a merge with Base (instead of the throwaway commits).
	OursLabel, TheirsLabel string
}

// MergeTreeConflictError is the result of a merge with conflicts.
type MergeTreeConflictError struct {
	// Tree is the merged tree as git wrote it, conflict markers included.
	Tree Hash
	// Paths are the conflicting paths, sorted, each once, as they are named
	// in the commits merged: a file git moved aside to path~<commit>
	// because a directory was in its way is listed as path.
	Paths []string
	// Messages are git's messages about the merge, in its order.
	Messages []MergeTreeMessage
}

// MergeTreeMessage is one of git's informational messages about a merge.
type MergeTreeMessage struct {
	// Paths the message is about, as git names them (moved-aside names
	// included).
	Paths []string
	// Type is git's stable short description, such as "CONFLICT (contents)"
	// or "Auto-merging".
	Type string
	// Text is the message for people; it may change between git versions.
	Text string
}

func (e *MergeTreeConflictError) Error() string {
	quoted := make([]string, len(e.Paths))
	for i, p := range e.Paths {
		quoted[i] = strconv.Quote(p)
	}
	return fmt.Sprintf("merge conflict in %d path(s): %s", len(e.Paths), strings.Join(quoted, ", "))
}

// MergeTree merges two commits without a worktree or index and returns the
// merged tree (written to the object store). A merge with conflicts returns
// a *MergeTreeConflictError.
func (r *Runner) MergeTree(ctx context.Context, req MergeTreeRequest) (Hash, error) {
	if req.Base != "" {
		return r.mergeFromBase(ctx, req)
	}
	for _, h := range []Hash{req.Ours, req.Theirs} {
		if _, err := ParseHash(string(h)); err != nil {
			return "", fmt.Errorf("merge-tree: %w", err)
		}
	}
	out, err := r.Run(ctx, nil, "merge-tree", "--write-tree", "-z", req.Ours.String(), req.Theirs.String())
	if err != nil && ExitCode(err) != 1 {
		return "", err
	}
	res, perr := parseMergeTree(out)
	if perr != nil {
		return "", fmt.Errorf("git merge-tree: %w", perr)
	}
	if err == nil {
		return res.tree, nil
	}
	return "", &MergeTreeConflictError{
		Tree:     res.tree,
		Paths:    res.conflictPaths(req.Ours, req.Theirs),
		Messages: res.messages,
	}
}

// mergeTreeOutput is git merge-tree --write-tree -z's output.
type mergeTreeOutput struct {
	tree Hash
	// files are the conflicted file info entries' paths, as written (one
	// per stage).
	files    []string
	messages []MergeTreeMessage
}

// parseMergeTree reads git merge-tree --write-tree -z output:
//
//	<tree> NUL
//	( <mode> SP <object> SP <stage> TAB <path> NUL )*   conflicted file info
//	NUL
//	( <n> NUL <path> NUL ×n <type> NUL <message> NUL )*  messages
//
// A clean merge stops after the tree.
func parseMergeTree(out []byte) (*mergeTreeOutput, error) {
	tokens := strings.Split(string(out), "\x00")
	// Every token is NUL-terminated: the last split element is empty.
	if len(tokens) < 2 || tokens[len(tokens)-1] != "" {
		return nil, fmt.Errorf("output not NUL-terminated: %q", out)
	}
	tokens = tokens[:len(tokens)-1]
	tree, err := ParseHash(tokens[0])
	if err != nil {
		return nil, err
	}
	res := &mergeTreeOutput{tree: tree}
	i := 1
	for ; i < len(tokens) && tokens[i] != ""; i++ {
		info, path, ok := strings.Cut(tokens[i], "\t")
		if !ok || len(strings.Fields(info)) != 3 {
			return nil, fmt.Errorf("bad conflicted file entry %q", tokens[i])
		}
		res.files = append(res.files, path)
	}
	i++ // the empty token ending the file info
	for i < len(tokens) {
		n, err := strconv.Atoi(tokens[i])
		if err != nil || n < 0 || i+n+2 >= len(tokens) {
			return nil, fmt.Errorf("bad message at %q", tokens[i])
		}
		m := MergeTreeMessage{
			Paths: slices.Clone(tokens[i+1 : i+1+n]),
			Type:  tokens[i+1+n],
			Text:  strings.TrimSuffix(tokens[i+2+n], "\n"),
		}
		res.messages = append(res.messages, m)
		i += n + 3
	}
	return res, nil
}

// conflictPaths are the conflicting paths as named in the commits merged.
func (o *mergeTreeOutput) conflictPaths(ours, theirs Hash) []string {
	paths := o.files
	if len(paths) == 0 {
		// Not seen from git, but a conflict must never list nothing.
		for _, m := range o.messages {
			if strings.HasPrefix(m.Type, "CONFLICT") {
				paths = append(paths, m.Paths...)
			}
		}
	}
	var out []string
	for _, p := range paths {
		out = append(out, unmangle(p, ours, theirs))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unmangle undoes git's name for a file it moved aside: path~<side>, plus
// _<n> when that name was taken too. The sides are the commits as given to
// git (a side given by a branch name would appear with "/" written as "_").
func unmangle(p string, sides ...Hash) string {
	for _, side := range sides {
		mark := "~" + side.String()
		i := strings.LastIndex(p, mark)
		if i <= 0 {
			continue
		}
		rest := p[i+len(mark):]
		if rest == "" {
			return p[:i]
		}
		if n, ok := strings.CutPrefix(rest, "_"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return p[:i]
		}
	}
	return p
}

// mergeFromBase merges two trees as changes from req.Base: the sides are
// committed with Base as their only parent, so it is their merge base.
func (r *Runner) mergeFromBase(ctx context.Context, req MergeTreeRequest) (Hash, error) {
	parents := []Hash{req.Base}
	ours, err := r.CommitTree(ctx, CommitTreeRequest{Tree: req.Ours, Parents: parents, Message: "merge: ours\n"})
	if err != nil {
		return "", err
	}
	theirs, err := r.CommitTree(ctx, CommitTreeRequest{Tree: req.Theirs, Parents: parents, Message: "merge: theirs\n"})
	if err != nil {
		return "", err
	}
	tree, err := r.MergeTree(ctx, MergeTreeRequest{Ours: ours, Theirs: theirs})
	conflict, ok := errors.AsType[*MergeTreeConflictError](err)
	if !ok || req.OursLabel == "" {
		return tree, err
	}
	conflict.Tree, err = r.relabel(ctx, conflict.Tree, conflict.Paths, map[string]string{
		"<<<<<<< " + ours.String():   "<<<<<<< " + firstLine(req.OursLabel),
		">>>>>>> " + theirs.String(): ">>>>>>> " + firstLine(req.TheirsLabel),
	})
	if err != nil {
		return "", err
	}
	return "", conflict
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// relabel rewrites the conflict markers of the conflicted files of tree,
// and returns the tree with them.
func (r *Runner) relabel(ctx context.Context, tree Hash, paths []string, labels map[string]string) (Hash, error) {
	tmp, err := os.MkdirTemp("", "git-sandbox-merge-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ix := &Runner{GitDir: r.GitDir, IndexFile: filepath.Join(tmp, "index")}
	if err := ix.ReadTree(ctx, ReadTreeRequest{Tree: tree.String()}); err != nil {
		return "", err
	}
	changed := false
	for _, p := range paths {
		did, err := r.relabelFile(ctx, ix, tree, p, labels)
		if err != nil {
			return "", err
		}
		changed = changed || did
	}
	if !changed {
		return tree, nil
	}
	out, err := ix.Output(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	return ParseHash(out)
}

// relabelFile rewrites the markers of one file of tree into the index ix;
// it reports whether there were any.
func (r *Runner) relabelFile(ctx context.Context, ix *Runner, tree Hash, p string, labels map[string]string) (bool, error) {
	out, err := r.Run(ctx, nil, "ls-tree", "-z", "--full-tree", tree.String(), "--", p)
	if err != nil || len(out) == 0 {
		return false, nil
	}
	meta, _, _ := strings.Cut(strings.TrimSuffix(string(out), "\x00"), "\t")
	f := strings.Fields(meta)
	if len(f) != 3 || f[1] != "blob" || f[0] == "120000" {
		return false, nil
	}
	content, err := r.Run(ctx, nil, "cat-file", "blob", f[2])
	if err != nil {
		return false, err
	}
	lines := bytes.SplitAfter(content, []byte("\n"))
	hit := false
	for i, line := range lines {
		for from, to := range labels {
			if bytes.HasPrefix(line, []byte(from)) {
				lines[i] = append([]byte(to), line[len(from):]...)
				hit = true
			}
		}
	}
	if !hit {
		return false, nil
	}
	id, err := r.Run(ctx, bytes.NewReader(bytes.Join(lines, nil)), "hash-object", "-w", "--no-filters", "--stdin")
	if err != nil {
		return false, err
	}
	_, err = ix.Run(ctx, nil, "update-index", "--cacheinfo", f[0]+","+strings.TrimSpace(string(id))+","+p)
	return err == nil, err
}
