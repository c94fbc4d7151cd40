package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// SyncResult is what Sync brought back.
type SyncResult struct {
	agentrepo.SyncResult
	// Moved is set when the host branch was moved to the agent's head.
	Moved bool
}

// Sync brings the agent's commits back as checked objects, records them
// under refs/sandbox/<branch>/agent and, with moveBranch, moves the host
// branch to them (so it can be inspected or pushed).
func (s *Sandbox) Sync(ctx context.Context, moveBranch bool) (*SyncResult, error) {
	g := s.env.Git()
	known, err := g.RevParse(ctx, s.Refs().Agent())
	if err != nil && !errors.Is(err, gitcmd.ErrNotExist) {
		return nil, fmt.Errorf("sync: %w", err)
	}
	budget, err := s.env.syncBudget()
	if err != nil {
		return nil, err
	}
	ws := s.Workspace()
	res, err := ws.Sync(ctx, known.String(), budget)
	if err != nil {
		return nil, err
	}
	out := &SyncResult{SyncResult: *res}
	if res.Head == "" {
		return out, nil
	}
	if res.Ref != "" && res.Ref != "refs/heads/"+s.Branch {
		// The agent switched branches; its HEAD is still what it worked on.
		s.env.UI.Infof("note: the agent's HEAD is on %s, not %s", termsafe.String(res.Ref), s.Display())
	}
	head := gitcmd.Hash(res.Head)
	if _, err := casRef(ctx, g, s.Refs().Agent(), head, "git sandbox sync"); err != nil {
		return nil, err
	}
	if !moveBranch {
		return out, nil
	}
	moved, err := casRef(ctx, g, "refs/heads/"+s.Branch, head, "git sandbox sync")
	if err != nil || !moved {
		return out, err
	}
	out.Moved = true
	return out, ws.BranchMoved(ctx, res.Head)
}

// casRef moves ref to id, whatever it pointed at, but only if nobody moved
// it between the read and the write. It reports whether the ref changed.
func casRef(ctx context.Context, g *gitcmd.Runner, ref string, id gitcmd.Hash, msg string) (bool, error) {
	old, err := g.RevParse(ctx, ref)
	if err != nil && !errors.Is(err, gitcmd.ErrNotExist) {
		return false, fmt.Errorf("update %s: %w", ref, err)
	}
	if old == id {
		return false, nil
	}
	if err := g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: ref, New: id, Old: old, Message: msg}); err != nil {
		return false, fmt.Errorf("update %s: %w", ref, err)
	}
	return true, nil
}

// Final takes the snapshot a review or land works on and brings the
// agent's commits back first.
func (s *Sandbox) Final(ctx context.Context, reason rescue.Reason) (*rescue.Taken, *SyncResult, error) {
	sync, err := s.Sync(ctx, false)
	if err != nil {
		return nil, nil, rescue.NoSpace(err, s.Branch, s.env.Repo.CommonDir, s.env.Layout.Dir(s.Branch))
	}
	snapper := s.Snapshotter()
	snapper.AgentHead = func() string { return sync.Head } // just read by Sync
	snap, err := snapper.Take(ctx, reason)
	if err != nil {
		return nil, nil, err
	}
	return snap, sync, nil
}

// The sandbox as land sees it (land.Sandbox): land's policy is in land/.

var _ land.Sandbox = (*Sandbox)(nil)

// Recorded is the sandbox's record.
func (s *Sandbox) Recorded() *record.Record { return s.Record }

// Where names the worktree for messages: a path, or a volume on an engine.
func (s *Sandbox) Where() string { return s.Workspace().Where() }

// Git is the user's repository.
func (s *Sandbox) Git() *gitcmd.Runner { return s.env.Git() }

// UpdateFromBase brings the base's tip in and returns the paths left in
// conflict.
func (s *Sandbox) UpdateFromBase(ctx context.Context) ([]string, error) {
	up, err := s.UpdateBase(ctx, UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return up.Conflicts, nil
}

// FinalSnapshot is Final, with the agent's HEAD.
func (s *Sandbox) FinalSnapshot(ctx context.Context, reason rescue.Reason) (*rescue.Taken, string, error) {
	final, sync, err := s.Final(ctx, reason)
	if err != nil {
		return nil, "", err
	}
	return final, sync.Head, nil
}

// VerifyTree runs verify on tree and records the verdict; the caller
// holds the verify lock.
func (s *Sandbox) VerifyTree(ctx context.Context, tree string, out io.Writer) (*record.Verdict, error) {
	return s.runVerifyLocked(ctx, &rescue.Taken{Snapshot: rescue.Snapshot{Tree: tree}}, IO{Stdout: out, Stderr: out})
}

// CommitHooks finds the user's commit hooks.
func (s *Sandbox) CommitHooks(ctx context.Context) (string, []string, error) {
	return s.env.CommitHooks(ctx)
}

// RunCommitHooks runs the user's hooks on the plan's tree.
func (s *Sandbox) RunCommitHooks(ctx context.Context, p *land.Plan, dir string, names []string, out io.Writer) (string, error) {
	return s.runCommitHooks(ctx, p, dir, names, IO{Stdout: out, Stderr: out})
}

// InsideSandboxes reports whether a path is among the sandboxes' files.
func (s *Sandbox) InsideSandboxes(p string) bool { return s.env.insideSandboxes(p) }

// NestedRefusal refuses to land while nested repositories would be lost.
func (s *Sandbox) NestedRefusal(nested []string) error {
	return nestedRefusal(s, nested, "git sandbox land")
}

// LockBase serialises lands onto one branch of the repository.
func (s *Sandbox) LockBase(ref string) (string, func(), error) {
	unlock, err := record.LockHinted(s.env.Layout.LandLock(ref), time.Hour,
		"another land onto "+termsafe.String(strings.TrimPrefix(ref, "refs/heads/"))+" (or a land --keep, fleet land) is running or stuck; try again when it ends, or find it with ps -ef | grep 'git-sandbox land' and end it")
	return s.env.Layout.LandJournal(ref), unlock, err
}

// Landed follows a land: with Keep the next land starts where this one
// ended, on the branch it landed on (the base and the baseline move, and
// the newest snapshot is measured against the baseline, so ps and rm see
// no unlanded work); without, the sandbox is removed.
func (s *Sandbox) Landed(ctx context.Context, l land.Landed) error {
	if l.Keep {
		err := s.Update(func(r *record.Record) error {
			r.Base = strings.TrimPrefix(l.Ref, "refs/heads/")
			r.BaseRef = l.Ref
			r.Baseline = l.Final.ID
			r.BaseTip = l.Commit.String()
			r.UpdateConflicts = nil
			return nil
		})
		if err != nil {
			return err
		}
		_, err = s.Snapshotter().Restamp(ctx, rescue.ReasonLand)
		return err
	}
	d, err := s.engine(ctx)
	if err != nil {
		return err
	}
	return s.teardown(ctx, d)
}

// ConflictsInWorktree lists the paths the last update left conflicted that
// still hold conflict markers in the worktree now (land.StillConflicted).
func (s *Sandbox) ConflictsInWorktree() []string {
	if len(s.UpdateConflicts) == 0 {
		return nil
	}
	return land.StillConflicted(s.Worktree, s.UpdateConflicts)
}

// insideSandboxes reports whether a path is inside the state directory or
// the worktrees directory, where every file is an agent's.
func (e *Env) insideSandboxes(p string) bool {
	for _, root := range []string{e.Layout.Root, e.Layout.WorktreesDir} {
		if root == "" {
			continue
		}
		if worktree.Within(p, root) {
			return true
		}
	}
	return false
}

// Verdict returns the recorded verdict for a tree.
func (s *Sandbox) Verdict(tree string) (record.Verdict, bool) {
	v, ok := s.Verdicts[tree]
	return v, ok
}

// newVerdict records a verify result under the record's lock.
func (s *Sandbox) newVerdict(tree string, code int) (*record.Verdict, error) {
	v := record.Verdict{Tree: tree, OK: code == 0, ExitCode: code, Command: s.Verify, Time: time.Now().UTC()}
	err := s.Update(func(r *record.Record) error {
		if r.Verdicts == nil {
			r.Verdicts = map[string]record.Verdict{}
		}
		r.Verdicts[tree] = v
		return nil
	})
	return &v, err
}
