package rescue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Resolve turns what the user typed (a full or abbreviated snapshot id, or
// a ref such as refs/sandbox/t1/rescue) into a snapshot.
func Resolve(ctx context.Context, g *gitcmd.Runner, name string) (*Snapshot, error) {
	if strings.HasPrefix(name, "-") {
		return nil, errNotSnapshot(name)
	}
	id, err := g.PeelToCommit(ctx, name)
	if errors.Is(err, gitcmd.ErrNotExist) {
		return nil, errNotSnapshot(name)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", termsafe.String(name), err)
	}
	s, err := Read(ctx, g, id.String())
	if err != nil {
		return nil, errNotSnapshot(name)
	}
	return s, nil
}

func errNotSnapshot(name string) error {
	return usererr.New("%s is not a snapshot", termsafe.String(name)).
		Hint("git sandbox rescue list shows the snapshots and their ids")
}

// RestoreBranch creates branch at a new commit whose tree is the snapshot's
// and whose parent is the commit the sandbox started from, so the branch
// reads as one commit of the agent's work on top of where it began. It
// needs no sandbox. An existing branch is replaced only with force, and
// never while it is checked out.
func RestoreBranch(ctx context.Context, g *gitcmd.Runner, s *Snapshot, branch string, force bool) (gitcmd.Hash, error) {
	ref := "refs/heads/" + branch
	old, err := g.RevParse(ctx, ref)
	if err != nil && !errors.Is(err, gitcmd.ErrNotExist) {
		return "", fmt.Errorf("restore: %w", err)
	}
	if old != "" && !force {
		return "", usererr.New("branch %s already exists", termsafe.String(branch)).
			Hint("choose another name, or replace it with --force").
			WithCode(usererr.ExitRefused)
	}
	if old != "" {
		wts, err := g.Output(ctx, "worktree", "list", "--porcelain")
		if err == nil && strings.Contains(wts+"\n", "branch "+ref+"\n") {
			return "", usererr.New("branch %s is checked out; it cannot be replaced", termsafe.String(branch)).
				Hint("restore into a new branch instead").WithCode(usererr.ExitRefused)
		}
	}
	req := gitcmd.CommitTreeRequest{Tree: gitcmd.Hash(s.Tree)}
	if s.Start != "" {
		if start, err := g.PeelToCommit(ctx, s.Start); err == nil {
			req.Parents = []gitcmd.Hash{start}
		}
	}
	req.Message = fmt.Sprintf("Restore snapshot %s of sandbox %s\n\nThe worktree of sandbox %s as it was at %s (%s).\n\nSandbox-Snapshot: %s\n",
		short(s.ID), s.Branch, s.Branch, s.Time.Format(time.RFC3339), s.Reason, s.ID)
	commit, err := g.CommitTree(ctx, req)
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	err = g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: ref, New: commit, Old: old, Message: "git sandbox rescue restore " + short(s.ID)})
	if _, ok := errors.AsType[*gitcmd.RefMovedError](err); ok {
		return "", usererr.New("branch %s changed while restoring; nothing was changed", termsafe.String(branch)).
			Hint("restore again").WithCode(usererr.ExitRefused)
	}
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	return commit, nil
}

// RestoreWorktree makes the sandbox worktree hold exactly the snapshot's
// files. The current state is snapshotted first; without force nothing is
// changed when the worktree differs from the snapshot. The files are
// written by the configuration-free git, so no filter runs.
func (s *Snapshotter) RestoreWorktree(ctx context.Context, snap *Snapshot, force bool) (current *Taken, changed []string, err error) {
	cur, err := s.Take(ctx, ReasonRestore)
	if err != nil {
		return nil, nil, err
	}
	if cur.Tree == snap.Tree {
		return cur, nil, nil
	}
	out, err := s.host().Run(ctx, nil, "diff-tree", "-r", "--no-renames", "--name-only", "-z", cur.Tree, snap.Tree)
	if err != nil {
		return cur, nil, fmt.Errorf("restore: %w", err)
	}
	changed = gitcmd.SplitLines(out)
	if !force {
		return cur, changed, nil
	}
	if err := s.Checkout(ctx, cur.Tree, snap.Tree); err != nil {
		return cur, changed, fmt.Errorf("restore: %w", err)
	}
	return cur, changed, nil
}

// WriteBaseline writes a baseline snapshot of tree whose parent is start
// (the commit the sandbox is now based on) and moves the baseline ref to
// it from old. The rescue chain is left alone: the next snapshot measures
// its changes from the new baseline.
func (s *Snapshotter) WriteBaseline(ctx context.Context, reason Reason, tree, start, old string) (*Snapshot, error) {
	now := s.now()
	snap := Snapshot{Tree: tree, Branch: s.Branch, Time: now, Reason: reason, Start: start}
	who := &gitcmd.Signature{Name: "git sandbox", Email: "git-sandbox@localhost", When: now.UTC()}
	id, err := s.host().CommitTree(ctx, gitcmd.CommitTreeRequest{
		Tree: gitcmd.Hash(tree), Parents: []gitcmd.Hash{gitcmd.Hash(start)}, Message: message(snap), Author: who, Committer: who,
	})
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	snap.ID = id.String()
	err = s.host().UpdateRef(ctx, gitcmd.UpdateRefRequest{
		Ref: Refs{s.Branch}.Baseline(), New: id, Old: gitcmd.Hash(old), Message: "git sandbox baseline: " + string(reason),
	})
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	return &snap, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Prunable is a chain prune would delete.
type Prunable struct {
	Ref    string
	Branch string
	Newest time.Time
	Count  int
}

// Prune deletes the snapshot chains of sandboxes that no longer exist whose
// newest snapshot is older than age. live reports whether a branch still has
// a sandbox; its chain is never pruned. With dryRun nothing is deleted.
func Prune(ctx context.Context, g *gitcmd.Runner, age time.Duration, now time.Time, live func(branch string) bool, dryRun bool) ([]Prunable, error) {
	chains, err := Chains(ctx, g, "")
	if err != nil {
		return nil, err
	}
	var out []Prunable
	var deletes []gitcmd.RefUpdate
	for _, c := range chains {
		if len(c.Snapshots) == 0 {
			continue
		}
		tip := c.Snapshots[0]
		isLive := c.Ref == Refs{tip.Branch}.Rescue() && live(tip.Branch)
		if isLive || now.Sub(tip.Time) < age {
			continue
		}
		out = append(out, Prunable{Ref: c.Ref, Branch: tip.Branch, Newest: tip.Time, Count: len(c.Snapshots)})
		prefix := strings.TrimSuffix(c.Ref, "rescue")
		for _, name := range []string{"rescue", "baseline", "agent"} {
			ref := prefix + name
			id, err := g.RevParse(ctx, ref)
			if errors.Is(err, gitcmd.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("prune: %w", err)
			}
			deletes = append(deletes, gitcmd.RefUpdate{Ref: ref, Old: id})
		}
	}
	if dryRun || len(deletes) == 0 {
		return out, nil
	}
	if err := g.UpdateRefs(ctx, "git sandbox rescue prune", deletes...); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	return out, nil
}

// Checkout changes the worktree from tree from (what the last snapshot
// read) to tree to, under the sandbox's lock (Source.Checkout).
func (s *Snapshotter) Checkout(ctx context.Context, from, to string) error {
	unlock, err := record.Lock(s.Lock)
	if err != nil {
		return err
	}
	defer unlock()
	return s.Source.Checkout(ctx, from, to)
}
