// Package land applies a sandbox's change to its base branch: the change
// baseline → final snapshot, 3-way merged onto the base branch's current
// tip with the baseline as merge base, on trees and never in a checkout;
// one commit (or a merge keeping the agent's commits); the base ref moved
// by compare-and-swap; and a checkout of the base branch brought along
// when it is clean where the change touches it.
//
// Works with git 2.38 and later: git 2.39 has merge-tree --write-tree but
// not --merge-base, so the merge base is forced by merging two throwaway
// commits whose only parent is the baseline.
package land

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/dieat"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Plan is a computed land, not yet applied.
type Plan struct {
	// Ref is the branch landed on (refs/heads/…) and Tip its commit.
	Ref string
	Tip gitcmd.Hash
	// Baseline and Final are the snapshots the change runs between.
	Baseline, Final string
	// Tree is the merged tree the new commit gets.
	Tree gitcmd.Hash
	// Changes are the paths the new commit changes on the base, with flags.
	Changes []review.Entry
	Flags   []review.Flag
	// Checkout is the worktree that has Ref checked out, if any, and
	// CheckoutGitDir its git directory.
	Checkout       *worktree.Entry
	CheckoutGitDir string
	// Parents of the new commit.
	Parents []gitcmd.Hash
	// Message of the new commit.
	Message string
	// Sign signs the new commit (commit.gpgSign).
	Sign bool
	// Empty is set when there is nothing to land.
	Empty bool
	// trackedLeft says the checkout's tracked files at the land's paths
	// were not looked at up front (too many paths to name to git status,
	// whose look at every tracked file costs more than the rest of a
	// land): read-tree, which refuses a local change in the way before
	// it writes anything, is the look, and updateCheckout explains its
	// refusal with the full look.
	trackedLeft bool
}

// Options describe a land.
type Options struct {
	// Ref is the branch to land on (full ref name).
	Ref string
	// Baseline and Final are the snapshot commits.
	Baseline, Final string
	// AgentHead, with Merge, is kept as the second parent.
	AgentHead string
	Merge     bool
	// Message is the commit message.
	Message string
	// Forbidden is a ref that may not be landed on (the sandbox's own branch).
	Forbidden string
	// Sandbox is the sandbox's name, for the hints of a conflict.
	Sandbox string
	// Sign signs the commit, as git commit does with commit.gpgSign.
	Sign bool
	// Thorough looks at every local change in the base's checkout before
	// anything is made (a dry run, which has no read-tree to refuse).
	Thorough bool
}

// Prepare computes the land without changing anything: the merged tree,
// the commit's parents and message, and which checkout must follow. A
// conflict is an error with exit status 3 listing the paths; local changes
// in the base's checkout that overlap the change are an error too.
func Prepare(ctx context.Context, g *gitcmd.Runner, o Options) (*Plan, error) {
	if o.Ref == o.Forbidden {
		return nil, usererr.New("cannot land a sandbox onto its own branch").Hint("land onto another branch with --onto BRANCH")
	}
	ids, err := g.RevParseMany(ctx, o.Ref+"^{commit}", o.Ref+"^{tree}")
	if errors.Is(err, gitcmd.ErrNotExist) {
		return nil, usererr.New("branch %s does not exist", termsafe.String(strings.TrimPrefix(o.Ref, "refs/heads/"))).
			Hint("land onto an existing branch with --onto BRANCH")
	}
	if err != nil {
		return nil, fmt.Errorf("land: read %s: %w", o.Ref, err)
	}
	tip, tipTree := ids[0], ids[1]
	p := &Plan{Ref: o.Ref, Tip: tip, Baseline: o.Baseline, Final: o.Final, Message: o.Message, Sign: o.Sign}
	revs := []string{o.Baseline + "^{commit}", o.Baseline + "^{tree}", o.Final + "^{tree}"}
	if o.Merge {
		revs = append(revs, o.AgentHead+"^{commit}")
	}
	ids, err = g.RevParseMany(ctx, revs...)
	if err != nil {
		return nil, fmt.Errorf("land: read the snapshots: %w", err)
	}
	baseline, baseTree, finalTree := ids[0], ids[1], ids[2]
	if baseTree == finalTree {
		p.Empty = true
		return p, nil
	}
	p.Tree, err = merge(ctx, g, baseline, tipTree, finalTree, o.Sandbox)
	if err != nil {
		return nil, err
	}
	p.Checkout, err = worktree.CheckedOutAt(ctx, g, o.Ref)
	if err != nil {
		return nil, err
	}
	workDir := g.GitDir
	if p.Checkout != nil {
		workDir = p.Checkout.Path
	}
	if p.Tree, err = cleanFilters(ctx, g, cleanRequest{tipTree: tipTree, tree: p.Tree, workDir: workDir}); err != nil {
		return nil, err
	}
	if p.Tree == tipTree {
		p.Empty = true
		return p, nil
	}
	p.Changes, err = review.Changes(ctx, g, tip.String(), p.Tree.String())
	if err != nil {
		return nil, err
	}
	for _, c := range p.Changes {
		if c.Status == 'D' {
			continue
		}
		if err := agentrepo.CheckPath(c.Path); err != nil {
			return nil, usererr.Wrap(err, "refusing to land: %v", err).WithCode(usererr.ExitRefused)
		}
		if agentrepo.IsGitmodules(c.Path[strings.LastIndex(c.Path, "/")+1:]) {
			content, err := g.Run(ctx, nil, "cat-file", "blob", c.NewID)
			if err == nil {
				err = agentrepo.CheckGitmodules(content)
			}
			if err != nil {
				return nil, usererr.Wrap(err, "refusing to land %s: %v", termsafe.String(c.Path), err).WithCode(usererr.ExitRefused)
			}
		}
	}
	p.Flags = review.FlagsOf(ctx, g, p.Changes)
	p.Parents = []gitcmd.Hash{tip}
	if o.Merge {
		p.Parents = append(p.Parents, ids[3])
	}
	if p.Checkout != nil {
		p.CheckoutGitDir = gitDirOf(ctx, p.Checkout.Path)
		if err := checkLocalChanges(ctx, p, o.Thorough); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// merge applies baseline → final onto the tip's tree with the baseline as
// the merge base, and returns the merged tree.
func merge(ctx context.Context, g *gitcmd.Runner, baseline, tipTree, finalTree gitcmd.Hash, sandbox string) (gitcmd.Hash, error) {
	tree, err := g.MergeTree(ctx, gitcmd.MergeTreeRequest{Base: baseline, Ours: tipTree, Theirs: finalTree})
	if conflict, ok := errors.AsType[*gitcmd.MergeTreeConflictError](err); ok {
		return "", conflictError(conflict.Paths, sandbox)
	}
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	return tree, nil
}

func conflictError(paths []string, sandbox string) error {
	seen := map[string]bool{}
	var list []string
	for _, p := range paths {
		if p != "" && !seen[p] {
			seen[p] = true
			list = append(list, termsafe.String(p))
		}
	}
	sort.Strings(list)
	e := usererr.New("the change conflicts with the base branch in %d path(s): %s", len(list), strings.Join(list, ", ")).
		WithCode(usererr.ExitConflict)
	name := termsafe.String(sandbox)
	if name == "" {
		name = "<sandbox>"
	}
	return e.Hint("nothing was changed; bring the base into the sandbox with git sandbox update %s,", name).
		Hint("resolve the conflicts there (git sandbox exec %s, or a follow-up task), then land again", name)
}

// checkLocalChanges refuses when the base's checkout has local changes
// (staged, unstaged, untracked, or ignored files) at a path the land
// writes: updating the checkout would overwrite them. Untracked and
// ignored files are looked up on disk at the paths the land writes only
// (localFiles); changes to tracked files come from git status without its
// walk for untracked files, and only for the index entries at the land's
// paths and the tracked files where it needs a directory. Past
// maxPathspecs of those, unless thorough, staged changes come from the
// index against the tip and deleted files from localFiles, and changed
// files are left to read-tree (p.trackedLeft): git status's look at every
// tracked file costs more than the rest of a land.
func checkLocalChanges(ctx context.Context, p *Plan, thorough bool) error {
	wt := p.Checkout.Path
	g := &gitcmd.Runner{GitDir: p.CheckoutGitDir, WorkTree: wt}
	local, pathspecs, err := localFiles(ctx, g, wt, p.Changes)
	if err != nil {
		return err
	}
	args := []string{"status", "--porcelain", "-z", "--untracked-files=no", "--no-renames"}
	switch {
	case local == nil:
		// Untracked and ignored directories come as one "dir/" entry
		// each; ignored files count too, since git would replace them
		// silently.
		args = []string{"status", "--porcelain", "-z", "--untracked-files=normal", "--ignored=traditional", "--no-renames"}
	case pathspecs != nil:
		args = append(append(args, "--"), pathspecs...)
	case !thorough:
		// What the index holds that the tip does not (staged changes)
		// comes from comparing the two, which reads no file: read-tree
		// would keep an index entry that already equals the land's,
		// with whatever the file says on top of it.
		staged, err := g.Run(ctx, nil, "diff-index", "--cached", "--name-only", "-z", "--no-renames", p.Tip.String(), "--")
		if err != nil {
			return fmt.Errorf("land: staged changes in %s: %w", wt, err)
		}
		local = append(local, gitcmd.SplitLines(staged)...)
		p.trackedLeft = true
		return overlapError(wt, p.Changes, local)
	}
	out, err := g.Run(ctx, nil, args...)
	if err != nil {
		return fmt.Errorf("land: status of %s: %w", wt, err)
	}
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) > 3 {
			local = append(local, rec[3:])
		}
	}
	return overlapError(wt, p.Changes, local)
}

// overlapError refuses the land when a local change is at, under or over
// a path it writes.
func overlapError(wt string, changes []review.Entry, local []string) error {
	var overlap []string
	for _, c := range changes {
		for _, d := range local {
			d = strings.TrimSuffix(d, "/")
			if d == c.Path || strings.HasPrefix(c.Path, d+"/") || strings.HasPrefix(d, c.Path+"/") {
				overlap = append(overlap, termsafe.String(c.Path))
				break
			}
		}
	}
	if len(overlap) > 0 {
		return usererr.New("%s has local changes where the land would write: %s", wt, strings.Join(overlap, ", ")).
			Hint("commit, stash (git stash -u) or move them, then land again; nothing was changed").
			WithCode(usererr.ExitRefused)
	}
	return nil
}

// localFiles returns the untracked and ignored files and directories of
// the checkout wt (whose index g reads) that are at a path the land
// writes or hold one, as git status names them ("dir/" for a directory
// the index has nothing in), and the land's paths the index has but the
// disk does not (deleted, not staged), looking at those paths and their
// leading directories only. It returns nil (not an empty list) when it cannot
// tell without a walk — a directory the index tracks where the land
// writes a file, or too many paths — and git status must look.
//
// With them come the pathspecs (literal) that hold every index entry a
// land path overlaps: the path itself and what is under it, and each
// leading directory the index tracks as a file; nil when git status must
// look at every entry (no local list, or too many pathspecs).
func localFiles(ctx context.Context, g *gitcmd.Runner, wt string, changes []review.Entry) (local, pathspecs []string, err error) {
	if len(changes) > maxNarrow {
		return nil, nil, nil
	}
	out, err := g.Run(ctx, nil, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, nil, fmt.Errorf("land: index of %s: %w", wt, err)
	}
	indexed := gitcmd.SplitLines(out) // sorted, as git keeps an index
	tracked := func(p string) bool {
		_, ok := slices.BinarySearch(indexed, p)
		return ok
	}
	holds := func(dir string) bool {
		i, _ := slices.BinarySearch(indexed, dir+"/")
		return i < len(indexed) && strings.HasPrefix(indexed[i], dir+"/")
	}
	pathspecs = statusPathspecs(changes, tracked)
	local = []string{}
	for _, c := range changes {
		parts := strings.Split(c.Path, "/")
		for i := range parts {
			at := strings.Join(parts[:i+1], "/")
			fi, err := os.Lstat(filepath.Join(wt, filepath.FromSlash(at)))
			if err != nil && tracked(c.Path) {
				local = append(local, c.Path) // deleted here, still in the index
			}
			if err != nil || tracked(at) {
				break // nothing there, or the index's (status's business)
			}
			if !fi.IsDir() {
				local = append(local, at)
				break
			}
			if !holds(at) {
				local = append(local, at+"/")
				break
			}
			if i == len(parts)-1 {
				return nil, nil, nil // a tracked directory where the land writes a file
			}
		}
	}
	return local, pathspecs, nil
}

// maxPathspecs is how many pathspecs git status is given at most: it
// matches every index entry against each (about a tenth of what looking
// at the entry's file costs), so past a few dozen the look at every file
// is cheaper.
const maxPathspecs = 32

// statusPathspecs are the literal pathspecs of the index entries the land
// paths overlap: each path (which takes in what the index has under it)
// and each of its leading directories that the index tracks (a file
// where the land needs a directory). nil past maxPathspecs.
func statusPathspecs(changes []review.Entry, tracked func(string) bool) []string {
	var out []string
	add := func(p string) { out = append(out, ":(literal)"+p) }
	for _, c := range changes {
		add(c.Path)
		for i := range len(c.Path) {
			if c.Path[i] == '/' && tracked(c.Path[:i]) {
				add(c.Path[:i])
			}
		}
	}
	if len(out) > maxPathspecs {
		return nil
	}
	return out
}

// gitDirOf returns a worktree's git directory.
func gitDirOf(ctx context.Context, wt string) string {
	g := &gitcmd.Runner{GitDir: wt + "/.git", WorkTree: wt}
	if d, err := g.AbsoluteGitDir(ctx); err == nil {
		return d
	}
	return wt + "/.git"
}

// ErrMoved is returned when the base moved while landing.
var ErrMoved = errors.New("the base branch moved while landing")

// ErrCheckoutMoved is returned when the base's checkout left the tip the
// land was planned on.
var ErrCheckoutMoved = errors.New("the base's checkout changed while landing")

// Apply creates the commit, updates the base's checkout (files and index,
// leaving local changes elsewhere alone) and moves the ref by
// compare-and-swap. When the ref moved in between, the checkout is put
// back and nothing has changed.
func Apply(ctx context.Context, g *gitcmd.Runner, p *Plan, reflog string) (gitcmd.Hash, error) {
	return apply(ctx, g, p, reflog, "")
}

// apply is Apply writing the move down in the journal at path first
// (none when "") and taking it off once done.
func apply(ctx context.Context, g *gitcmd.Runner, p *Plan, reflog, journalPath string) (gitcmd.Hash, error) {
	commit, err := g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: p.Tree, Parents: p.Parents, Message: p.Message, Sign: p.Sign})
	if err != nil && p.Sign {
		return "", usererr.Wrap(err, "cannot sign the commit (commit.gpgSign is set): %v", err).
			Hint("nothing was landed; check user.signingKey and gpg.format, or land without a signature: git sandbox land --no-sign").
			WithCode(usererr.ExitRefused)
	}
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	dieat.Point("land: commit")
	if journalPath != "" {
		j := &journal{Ref: p.Ref, Tip: p.Tip, Commit: commit}
		if p.Checkout != nil {
			j.Checkout, j.CheckoutGitDir = p.Checkout.Path, p.CheckoutGitDir
		}
		if err := j.write(journalPath); err != nil {
			return "", usererr.Wrap(err, "cannot write down the land before moving anything: %v", err).
				Hint("nothing was landed; make room in the state directory, then land again")
		}
		dieat.Point("land: journal")
	}
	co, err := updateCheckout(ctx, p, commit)
	if err != nil {
		removeJournal(journalPath)
		return "", err
	}
	dieat.Point("land: checkout")
	err = g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: p.Ref, New: commit, Old: p.Tip, Message: reflog})
	if err == nil {
		dieat.Point("land: moved")
	}
	if err != nil && co != nil {
		if rerr := co.ReadTree(context.WithoutCancel(ctx), gitcmd.ReadTreeRequest{From: commit.String(), Tree: p.Tip.String(), Update: true}); rerr != nil {
			journalPath = "" // kept: git sandbox doctor puts the checkout back
		}
	}
	removeJournal(journalPath)
	branch := termsafe.String(strings.TrimPrefix(p.Ref, "refs/heads/"))
	if _, ok := errors.AsType[*gitcmd.RefMovedError](err); ok {
		return "", usererr.Wrap(ErrMoved, "%s moved while landing; nothing was changed", branch).
			Hint("land again")
	}
	if err != nil {
		return "", usererr.Wrap(err, "cannot move %s: %v; nothing was changed", branch, err).
			Hint("land again")
	}
	return commit, nil
}

// removeJournal takes the journal at path ("": none) off.
func removeJournal(path string) {
	if path != "" {
		_ = os.Remove(path)
	}
}

// updateCheckout brings the base's checkout, if any, from the tip to
// commit (files and index, leaving local changes elsewhere alone), and
// returns it.
func updateCheckout(ctx context.Context, p *Plan, commit gitcmd.Hash) (*gitcmd.Runner, error) {
	if p.Checkout == nil {
		return nil, nil
	}
	co := &gitcmd.Runner{GitDir: p.CheckoutGitDir, WorkTree: p.Checkout.Path}
	// The checkout must still be on the base, at the tip merged onto.
	head, _ := co.Output(ctx, "symbolic-ref", "-q", "HEAD")
	at, _ := co.RevParse(ctx, "HEAD")
	if head != p.Ref || at != p.Tip {
		return nil, usererr.Wrap(ErrCheckoutMoved, "the checkout %s changed while landing (now on %s at %s)", p.Checkout.Path, termsafe.String(head), at).
			Hint("nothing was landed; land again").WithCode(usererr.ExitRefused)
	}
	// Files whose stat data changed but not their content (touch, a
	// fresh clone's timestamps) make read-tree refuse them as "not
	// uptodate", before it writes anything: then the index is refreshed,
	// as git checkout does, and read-tree runs again. A path that really
	// changed stays changed, and read-tree refuses it again. (Refreshing
	// first, every time, looked at every tracked file: most of a land's
	// time in a large checkout.)
	req := gitcmd.ReadTreeRequest{From: p.Tip.String(), Tree: commit.String(), Update: true}
	err := co.ReadTree(ctx, req)
	if err != nil && ctx.Err() == nil {
		_, _ = co.Run(ctx, nil, "update-index", "-q", "--refresh", "--ignore-submodules")
		err = co.ReadTree(ctx, req)
	}
	if err != nil && p.trackedLeft && ctx.Err() == nil {
		// Say which paths, as the look before the land would have.
		if lerr := checkLocalChanges(ctx, p, true); lerr != nil {
			return nil, lerr
		}
	}
	if err != nil {
		return nil, usererr.Wrap(err, "cannot update the checkout %s: %v", p.Checkout.Path, err).
			Hint("nothing was landed; look at git status there, then land again").
			WithCode(usererr.ExitRefused)
	}
	return co, nil
}
