package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// UpdateOptions are update's flags.
type UpdateOptions struct {
	// Wait waits for a running agent to exit instead of refusing.
	Wait bool
}

// UpdateResult is what update did.
type UpdateResult struct {
	// Tip is the base commit the sandbox is now based on; UpToDate is set
	// when it already was.
	Tip      gitcmd.Hash
	UpToDate bool
	// Before and After are the snapshots taken around the update.
	Before, After *rescue.Taken
	// Conflicts are the paths left with conflict markers (real names).
	Conflicts []string
	// AgentHead is the agent's HEAD afterwards; Merging is set when its
	// merge of the base waits for the conflicts to be resolved (its
	// MERGE_HEAD names the base tip).
	AgentHead gitcmd.Hash
	Merging   bool
}

// UpdateBase brings the base branch's current tip into the sandbox: a
// 3-way merge of the base tip and the sandbox's current files, with the
// commit the sandbox is based on as merge base, written into the worktree
// (conflicts as markers). The baseline moves to the tip (plus the carried
// work), so land afterwards diffs only the agent's work; the agent's
// repository gets the tip as its base branch and in HEAD's history.
// Snapshots are taken before and after.
func (s *Sandbox) UpdateBase(ctx context.Context, o UpdateOptions) (*UpdateResult, error) {
	tip, err := s.baseTip(ctx, o)
	if err != nil {
		return nil, err
	}
	res := &UpdateResult{Tip: tip}
	if tip.String() == s.Start {
		res.UpToDate = true
		return res, nil
	}
	before, sync, err := s.Final(ctx, rescue.ReasonUpdate)
	if err != nil {
		return nil, err
	}
	res.Before = before
	if len(before.Skipped) > 0 {
		return nil, usererr.New("the sandbox holds %d path(s) git cannot store, such as %s", len(before.Skipped), termsafe.String(before.Skipped[0])).
			Hint("remove or rename them in the worktree %s (or with git sandbox exec %s -- …), and update again; nothing was changed", s.Workspace().Where(), s.Display()).
			WithCode(usererr.ExitRefused)
	}
	merged, newBaseTree, err := s.mergeBase(ctx, tip, before, res)
	if err != nil {
		return nil, err
	}
	snapper := s.Snapshotter()
	if merged.String() != before.Tree {
		if err := snapper.Checkout(ctx, before.Tree, merged.String()); err != nil {
			return nil, usererr.Wrap(err, "cannot write the update into the worktree: %v", err).
				Hint("nothing was changed; snapshot %s holds the work", shortID(before.ID)).
				WithCode(usererr.ExitRefused)
		}
	}
	res.AgentHead, res.Merging, err = s.updateAgentRepo(ctx, gitcmd.Hash(sync.Head), tip)
	if err != nil {
		// The files are updated; the agent's history is behind. Say so,
		// and go on: land works from the files.
		s.env.UI.Warnf("the agent's repository was not updated: %v", err)
	}
	return res, s.rebase(ctx, res, newBaseTree)
}

// baseTip is the base branch's tip, once the agent does not run.
func (s *Sandbox) baseTip(ctx context.Context, o UpdateOptions) (gitcmd.Hash, error) {
	if s.BaseRef == "" {
		return "", usererr.New("sandbox %s started from a commit, not a branch: there is no base to update from", s.Display()).
			WithCode(usererr.ExitRefused)
	}
	running, err := s.Running(ctx)
	if err != nil {
		return "", err
	}
	if running {
		if !o.Wait {
			return "", usererr.New("sandbox %s is still running", s.Display()).
				Hint("stop it first (git sandbox stop %s), or wait for it with git sandbox update --wait %s", s.Display(), s.Display()).
				WithCode(usererr.ExitRefused)
		}
		if _, err := s.Wait(ctx, 0); err != nil {
			return "", err
		}
	}
	base := termsafe.String(s.Base)
	tip, err := s.env.Git().PeelToCommit(ctx, s.BaseRef)
	if errors.Is(err, gitcmd.ErrNotExist) {
		return "", usererr.New("the base branch %s does not exist any more", base).
			Hint("land it elsewhere with git sandbox land %s --onto BRANCH", s.Display())
	}
	if err != nil {
		return "", fmt.Errorf("update: read %s: %w", base, err)
	}
	return tip, nil
}

// mergeBase merges the base tip into the sandbox's files (the worktree's
// new tree, conflicts as markers, in res.Conflicts) and into its baseline:
// the base tip plus what was carried in at start (which is not the agent's
// work and must not land).
func (s *Sandbox) mergeBase(ctx context.Context, tip gitcmd.Hash, before *rescue.Taken, res *UpdateResult) (merged, newBaseTree gitcmd.Hash, err error) {
	ids, err := s.env.Git().RevParseMany(ctx, s.Start+"^{commit}", s.Start+"^{tree}", tip.String()+"^{tree}", s.Baseline+"^{tree}")
	if err != nil {
		return "", "", fmt.Errorf("update: %w", err)
	}
	start, startTree, tipTree, baselineTree := ids[0], ids[1], ids[2], ids[3]
	merged, res.Conflicts, err = s.merge3(ctx, start, gitcmd.Hash(before.Tree), tipTree, "sandbox "+s.Branch, s.Base+" "+tip.Short())
	if err != nil {
		return "", "", err
	}
	newBaseTree = tipTree
	if baselineTree != startTree {
		t, c, err := s.merge3(ctx, start, tipTree, baselineTree, "", "")
		if err != nil {
			return "", "", err
		}
		if len(c) > 0 {
			s.env.UI.Warnf("the work carried in at start conflicts with %s in %s; it now counts as the agent's work", termsafe.String(s.Base), termsafe.Join(c, ", "))
		} else {
			newBaseTree = t
		}
	}
	return merged, newBaseTree, nil
}

// rebase moves the sandbox onto the tip: a new baseline of newBaseTree,
// the record's start, and a snapshot measured from there.
func (s *Sandbox) rebase(ctx context.Context, res *UpdateResult, newBaseTree gitcmd.Hash) error {
	tip := res.Tip
	nb, err := s.Snapshotter().WriteBaseline(ctx, rescue.ReasonUpdate, newBaseTree.String(), tip.String(), s.Baseline)
	if err != nil {
		return err
	}
	err = s.Update(func(r *record.Record) error {
		r.Start = tip.String()
		r.BaseTip = tip.String()
		r.Baseline = nb.ID
		r.UpdateConflicts = res.Conflicts
		return nil
	})
	if err != nil {
		return err
	}
	after := s.Snapshotter()
	if head := res.AgentHead; head != "" {
		h := head.String()
		after.AgentHead = func() string { return h }
	}
	res.After, err = after.Take(ctx, rescue.ReasonUpdate)
	return err
}

// merge3 merges the change base → theirs into ours on trees, with base as
// the merge base, and returns the merged tree (conflicted files hold
// markers labelled oursLabel and theirsLabel) and the conflicting paths.
func (s *Sandbox) merge3(ctx context.Context, base, ours, theirs gitcmd.Hash, oursLabel, theirsLabel string) (gitcmd.Hash, []string, error) {
	tree, err := s.env.Git().MergeTree(ctx, gitcmd.MergeTreeRequest{Base: base, Ours: ours, Theirs: theirs, OursLabel: oursLabel, TheirsLabel: theirsLabel})
	if err == nil {
		return tree, nil, nil
	}
	conflict, ok := errors.AsType[*gitcmd.MergeTreeConflictError](err)
	if !ok {
		return "", nil, fmt.Errorf("update: %w", err)
	}
	return conflict.Tree, conflict.Paths, nil
}

// updateAgentRepo gives the agent's repository the new base: its base
// branch moves to tip, and HEAD's branch either fast-forwards to tip (no
// commits of the agent's own), moves to a merge of the agent's commits and
// tip (a clean merge), or stays with MERGE_HEAD naming tip (conflicts:
// the agent's next commit is the merge). The merge is made here; the
// workspace writes it into the agent's repository, never by a git process
// of this machine in it.
func (s *Sandbox) updateAgentRepo(ctx context.Context, head, tip gitcmd.Hash) (gitcmd.Hash, bool, error) {
	if head == "" {
		return "", false, nil
	}
	g := s.env.Git()
	msg := fmt.Sprintf("Merge branch '%s' into %s\n", oneLine(s.Base), oneLine(s.Branch))
	up := workspace.AgentUpdate{Head: head, Tip: tip, NewHead: tip, Message: msg}
	if _, err := g.Run(ctx, nil, "merge-base", "--is-ancestor", head.String(), tip.String()); err != nil {
		if gitcmd.ExitCode(err) != 1 {
			return head, false, err
		}
		tree, err := g.MergeTree(ctx, gitcmd.MergeTreeRequest{Ours: head, Theirs: tip})
		if _, ok := errors.AsType[*gitcmd.MergeTreeConflictError](err); ok {
			up.Merging = true
		} else if err != nil {
			return head, false, err
		} else if up.NewHead, err = g.CommitTree(ctx, gitcmd.CommitTreeRequest{
			Tree: tree, Parents: []gitcmd.Hash{head, tip}, Message: msg,
		}); err != nil {
			return head, false, err
		}
	}
	if err := s.Workspace().GiveUpdate(ctx, up); err != nil {
		return head, false, err
	}
	if up.Merging {
		return head, true, nil
	}
	if _, err := casRef(ctx, g, s.Refs().Agent(), up.NewHead, "git sandbox update"); err != nil {
		return up.NewHead, false, err
	}
	return up.NewHead, false, nil
}

// oneLine keeps the first line of a label or message part.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
