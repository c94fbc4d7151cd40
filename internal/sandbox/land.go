package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
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
	var res *agentrepo.SyncResult
	if s.Copy != nil {
		res, err = s.copySync(ctx, known.String(), budget)
	} else {
		res, err = agentrepo.SyncWithin(ctx, g, s.PrivateGitDir, s.Start, known.String(), budget)
	}
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
	// The sandbox worktree's host-side index follows its branch, so git
	// status there compares against the agent's commits. Only the index is
	// written: no file of the worktree is read.
	if admin, err := worktree.AdminDir(s.CommonDir, s.Worktree); err == nil {
		wg := &gitcmd.Runner{GitDir: admin}
		if err := wg.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: res.Head}); err == nil {
			if err := worktree.StripGitlinks(ctx, wg); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
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
		return nil, nil, err
	}
	snapper := s.Snapshotter()
	snapper.AgentHead = func() string { return sync.Head } // just read by Sync
	snap, err := snapper.Take(ctx, reason)
	if err != nil {
		return nil, nil, err
	}
	return snap, sync, nil
}

// LandOptions are land's flags.
type LandOptions struct {
	Onto    string
	Message string
	Merge   bool
	Keep    bool
	Force   bool
	DryRun  bool
	// Expect is the tree (an id or a prefix of at least 7 digits) the user
	// reviewed, as diff printed it; land refuses any other.
	Expect string
	// Update runs git sandbox update first and lands only when it left no
	// conflicts.
	Update bool
	// NoSign leaves the commit unsigned whatever commit.gpgSign says.
	NoSign bool
	// NoVerify skips the user's pre-commit and commit-msg hooks (as git
	// commit --no-verify does); the commit records it in a trailer.
	NoVerify bool
	// VerifyMerged runs verify on the merged tree — exactly the tree the
	// base will hold — instead of applying the verdict rules to the
	// sandbox's own final tree (the landing queue's mode). A failure
	// refuses whatever Force says.
	VerifyMerged bool
	// Verify runs the verify command when land has to (stdout/stderr of
	// the caller receive its output).
	IO IO
}

// LandResult is what land did or would do.
type LandResult struct {
	Plan    *land.Plan
	Commit  gitcmd.Hash
	Final   *rescue.Taken
	Verdict *record.Verdict
	// VerifyRan is set when land ran verify itself.
	VerifyRan bool
	// Forced says what --force went past ("" when nothing), as recorded in
	// the commit's Sandbox-Forced trailer.
	Forced string
	// Hooks are the user's commit hooks that ran on the landed tree (or
	// would run, with DryRun).
	Hooks   []string
	Cleaned bool
}

// Land applies the sandbox's change onto its base branch as one commit.
func (s *Sandbox) Land(ctx context.Context, o LandOptions) (*LandResult, error) {
	if running, err := s.Running(ctx); err != nil {
		return nil, err
	} else if running {
		return nil, usererr.New("sandbox %s is still running", s.Display()).
			Hint("wait for it (git sandbox wait %s) or stop it (git sandbox stop %s); land works on a stable snapshot", s.Display(), s.Display()).
			WithCode(usererr.ExitRefused)
	}
	ontoName := o.Onto
	if ontoName == "" {
		ontoName = s.Base
	}
	if ontoName == "" {
		return nil, usererr.New("sandbox %s started from a commit, not a branch: land needs to know where to go", s.Display()).
			Hint("name the branch: git sandbox land %s --onto BRANCH", s.Display())
	}
	ref := ontoName
	if !strings.HasPrefix(ref, "refs/") {
		ref = "refs/heads/" + ref
	}
	if err := checkExpect(o.Expect); err != nil {
		return nil, err
	}
	if o.Update && !o.DryRun {
		up, err := s.UpdateBase(ctx, UpdateOptions{})
		if err != nil {
			return nil, err
		}
		if len(up.Conflicts) > 0 {
			return nil, conflictsLeft(s, up.Conflicts, "update left conflicts; nothing was landed")
		}
	}
	final, sync, err := s.Final(ctx, rescue.ReasonLand)
	if err != nil {
		return nil, err
	}
	if o.Expect != "" && !strings.HasPrefix(final.Tree, strings.ToLower(o.Expect)) {
		return nil, usererr.New("the work in %s changed since you reviewed it: it is now tree %s, not %s", s.Display(), shortID(final.Tree), termsafe.String(o.Expect)).
			Hint("nothing was landed; look again with git sandbox diff %s, then land the tree it names", s.Display()).
			WithCode(usererr.ExitRefused)
	}
	if !o.Force {
		left, err := s.markersLeft(ctx, final.ID)
		if err != nil {
			return nil, err
		}
		if len(left) > 0 {
			return nil, conflictsLeft(s, left, "conflict markers from git sandbox update remain; nothing was landed").
				Hint("or land them as they are with --force")
		}
	}
	if len(final.Skipped) > 0 {
		return nil, usererr.New("the sandbox holds %d path(s) git cannot store, such as %s", len(final.Skipped), termsafe.String(final.Skipped[0])).
			Hint("remove or rename them in the worktree %s (or with git sandbox exec %s -- …), and land again; nothing was landed", s.WorktreeText(), s.Display()).
			WithCode(usererr.ExitRefused)
	}
	if len(final.Nested) > 0 && !o.Keep && !o.Force {
		return nil, nestedRefusal(s, final.Nested, "git sandbox land")
	}
	res := &LandResult{Final: final}
	if o.Merge && (sync.Head == "" || sync.Head == s.Start) {
		return nil, usererr.New("the agent made no commits: there is nothing for --merge to keep").
			Hint("land without --merge")
	}
	hooksDir, hookNames, err := s.env.CommitHooks(ctx)
	if err != nil {
		return nil, err
	}
	var skipped []string
	if o.NoVerify {
		skipped = hookNames
	}
	msg, err := s.commitMessage(ctx, o.Message, sync.Head, s.landTrailers(final.ID, "", skipped))
	if err != nil {
		return nil, err
	}
	sign := !o.NoSign && s.env.signsCommits(ctx)
	prepare := func() (*land.Plan, error) {
		plan, err := land.Prepare(ctx, s.env.Git(), land.Options{
			Ref: ref, Baseline: s.Baseline, Final: final.ID, AgentHead: sync.Head, Merge: o.Merge,
			Message:   msg,
			Forbidden: "refs/heads/" + s.Branch,
			Sandbox:   s.Branch,
			Sign:      sign,
		})
		if err == nil && plan.Checkout != nil && s.env.insideSandboxes(plan.Checkout.Path) {
			return nil, usererr.New("%s is checked out in another sandbox", termsafe.String(ontoName)).
				Hint("land onto a branch of your own checkout with --onto BRANCH")
		}
		return plan, err
	}
	plan, err := prepare()
	if err != nil {
		return nil, err
	}
	res.Plan = plan
	if plan.Empty {
		return res, nil
	}
	if o.VerifyMerged {
		verdict, ran, next, err := s.verifyMerged(ctx, plan, prepare, o)
		res.Verdict, res.VerifyRan = verdict, ran
		if err != nil {
			return res, err
		}
		res.Plan, plan = next, next
		if !o.NoVerify {
			res.Hooks = hookNames
		}
		if plan.Empty || o.DryRun {
			return res, nil
		}
		if err := s.landHooks(ctx, res, plan, hooksDir, final, skipped, o); err != nil {
			return nil, err
		}
		return s.apply(ctx, res, plan, final, o)
	}
	verdict, ran, err := s.verifyForLand(ctx, final, o)
	if err != nil {
		return nil, err
	}
	res.Verdict, res.VerifyRan = verdict, ran
	if res.Forced = forcedPast(s, verdict, o.Force); res.Forced != "" {
		if msg, err = s.commitMessage(ctx, o.Message, sync.Head, s.landTrailers(final.ID, res.Forced, skipped)); err != nil {
			return nil, err
		}
		plan.Message = msg
	}
	if s.Verify != "" && !o.DryRun {
		// Verify takes time: the base, its checkout and the local changes
		// there are looked at again right before anything changes.
		if plan, err = prepare(); err != nil {
			return nil, err
		}
		res.Plan = plan
		if plan.Empty {
			return res, nil
		}
	}
	if !o.NoVerify {
		res.Hooks = hookNames
	}
	if o.DryRun {
		return res, nil
	}
	if err := s.landHooks(ctx, res, plan, hooksDir, final, skipped, o); err != nil {
		return nil, err
	}
	return s.apply(ctx, res, plan, final, o)
}

// landHooks runs the user's commit hooks (res.Hooks) last, on exactly the
// tree and message that land: git commit runs them on what it commits. The
// base moving meanwhile is caught by Apply's compare-and-swap.
func (s *Sandbox) landHooks(ctx context.Context, res *LandResult, plan *land.Plan, hooksDir string, final *rescue.Taken, skipped []string, o LandOptions) error {
	if len(res.Hooks) == 0 {
		return nil
	}
	hooked, err := s.runCommitHooks(ctx, plan, hooksDir, res.Hooks, o.IO)
	if err != nil {
		return err
	}
	if hooked != plan.Message {
		if plan.Message, err = withOwnTrailers(ctx, s, hooked, s.landTrailers(final.ID, res.Forced, skipped)); err != nil {
			return err
		}
	}
	return nil
}

// apply moves the base to the planned commit and cleans up (or, with
// Keep, moves the baseline).
func (s *Sandbox) apply(ctx context.Context, res *LandResult, plan *land.Plan, final *rescue.Taken, o LandOptions) (*LandResult, error) {
	commit, err := land.Apply(ctx, s.env.Git(), plan, "git sandbox land "+s.Branch)
	if err != nil {
		return nil, err
	}
	res.Commit = commit
	if o.Keep {
		// The next land starts where this one ended.
		err := s.Update(func(r *record.Record) error {
			r.Baseline = final.ID
			r.BaseTip = commit.String()
			r.UpdateConflicts = nil
			return nil
		})
		if err != nil {
			return res, err
		}
		// The newest snapshot, measured against the new baseline, so ps
		// and rm see no unlanded work (the files were just read).
		_, err = s.Snapshotter().Restamp(ctx, rescue.ReasonLand)
		return res, err
	}
	d, err := s.engine(ctx)
	if err != nil {
		return res, err
	}
	if err := s.teardown(ctx, d); err != nil {
		return res, fmt.Errorf("landed as %s, but cleaning up failed: %w", commit.Short(), err)
	}
	res.Cleaned = true
	return res, nil
}

// mergedVerifyRounds bounds how often verifyMerged verifies again because
// the base moved while it verified.
const mergedVerifyRounds = 3

// verifyMerged runs verify on the plan's merged tree (a verdict recorded
// for that tree is reused: verdicts are keyed by tree, whoever made it),
// then plans again; when the base moved meanwhile, the new merged tree is
// verified too. It returns the plan to apply.
func (s *Sandbox) verifyMerged(ctx context.Context, plan *land.Plan, prepare func() (*land.Plan, error), o LandOptions) (*record.Verdict, bool, *land.Plan, error) {
	if s.Verify == "" || o.DryRun {
		return nil, false, plan, nil
	}
	ran := false
	for range mergedVerifyRounds {
		v, did, err := s.verifyTree(ctx, plan.Tree.String(), o.IO)
		ran = ran || did
		if err != nil {
			return nil, ran, nil, err
		}
		onto := termsafe.String(strings.TrimPrefix(plan.Ref, "refs/heads/"))
		if !v.OK {
			return v, ran, nil, usererr.New("verify failed (exit code %d) on the merged tree %s: %s's work on %s as it is now (%s); nothing was landed", v.ExitCode, shortID(plan.Tree.String()), s.Display(), onto, plan.Tip.Short()).
				Hint("bring the base in with git sandbox update %s, fix the work there (git sandbox exec %s, or a follow-up task), then land again", s.Display(), s.Display()).
				WithCode(usererr.ExitRefused)
		}
		next, err := prepare()
		if err != nil {
			return v, ran, nil, err
		}
		if next.Empty || next.Tree == plan.Tree {
			return v, ran, next, nil
		}
		plan = next
	}
	return nil, ran, nil, usererr.New("the base of %s kept moving while its merged tree was verified; nothing was landed", s.Display()).
		Hint("land again")
}

// verifyTree returns the verdict for tree, running verify when none is
// recorded.
func (s *Sandbox) verifyTree(ctx context.Context, tree string, io IO) (*record.Verdict, bool, error) {
	unlock, err := s.lockVerify()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if v, ok := s.Verdicts[tree]; ok {
		return &v, false, nil
	}
	v, err := s.runVerifyLocked(ctx, &rescue.Taken{Snapshot: rescue.Snapshot{Tree: tree}}, io)
	return v, err == nil, err
}

// verifyForLand applies the verify rules: no verify configured, nothing to
// do; a verdict for the final tree decides; verdicts only for other trees
// are stale; no verdict at all makes land run verify first.
func (s *Sandbox) verifyForLand(ctx context.Context, final *rescue.Taken, o LandOptions) (*record.Verdict, bool, error) {
	if s.Verify == "" {
		return nil, false, nil
	}
	// A verify running now (the supervisor's, when the agent exited) is
	// waited for: its verdict may be the one for this tree.
	unlock, err := s.lockVerify()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if v, ok := s.Verdicts[final.Tree]; ok {
		if !v.OK && !o.Force {
			return &v, false, usererr.New("verify failed on this tree (exit code %d)", v.ExitCode).
				Hint("fix the work and run git sandbox verify %s again, or land anyway with --force", s.Display()).
				WithCode(usererr.ExitRefused)
		}
		return &v, false, nil
	}
	if len(s.Verdicts) > 0 {
		if o.Force {
			return nil, false, nil
		}
		return nil, false, usererr.New("verify ran on another version of the work, not on what would land now").
			Hint("run git sandbox verify %s, or land anyway with --force", s.Display()).
			WithCode(usererr.ExitRefused)
	}
	if o.DryRun {
		return nil, false, nil
	}
	v, err := s.runVerifyLocked(ctx, final, o.IO)
	if err != nil {
		return nil, true, err
	}
	if !v.OK && !o.Force {
		return v, true, usererr.New("verify failed (exit code %d); nothing was landed", v.ExitCode).
			Hint("fix the work and land again, or land anyway with --force").
			WithCode(usererr.ExitRefused)
	}
	return v, true, nil
}

// forcedPast says what a --force land goes past: a failed verify, or
// verdicts only for other versions of the work.
func forcedPast(s *Sandbox, v *record.Verdict, force bool) string {
	switch {
	case !force || s.Verify == "":
		return ""
	case v != nil && !v.OK:
		return "verify failed"
	case v == nil && len(s.Verdicts) > 0:
		return "verify not run on this tree"
	}
	return ""
}

// commitMessage is -m, else the prompt's first line, else the subject of
// the agent's last commit, else "Land sandbox <branch>", with trailers naming
// the sandbox, the agent and the baseline (and what --force went past)
// joined to the message's own trailer block.
func (s *Sandbox) commitMessage(ctx context.Context, msg, agentHead string, trailers []land.Trailer) (string, error) {
	if strings.TrimSpace(msg) == "" {
		subject := strings.TrimSpace(strings.SplitN(strings.TrimSpace(s.Prompt), "\n", 2)[0])
		if subject == "" {
			subject = s.agentSubject(ctx, agentHead)
		}
		if subject == "" {
			subject = "Land sandbox " + s.Branch
		}
		if len([]rune(subject)) > 72 {
			subject = string([]rune(subject)[:71]) + "…"
		}
		msg = subject
		if body := strings.TrimSpace(s.Prompt); body != "" && body != subject {
			msg += "\n\n" + body
		}
	}
	return land.WithTrailers(ctx, s.env.Git(), msg, trailers)
}

// landTrailers name the sandbox, the agent, the baseline and the final
// snapshot, what --force went past, and the hooks --no-verify skipped.
func (s *Sandbox) landTrailers(final, forced string, skipped []string) []land.Trailer {
	trailers := []land.Trailer{
		{Key: "Sandbox", Value: s.Branch},
		{Key: "Sandbox-Agent", Value: s.Agent},
		{Key: "Sandbox-Baseline", Value: s.Baseline},
		{Key: "Sandbox-Snapshot", Value: final},
	}
	if u := s.TotalUsage(); !u.IsZero() {
		// Numbers formatted here, never the agent's text.
		trailers = append(trailers, land.Trailer{Key: "Sandbox-Usage", Value: u.String()})
	}
	if forced != "" {
		trailers = append(trailers, land.Trailer{Key: "Sandbox-Forced", Value: forced})
	}
	if len(skipped) > 0 {
		trailers = append(trailers, hooksTrailer(skipped))
	}
	return trailers
}

// agentSubject is the subject of the agent's newest commit of its own (not
// a merge, not one the sandbox started with), or "".
func (s *Sandbox) agentSubject(ctx context.Context, head string) string {
	if head == "" || head == s.Start {
		return ""
	}
	if _, err := gitcmd.ParseHash(head); err != nil {
		return ""
	}
	out, err := s.env.Git().Output(ctx, "log", "-1", "--no-merges", "--format=%s", head, "^"+s.Start)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(oneLine(out))
}

// markersLeft lists the paths the last update left conflicted that still
// hold conflict markers in the snapshot.
func (s *Sandbox) markersLeft(ctx context.Context, snapshot string) ([]string, error) {
	var left []string
	g := s.env.Git()
	for _, p := range s.UpdateConflicts {
		b, err := g.Run(ctx, nil, "cat-file", "blob", snapshot+":"+p)
		if err != nil {
			continue // removed, or no longer a file
		}
		if hasMarkers(b) {
			left = append(left, p)
		}
	}
	return left, nil
}

// maxMarkerScan bounds how much of a file ps reads looking for markers.
const maxMarkerScan = 16 << 20

// ConflictsInWorktree lists the paths the last update left conflicted that
// still hold conflict markers in the worktree now. The files are the
// agent's: each is opened beneath the worktree, not through a link, only if
// it is a regular file, and at most maxMarkerScan bytes of it are read.
func (s *Sandbox) ConflictsInWorktree() []string {
	if len(s.UpdateConflicts) == 0 {
		return nil
	}
	root, err := os.OpenRoot(s.Worktree)
	if err != nil {
		return nil
	}
	defer root.Close()
	var left []string
	for _, p := range s.UpdateConflicts {
		// os.Root follows a link that stays beneath it, O_NOFOLLOW or not.
		if fi, err := root.Lstat(filepath.FromSlash(p)); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		f, err := root.OpenFile(filepath.FromSlash(p), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		if err == nil && fi.Mode().IsRegular() {
			b, err := io.ReadAll(io.LimitReader(f, maxMarkerScan))
			if err == nil && hasMarkers(b) {
				left = append(left, p)
			}
		}
		f.Close()
	}
	return left
}

// hasMarkers reports whether content holds a conflict's opening and closing
// markers at the start of a line.
func hasMarkers(b []byte) bool {
	open := bytes.HasPrefix(b, []byte("<<<<<<< ")) || bytes.Contains(b, []byte("\n<<<<<<< "))
	return open && bytes.Contains(b, []byte("\n>>>>>>> "))
}

// conflictsLeft is the error for paths still in conflict after an update.
func conflictsLeft(s *Sandbox, paths []string, msg string) *usererr.Error {
	return usererr.New("%s: %s", msg, strings.Join(quoteAll(paths), ", ")).
		Hint("resolve them in the sandbox (git sandbox exec %s, or a follow-up task: git sandbox start %s -p …), then land again", s.Display(), s.Display()).
		WithCode(usererr.ExitConflict)
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

// checkExpect refuses an --expect value that is not a tree id or a prefix
// of one long enough to mean one tree.
func checkExpect(x string) error {
	if x == "" {
		return nil
	}
	if len(x) < 7 || len(x) > 64 || strings.Trim(strings.ToLower(x), "0123456789abcdef") != "" {
		return usererr.New("--expect %s is not a tree id", termsafe.String(x)).
			Hint("give the tree git sandbox diff printed (at least 7 hex digits)")
	}
	return nil
}

// signsCommits reports whether the user's configuration asks git commit
// to sign (commit.gpgSign).
func (e *Env) signsCommits(ctx context.Context) bool {
	out, err := e.Git().Output(ctx, "config", "--type=bool", "--get", "commit.gpgSign")
	return err == nil && out == "true"
}
