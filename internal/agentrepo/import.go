package agentrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// ImportOptions describe a pack of a worktree's tree brought back from a
// sandbox on a remote engine (copy mode).
type ImportOptions struct {
	// CommonDir is the user's repository, where the objects go.
	CommonDir string
	// Pack is the pack stream, as the engine's helper wrote it.
	Pack io.Reader
	// Tree is the tree the pack is said to complete.
	Tree string
	// Known is a tree the user's store already has and trusts (the newest
	// snapshot's), or "": entries equal to its entries are not checked
	// again.
	Known string
	// Budget bounds the pack's size (Total) and each new file (MaxObject).
	Budget Budget
}

// ImportTree takes a pack from an untrusted source into the user's
// repository only once every object in it has passed git index-pack
// --strict and the tree it completes has passed the checks sync applies
// to the agent's trees (no path git could take for .git, .gitmodules
// checked, only blobs, trees and gitlinks, every object present, sizes in
// budget). The pack is indexed in a quarantine directory next to the
// store (borrowing the store as an alternate) and moved in at the end;
// a refused pack leaves nothing behind.
//
// With a known tree, it returns what differs from it, file by file, as
// the checks listed it: the snapshot counts its cost and changes from
// that, not from diffs of its own.
func ImportTree(ctx context.Context, o ImportOptions) ([]TreeChange, error) {
	if !hexID.MatchString(o.Tree) {
		return nil, fmt.Errorf("%q is not an object id", termsafe.String(o.Tree))
	}
	objects := filepath.Join(o.CommonDir, "objects")
	removeStaleQuarantines(objects)
	quarantine, err := os.MkdirTemp(objects, quarantinePrefix)
	if err != nil {
		return nil, fmt.Errorf("import snapshot: %w", err)
	}
	defer os.RemoveAll(quarantine)
	if err := os.MkdirAll(filepath.Join(quarantine, "pack"), 0o755); err != nil {
		return nil, err
	}
	q := &gitcmd.Runner{
		GitDir: o.CommonDir, ObjectDir: quarantine, Isolated: true,
		Env:    []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects},
		Config: []string{"core.bigFileThreshold=16m"},
	}
	if err := IndexGuarded(ctx, q, o.Pack, o.Budget, "the snapshot's new files"); err != nil {
		return nil, refuseTree(err)
	}
	changes, err := checkImportedTree(ctx, q, o)
	if err != nil {
		var ue *usererr.Error
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, refuseTree(err)
	}
	if err := migrate(quarantine, objects); err != nil {
		return nil, err
	}
	return changes, nil
}

// TreeChange is one file or gitlink that differs between the known tree
// and an imported one: its mode and id in each (empty where it is not)
// and, for a blob the imported tree has, its size.
type TreeChange struct {
	Path           string
	OldMode, OldID string
	NewMode, NewID string
	Size           int64
}

// checkImportedTree checks the tree in the quarantined store: what differs
// from the known tree (the whole tree without one), which is all the pack
// can have added. With a known tree, it returns what differs.
func checkImportedTree(ctx context.Context, q *gitcmd.Runner, o ImportOptions) ([]TreeChange, error) {
	if t, err := q.Output(ctx, "cat-file", "-t", o.Tree); err != nil || t != "tree" {
		return nil, fmt.Errorf("%s is not a tree the snapshot brought (%v)", o.Tree, err)
	}
	// Every object reachable from the tree is there (gitlinks excepted);
	// below the known tree the user's store has them all. Checked while
	// the tree's entries are listed (both read only): a tree that is not
	// complete is reported as that, whatever the listing said.
	args := []string{"rev-list", "--objects", "--quiet", o.Tree}
	if o.Known != "" {
		args = append(args, "--not", o.Known)
	}
	complete := make(chan error, 1)
	go func() {
		_, err := q.Run(ctx, nil, args...)
		complete <- err
	}()
	entries, changes, err := treeEntries(ctx, q, o)
	if cerr := <-complete; cerr != nil {
		return nil, fmt.Errorf("the snapshot's tree is incomplete: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	sizes, err := checkEntries(ctx, q, o, entries)
	if err != nil {
		return nil, err
	}
	for i, c := range changes {
		changes[i].Size = sizes[c.NewID]
	}
	return changes, nil
}

// treeEntry is an entry of a snapshot's tree.
type treeEntry struct{ mode, id, path string }

// treeEntries lists what the pack can have added: the entries that differ
// from the known tree (deletions left out), or the whole tree without one.
// With a known tree, it also returns the files and gitlinks that differ.
func treeEntries(ctx context.Context, q *gitcmd.Runner, o ImportOptions) ([]treeEntry, []TreeChange, error) {
	if o.Known == "" {
		entries, err := wholeTree(ctx, q, o.Tree)
		return entries, nil, err
	}
	out, err := q.Run(ctx, nil, "diff-tree", "-r", "-t", "-z", "--no-renames", "--raw", "--full-index", o.Known, o.Tree)
	if err != nil {
		return nil, nil, err
	}
	var entries []treeEntry
	var changes []TreeChange
	// ":oldmode newmode oldid newid status\0path\0" per change.
	recs := gitcmd.SplitLines(out)
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(strings.TrimPrefix(recs[i], ":"))
		if len(f) != 5 {
			return nil, nil, fmt.Errorf("unreadable tree change %q", termsafe.String(recs[i]))
		}
		p := recs[i+1]
		if f[4] != "D" {
			entries = append(entries, treeEntry{mode: f[1], id: f[3], path: p})
		}
		c := TreeChange{Path: p}
		if f[0] != "000000" && f[0] != "040000" {
			c.OldMode, c.OldID = f[0], f[2]
		}
		if f[1] != "000000" && f[1] != "040000" {
			c.NewMode, c.NewID = f[1], f[3]
		}
		if c.OldMode != "" || c.NewMode != "" {
			changes = append(changes, c)
		}
	}
	return entries, changes, nil
}

// wholeTree lists every entry of tree.
func wholeTree(ctx context.Context, q *gitcmd.Runner, tree string) ([]treeEntry, error) {
	out, err := q.Run(ctx, nil, "ls-tree", "-r", "-t", "-z", "--full-tree", tree)
	if err != nil {
		return nil, err
	}
	var entries []treeEntry
	for _, rec := range gitcmd.SplitLines(out) {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("unreadable tree entry %q", termsafe.String(rec))
		}
		entries = append(entries, treeEntry{mode: f[0], id: f[2], path: p})
	}
	return entries, nil
}

// checkEntries checks the paths, modes, .gitmodules files and sizes of a
// snapshot's new entries. It returns the size of each blob among them.
func checkEntries(ctx context.Context, q *gitcmd.Runner, o ImportOptions, entries []treeEntry) (map[string]int64, error) {
	var blobs []treeEntry
	for _, e := range entries {
		if err := CheckPath(e.path); err != nil {
			return nil, fmt.Errorf("tree %w", err)
		}
		switch e.mode {
		case "040000", "160000":
			continue
		case "100644", "100755", "120000":
		default:
			return nil, fmt.Errorf("%s has mode %s", termsafe.String(e.path), e.mode)
		}
		blobs = append(blobs, e)
		if IsGitmodules(filepath.Base(e.path)) {
			if err := checkGitmodulesEntry(ctx, q, e); err != nil {
				return nil, err
			}
		}
	}
	if len(blobs) == 0 || o.Budget.MaxObject <= 0 && o.Known == "" {
		// No size is asked for.
		return nil, nil
	}
	ids := make([]string, len(blobs))
	for i, b := range blobs {
		ids[i] = b.id
	}
	sizes, err := q.ObjectSizes(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]int64, len(ids))
	for i, n := range sizes {
		if o.Budget.MaxObject > 0 && n > o.Budget.MaxObject {
			return nil, &budgetError{msg: fmt.Sprintf("the file %s is %d bytes, more than %d", termsafe.String(blobs[i].path), n, o.Budget.MaxObject), setting: o.Budget.ObjectSetting}
		}
		byID[ids[i]] = n
	}
	return byID, nil
}

// checkGitmodulesEntry checks a .gitmodules entry: a plain file whose
// content is one git takes safely.
func checkGitmodulesEntry(ctx context.Context, q *gitcmd.Runner, e treeEntry) error {
	if filepath.Base(e.path) != ".gitmodules" || e.mode != "100644" {
		return fmt.Errorf("%q is not a plain .gitmodules file", termsafe.String(e.path))
	}
	b, err := q.Run(ctx, nil, "cat-file", "blob", e.id)
	if err != nil {
		return err
	}
	if err := CheckGitmodules(b); err != nil {
		return fmt.Errorf("%s: %w", termsafe.String(e.path), err)
	}
	return nil
}

// quarantinePrefix names the quarantine directories in the object store.
const quarantinePrefix = "incoming-sandbox-"

// removeStaleQuarantines deletes what an import killed midway left: its
// quarantine, an hour old or more (a running import's is minutes old at
// most, and its own).
func removeStaleQuarantines(objects string) {
	ents, err := os.ReadDir(objects)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), quarantinePrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
			_ = os.RemoveAll(filepath.Join(objects, e.Name()))
		}
	}
}

// migrate moves the quarantined packs into the store: each .pack before
// its .idx, so a reader never finds an index without its pack.
func migrate(quarantine, objects string) error {
	ents, err := os.ReadDir(filepath.Join(quarantine, "pack"))
	if err != nil {
		return err
	}
	var idx []string
	for _, e := range ents {
		name := e.Name()
		from, to := filepath.Join(quarantine, "pack", name), filepath.Join(objects, "pack", name)
		if strings.HasSuffix(name, ".idx") {
			idx = append(idx, name)
			continue
		}
		if err := os.Rename(from, to); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("import snapshot: %w", err)
		}
	}
	for _, name := range idx {
		if err := os.Rename(filepath.Join(quarantine, "pack", name), filepath.Join(objects, "pack", name)); err != nil {
			return fmt.Errorf("import snapshot: %w", err)
		}
	}
	return nil
}

// IndexGuarded runs index-pack --strict in q's object directory on a
// pack from an untrusted source, through a PackGuard: what breaks b stops
// the stream before index-pack reads it, and the error says which budget
// (IsBudget). what names the pack's content in messages.
func IndexGuarded(ctx context.Context, q *gitcmd.Runner, pack io.Reader, b Budget, what string) error {
	g := GuardPack(pack, b, what)
	_, err := q.Run(ctx, g, "index-pack", "--stdin", "--strict")
	// Asked before Close: a guard that cut the stream said why before
	// index-pack saw it end; one still going when index-pack failed on
	// its own has nothing to say.
	gerr := g.Err()
	g.Close()
	if gerr != nil {
		return gerr
	}
	return err
}

// refuseTree is the user's error for a snapshot that was not taken in.
func refuseTree(err error) error {
	e := usererr.Wrap(err, "the sandbox's files were refused: %v", err).
		Hint("nothing was copied into your repository and the newest snapshot is unchanged; inspect the sandbox with git sandbox exec").
		WithCode(usererr.ExitRefused)
	var be *budgetError
	if errors.As(err, &be) && be.setting != "" {
		e.Hint("if it belongs in the work, raise %s in your config", be.setting)
	}
	return e
}
