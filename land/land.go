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
	"sort"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
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
	if p.Tree, err = cleanFilters(ctx, g, tipTree, p.Tree, workDir); err != nil {
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
		if err := checkLocalChanges(ctx, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// merge applies baseline → final onto the tip's tree with the baseline as
// the merge base, and returns the merged tree.
func merge(ctx context.Context, g *gitcmd.Runner, baseline, tipTree, finalTree gitcmd.Hash, sandbox string) (gitcmd.Hash, error) {
	parents := []gitcmd.Hash{baseline}
	ours, err := g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: tipTree, Parents: parents, Message: "land: base side\n"})
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	theirs, err := g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: finalTree, Parents: parents, Message: "land: sandbox side\n"})
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	tree, err := g.MergeTree(ctx, gitcmd.MergeTreeRequest{Ours: ours, Theirs: theirs})
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
// writes: updating the checkout would overwrite them.
func checkLocalChanges(ctx context.Context, p *Plan) error {
	wt := p.Checkout.Path
	g := &gitcmd.Runner{GitDir: p.CheckoutGitDir, WorkTree: wt}
	// Untracked and ignored directories come as one "dir/" entry each;
	// ignored files count too, since git would replace them silently.
	out, err := g.Run(ctx, nil, "status", "--porcelain", "-z", "--untracked-files=normal", "--ignored=traditional", "--no-renames")
	if err != nil {
		return fmt.Errorf("land: status of %s: %w", wt, err)
	}
	var local []string
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) > 3 {
			local = append(local, rec[3:])
		}
	}
	var overlap []string
	for _, c := range p.Changes {
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

// Apply creates the commit, updates the base's checkout (files and index,
// leaving local changes elsewhere alone) and moves the ref by
// compare-and-swap. When the ref moved in between, the checkout is put
// back and nothing has changed.
func Apply(ctx context.Context, g *gitcmd.Runner, p *Plan, reflog string) (gitcmd.Hash, error) {
	commit, err := g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: p.Tree, Parents: p.Parents, Message: p.Message, Sign: p.Sign})
	if err != nil && p.Sign {
		return "", usererr.Wrap(err, "cannot sign the commit (commit.gpgSign is set): %v", err).
			Hint("nothing was landed; check user.signingKey and gpg.format, or land without a signature: git sandbox land --no-sign").
			WithCode(usererr.ExitRefused)
	}
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	var co *gitcmd.Runner
	if p.Checkout != nil {
		co = &gitcmd.Runner{GitDir: p.CheckoutGitDir, WorkTree: p.Checkout.Path}
		// The checkout must still be on the base, at the tip merged onto.
		head, _ := co.Output(ctx, "symbolic-ref", "-q", "HEAD")
		at, _ := co.RevParse(ctx, "HEAD")
		if head != p.Ref || at != p.Tip {
			return "", usererr.New("the checkout %s changed while landing (now on %s at %s)", p.Checkout.Path, termsafe.String(head), at).
				Hint("nothing was landed; land again").WithCode(usererr.ExitRefused)
		}
		// Files whose stat data changed but not their content (touch, a
		// fresh clone's timestamps) would make read-tree refuse them as
		// "not uptodate": the index is refreshed first, as git checkout
		// does. A path that really changed stays changed, and read-tree
		// refuses it below.
		_, _ = co.Run(ctx, nil, "update-index", "-q", "--refresh", "--ignore-submodules")
		if err := co.ReadTree(ctx, gitcmd.ReadTreeRequest{From: p.Tip.String(), Tree: commit.String(), Update: true}); err != nil {
			return "", usererr.Wrap(err, "cannot update the checkout %s: %v", p.Checkout.Path, err).
				Hint("nothing was landed; look at git status there, then land again").
				WithCode(usererr.ExitRefused)
		}
	}
	err = g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: p.Ref, New: commit, Old: p.Tip, Message: reflog})
	if err != nil && co != nil {
		_ = co.ReadTree(context.WithoutCancel(ctx), gitcmd.ReadTreeRequest{From: commit.String(), Tree: p.Tip.String(), Update: true})
	}
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
