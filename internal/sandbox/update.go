package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
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
	if s.BaseRef == "" {
		return nil, usererr.New("sandbox %s started from a commit, not a branch: there is no base to update from", s.Display()).
			WithCode(usererr.ExitRefused)
	}
	running, err := s.Running(ctx)
	if err != nil {
		return nil, err
	}
	if running {
		if !o.Wait {
			return nil, usererr.New("sandbox %s is still running", s.Display()).
				Hint("stop it first (git sandbox stop %s), or wait for it with git sandbox update --wait %s", s.Display(), s.Display()).
				WithCode(usererr.ExitRefused)
		}
		if _, err := s.Wait(ctx, 0); err != nil {
			return nil, err
		}
	}
	g := s.env.Git()
	base := termsafe.String(s.Base)
	tip, err := g.PeelToCommit(ctx, s.BaseRef)
	if errors.Is(err, gitcmd.ErrNotExist) {
		return nil, usererr.New("the base branch %s does not exist any more", base).
			Hint("land it elsewhere with git sandbox land %s --onto BRANCH", s.Display())
	}
	if err != nil {
		return nil, fmt.Errorf("update: read %s: %w", base, err)
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
			Hint("remove or rename them in the worktree %s (or with git sandbox exec %s -- …), and update again; nothing was changed", s.WorktreeText(), s.Display()).
			WithCode(usererr.ExitRefused)
	}
	ids, err := g.RevParseMany(ctx, s.Start+"^{commit}", s.Start+"^{tree}", tip.String()+"^{tree}", s.Baseline+"^{tree}")
	if err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	start, startTree, tipTree, baselineTree := ids[0], ids[1], ids[2], ids[3]

	// The worktree: the sandbox's files merged with the base tip.
	merged, conflicts, err := s.merge3(ctx, start, gitcmd.Hash(before.Tree), tipTree, "sandbox "+s.Branch, s.Base+" "+tip.Short())
	if err != nil {
		return nil, err
	}
	res.Conflicts = conflicts
	// The new baseline: the base tip plus what was carried in at start
	// (which is not the agent's work and must not land).
	newBaseTree := tipTree
	if baselineTree != startTree {
		t, c, err := s.merge3(ctx, start, tipTree, baselineTree, "", "")
		if err != nil {
			return nil, err
		}
		if len(c) > 0 {
			s.env.UI.Warnf("the work carried in at start conflicts with %s in %s; it now counts as the agent's work", base, strings.Join(quoteAll(c), ", "))
		} else {
			newBaseTree = t
		}
	}
	snapper := s.Snapshotter()
	if merged.String() != before.Tree {
		if err := snapper.Checkout(ctx, before.Tree, merged.String()); err != nil {
			return nil, usererr.Wrap(err, "cannot write the update into the worktree: %v", err).
				Hint("nothing was changed; snapshot %s holds the work", shortID(before.ID)).
				WithCode(usererr.ExitRefused)
		}
	}
	head, merging, err := s.updateAgentRepo(ctx, gitcmd.Hash(sync.Head), tip)
	if err != nil {
		// The files are updated; the agent's history is behind. Say so,
		// and go on: land works from the files.
		s.env.UI.Warnf("the agent's repository was not updated: %v", err)
	}
	res.AgentHead, res.Merging = head, merging
	nb, err := snapper.WriteBaseline(ctx, rescue.ReasonUpdate, newBaseTree.String(), tip.String(), s.Baseline)
	if err != nil {
		return nil, err
	}
	err = s.Update(func(r *record.Record) error {
		r.Start = tip.String()
		r.BaseTip = tip.String()
		r.Baseline = nb.ID
		r.UpdateConflicts = conflicts
		return nil
	})
	if err != nil {
		return nil, err
	}
	after := s.Snapshotter()
	if head != "" {
		h := head.String()
		after.AgentHead = func() string { return h }
	}
	res.After, err = after.Take(ctx, rescue.ReasonUpdate)
	if err != nil {
		return res, err
	}
	return res, nil
}

// merge3 merges the change base → theirs into ours on trees, with base as
// the merge base, and returns the merged tree (conflicted files hold
// markers labelled oursLabel and theirsLabel) and the conflicting paths.
func (s *Sandbox) merge3(ctx context.Context, base, ours, theirs gitcmd.Hash, oursLabel, theirsLabel string) (gitcmd.Hash, []string, error) {
	g := s.env.Git()
	parents := []gitcmd.Hash{base}
	o, err := g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: ours, Parents: parents, Message: "update: ours\n"})
	if err != nil {
		return "", nil, fmt.Errorf("update: %w", err)
	}
	t, err := g.CommitTree(ctx, gitcmd.CommitTreeRequest{Tree: theirs, Parents: parents, Message: "update: theirs\n"})
	if err != nil {
		return "", nil, fmt.Errorf("update: %w", err)
	}
	tree, err := g.MergeTree(ctx, gitcmd.MergeTreeRequest{Ours: o, Theirs: t})
	if err == nil {
		return tree, nil, nil
	}
	conflict, ok := errors.AsType[*gitcmd.MergeTreeConflictError](err)
	if !ok {
		return "", nil, fmt.Errorf("update: %w", err)
	}
	tree = conflict.Tree
	if oursLabel != "" {
		tree, err = s.relabel(ctx, tree, conflict.Paths, map[string]string{
			"<<<<<<< " + o.String(): "<<<<<<< " + oneLine(oursLabel),
			">>>>>>> " + t.String(): ">>>>>>> " + oneLine(theirsLabel),
		})
		if err != nil {
			return "", nil, err
		}
	}
	return tree, conflict.Paths, nil
}

// relabel rewrites the conflict markers of the conflicted files of tree:
// git labels them with the (throwaway) commit ids it merged.
func (s *Sandbox) relabel(ctx context.Context, tree gitcmd.Hash, paths []string, labels map[string]string) (gitcmd.Hash, error) {
	g := s.env.Git()
	tmp, err := os.MkdirTemp(s.env.Layout.Dir(s.Branch), "update-")
	if err != nil {
		return "", fmt.Errorf("update: %w", err)
	}
	defer os.RemoveAll(tmp)
	ix := &gitcmd.Runner{GitDir: g.GitDir, IndexFile: filepath.Join(tmp, "index")}
	if err := ix.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: tree.String()}); err != nil {
		return "", fmt.Errorf("update: %w", err)
	}
	changed := false
	for _, p := range paths {
		out, err := g.Run(ctx, nil, "ls-tree", "-z", "--full-tree", tree.String(), "--", p)
		if err != nil || len(out) == 0 {
			continue
		}
		meta, _, _ := strings.Cut(strings.TrimSuffix(string(out), "\x00"), "\t")
		f := strings.Fields(meta)
		if len(f) != 3 || f[1] != "blob" || f[0] == "120000" {
			continue
		}
		content, err := g.Run(ctx, nil, "cat-file", "blob", f[2])
		if err != nil {
			return "", fmt.Errorf("update: %w", err)
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
			continue
		}
		id, err := g.Run(ctx, bytes.NewReader(bytes.Join(lines, nil)), "hash-object", "-w", "--no-filters", "--stdin")
		if err != nil {
			return "", fmt.Errorf("update: %w", err)
		}
		if _, err := ix.Run(ctx, nil, "update-index", "--cacheinfo", f[0]+","+strings.TrimSpace(string(id))+","+p); err != nil {
			return "", fmt.Errorf("update: %w", err)
		}
		changed = true
	}
	if !changed {
		return tree, nil
	}
	out, err := ix.Output(ctx, "write-tree")
	if err != nil {
		return "", fmt.Errorf("update: %w", err)
	}
	return gitcmd.ParseHash(out)
}

// updateAgentRepo gives the agent's repository the new base: its base
// branch moves to tip, and HEAD's branch either fast-forwards to tip (no
// commits of the agent's own), moves to a merge of the agent's commits and
// tip (a clean merge), or stays with MERGE_HEAD naming tip (conflicts:
// the agent's next commit is the merge). Objects are written to the
// user's store and packed into the sandbox's given store, which the
// agent's repository borrows from; its files are written by agentrepo,
// never by a git process.
func (s *Sandbox) updateAgentRepo(ctx context.Context, head, tip gitcmd.Hash) (gitcmd.Hash, bool, error) {
	gitDir := s.PrivateGitDir
	if (gitDir == "" && s.Copy == nil) || head == "" {
		return "", false, nil
	}
	g := s.env.Git()
	var ref string
	if s.Copy == nil {
		var err error
		if _, ref, err = agentrepo.Head(gitDir); err != nil {
			return head, false, err
		}
		if err := agentrepo.WriteRef(gitDir, s.BaseRef, tip.String()); err != nil {
			return head, false, err
		}
	}
	newHead := tip
	merging := false
	if _, err := g.Run(ctx, nil, "merge-base", "--is-ancestor", head.String(), tip.String()); err != nil {
		if gitcmd.ExitCode(err) != 1 {
			return head, false, err
		}
		tree, err := g.MergeTree(ctx, gitcmd.MergeTreeRequest{Ours: head, Theirs: tip})
		if _, ok := errors.AsType[*gitcmd.MergeTreeConflictError](err); ok {
			merging = true
		} else if err != nil {
			return head, false, err
		} else {
			newHead, err = g.CommitTree(ctx, gitcmd.CommitTreeRequest{
				Tree: tree, Parents: []gitcmd.Hash{head, tip},
				Message: fmt.Sprintf("Merge branch '%s' into %s\n", oneLine(s.Base), oneLine(s.Branch)),
			})
			if err != nil {
				return head, false, err
			}
		}
	}
	if s.Copy != nil {
		msg := fmt.Sprintf("Merge branch '%s' into %s\n", oneLine(s.Base), oneLine(s.Branch))
		if err := s.copyUpdateAgentRepo(ctx, head, tip, newHead, merging, msg); err != nil {
			return head, false, err
		}
		if merging {
			return head, true, nil
		}
		if _, err := casRef(ctx, g, s.Refs().Agent(), newHead, "git sandbox update"); err != nil {
			return newHead, false, err
		}
		return newHead, false, nil
	}
	// The agent's repository borrows no objects from the user's store:
	// the base's commits and the merge made here are given to it.
	if err := s.giveUpdate(ctx, newHead, tip, head); err != nil {
		return head, false, err
	}
	if merging {
		if err := agentrepo.WriteFile(gitDir, "MERGE_HEAD", []byte(tip.String()+"\n")); err != nil {
			return head, false, err
		}
		msg := fmt.Sprintf("Merge branch '%s' into %s\n", oneLine(s.Base), oneLine(s.Branch))
		return head, true, agentrepo.WriteFile(gitDir, "MERGE_MSG", []byte(msg))
	}
	// The agent's index follows its new HEAD, keeping what it had staged
	// where the base did not change the path (there, the staged content
	// stays in its files, unstaged, and update says so).
	tmp, err := os.MkdirTemp(s.env.Layout.Dir(s.Branch), "update-")
	if err != nil {
		return head, false, err
	}
	defer os.RemoveAll(tmp)
	index := filepath.Join(tmp, "index")
	ix := &gitcmd.Runner{GitDir: g.GitDir, IndexFile: index}
	if err := ix.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: newHead.String()}); err != nil {
		return head, false, err
	}
	if err := s.keepStaged(ctx, ix, head, newHead); err != nil {
		s.env.UI.Warnf("what the agent had staged is now unstaged (its files keep it): %v", err)
		if err := ix.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: newHead.String()}); err != nil {
			return head, false, err
		}
	}
	b, err := os.ReadFile(index)
	if err != nil {
		return head, false, err
	}
	if ref == "" {
		ref = "HEAD"
	}
	if err := agentrepo.WriteRef(gitDir, ref, newHead.String()); err != nil {
		return head, false, err
	}
	if err := agentrepo.WriteFile(gitDir, "index", b); err != nil {
		return newHead, false, err
	}
	if _, err := casRef(ctx, g, s.Refs().Agent(), newHead, "git sandbox update"); err != nil {
		return newHead, false, err
	}
	return newHead, false, nil
}

// keepStaged writes into ix (an index holding newHead's tree) what the
// agent had staged against its old HEAD: each path whose entry in the
// agent's index differs from old HEAD's (a change, an addition or a
// removal) keeps the staged entry, unless newHead changed the path too; those
// are left as newHead has them and named in a warning. The agent's index
// is read in Go (agentrepo.Index), never by a git process; its entries are
// written with update-index --index-info, which needs no objects (the
// staged blobs live in the agent's repository).
func (s *Sandbox) keepStaged(ctx context.Context, ix *gitcmd.Runner, head, newHead gitcmd.Hash) error {
	if head == newHead {
		return nil
	}
	entries, err := agentrepo.Index(s.PrivateGitDir)
	if err != nil || entries == nil {
		return err
	}
	g := s.env.Git()
	tree := func(commit gitcmd.Hash) (map[string]string, error) {
		out, err := g.Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", commit.String())
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, rec := range strings.Split(string(out), "\x00") {
			meta, p, ok := strings.Cut(rec, "\t")
			if f := strings.Fields(meta); ok && len(f) == 3 {
				m[p] = f[0] + " " + f[2]
			}
		}
		return m, nil
	}
	old, err := tree(head)
	if err != nil {
		return err
	}
	cur, err := tree(newHead)
	if err != nil {
		return err
	}
	var info bytes.Buffer
	var lost []string
	stage := func(p, entry string) {
		if entry == cur[p] || cur[p] == "" && strings.HasPrefix(entry, "0 ") {
			return // the new HEAD has it so already
		}
		if cur[p] != old[p] {
			lost = append(lost, p)
			return
		}
		fmt.Fprintf(&info, "%s\t%s\x00", entry, p)
	}
	inIndex := map[string]bool{}
	for _, e := range entries {
		inIndex[e.Path] = true
		if entry := e.Mode + " " + e.ID; entry != old[e.Path] {
			stage(e.Path, entry)
		}
	}
	for p := range old {
		if !inIndex[p] {
			stage(p, "0 "+strings.Repeat("0", len(newHead)))
		}
	}
	if info.Len() > 0 {
		if _, err := ix.Run(ctx, &info, "update-index", "-z", "--index-info"); err != nil {
			return err
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		s.env.UI.Warnf("the agent had staged changes to %s, which the base changed too: they are unstaged now (its files keep what it wrote)", strings.Join(quoteAll(lost), ", "))
	}
	return nil
}

// oneLine keeps the first line of a label or message part.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func quoteAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = termsafe.String(p)
	}
	return out
}
