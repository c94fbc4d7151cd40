package land

import (
	"context"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// mergedVerifyRounds bounds how often a land verifies again because the
// base moved while it verified.
const mergedVerifyRounds = 3

// plan computes the land; with verify configured (it takes time) the
// plan is made again after it, right before anything changes.
func (l *landing) plan(ctx context.Context) error {
	msg, err := l.message(ctx, "")
	if err != nil {
		return err
	}
	p, err := l.prepare(ctx, msg)
	if err != nil {
		return err
	}
	l.res.Plan = p
	l.done = p.Empty
	if p.Empty && !l.req.DryRun {
		return l.finishLanded(ctx)
	}
	return nil
}

// prepare plans the land of the final snapshot with message msg.
func (l *landing) prepare(ctx context.Context, msg string) (*Plan, error) {
	p, err := Prepare(ctx, l.sb.Git(), Options{
		Ref: l.ref, Baseline: l.rec.Baseline, Final: l.res.Final.ID, AgentHead: l.head, Merge: l.req.Merge,
		Message:   msg,
		Forbidden: "refs/heads/" + l.rec.Branch,
		Sandbox:   l.rec.Branch,
		Sign:      l.sign,
		Thorough:  l.req.DryRun,
	})
	if err == nil && p.Checkout != nil && l.sb.InsideSandboxes(p.Checkout.Path) {
		return nil, usererr.New("%s is checked out in another sandbox", termsafe.String(l.onto)).
			Hint("land onto a branch of your own checkout with --onto BRANCH")
	}
	return p, err
}

// verify applies the verify rules: on the merged tree for the landing
// queue, else on the sandbox's final tree; --force goes past what those
// rules allow it to, and the message says so.
func (l *landing) verify(ctx context.Context) error {
	if l.req.VerifyMerged {
		return l.verifyMerged(ctx)
	}
	v, ran, err := l.verifyFinal(ctx)
	l.res.Verdict, l.res.VerifyRan = v, ran
	if err != nil {
		return err
	}
	p := l.res.Plan
	if l.res.Forced = l.forcedPast(v); l.res.Forced != "" {
		if p.Message, err = l.message(ctx, l.res.Forced); err != nil {
			return err
		}
	}
	if l.rec.Verify != "" && !l.req.DryRun {
		// Verify takes time: the base, its checkout and the local changes
		// there are looked at again right before anything changes.
		if p, err = l.prepare(ctx, p.Message); err != nil {
			return err
		}
		l.res.Plan = p
	}
	l.hooksRun()
	l.done = p.Empty || l.req.DryRun
	return nil
}

// hooksRun names the hooks that run on the landed tree (none with
// --no-verify).
func (l *landing) hooksRun() {
	if !l.req.NoVerify {
		l.res.Hooks = l.hooks
	}
}

// verifyFinal: no verify configured, nothing to do; a verdict for the
// final tree decides; verdicts only for other trees are stale; no verdict
// at all makes land run verify first.
func (l *landing) verifyFinal(ctx context.Context) (*record.Verdict, bool, error) {
	if l.rec.Verify == "" {
		return nil, false, nil
	}
	// A verify running now (the supervisor's, when the agent exited) is
	// waited for: its verdict may be the one for this tree.
	unlock, err := l.sb.LockVerify()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	rec, sb, force := l.sb.Recorded(), l.sb, l.req.Force
	if v, ok := rec.Verdicts[l.res.Final.Tree]; ok {
		if !v.OK && !force {
			return &v, false, usererr.New("verify failed on this tree (exit code %d)", v.ExitCode).
				Hint("fix the work and run git sandbox verify %s again, or land anyway with --force", sb.Display()).
				WithCode(usererr.ExitRefused)
		}
		return &v, false, nil
	}
	if len(rec.Verdicts) > 0 {
		if force {
			return nil, false, nil
		}
		return nil, false, usererr.New("verify ran on another version of the work, not on what would land now").
			Hint("run git sandbox verify %s, or land anyway with --force", sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	if l.req.DryRun {
		return nil, false, nil
	}
	v, err := sb.VerifyTree(ctx, l.res.Final.Tree, l.req.Out)
	if err != nil {
		return nil, true, err
	}
	if !v.OK && !force {
		return v, true, usererr.New("verify failed (exit code %d); nothing was landed", v.ExitCode).
			Hint("fix the work and land again, or land anyway with --force").
			WithCode(usererr.ExitRefused)
	}
	return v, true, nil
}

// forcedPast says what a --force land goes past: a failed verify, or
// verdicts only for other versions of the work.
func (l *landing) forcedPast(v *record.Verdict) string {
	switch {
	case !l.req.Force || l.rec.Verify == "":
		return ""
	case v != nil && !v.OK:
		return "verify failed"
	case v == nil && len(l.sb.Recorded().Verdicts) > 0:
		return "verify not run on this tree"
	}
	return ""
}

// verifyMerged runs verify on the plan's merged tree (a verdict recorded
// for that tree is reused: verdicts are keyed by tree, whoever made it),
// then plans again; when the base moved meanwhile, the new merged tree is
// verified too.
func (l *landing) verifyMerged(ctx context.Context) error {
	if l.rec.Verify == "" || l.req.DryRun {
		l.hooksRun()
		l.done = l.req.DryRun
		return nil
	}
	plan := l.res.Plan
	for range mergedVerifyRounds {
		v, did, err := l.verifyTree(ctx, plan.Tree.String())
		l.res.VerifyRan = l.res.VerifyRan || did
		if err != nil {
			return err
		}
		l.res.Verdict = v
		if !v.OK {
			onto := termsafe.String(strings.TrimPrefix(plan.Ref, "refs/heads/"))
			return usererr.New("verify failed (exit code %d) on the merged tree %s: %s's work on %s as it is now (%s); nothing was landed", v.ExitCode, short(plan.Tree.String()), l.sb.Display(), onto, plan.Tip.Short()).
				Hint("bring the base in with git sandbox update %s, fix the work there (git sandbox exec %s, or a follow-up task), then land again", l.sb.Display(), l.sb.Display()).
				WithCode(usererr.ExitRefused)
		}
		next, err := l.prepare(ctx, plan.Message)
		if err != nil {
			return err
		}
		l.res.Plan = next
		if next.Empty || next.Tree == plan.Tree {
			l.hooksRun()
			l.done = next.Empty
			return nil
		}
		plan = next
	}
	l.res.Verdict = nil
	return usererr.New("the base of %s kept moving while its merged tree was verified; nothing was landed", l.sb.Display()).
		Hint("land again")
}

// verifyTree returns the verdict for tree, running verify when none is
// recorded.
func (l *landing) verifyTree(ctx context.Context, tree string) (*record.Verdict, bool, error) {
	unlock, err := l.sb.LockVerify()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if v, ok := l.sb.Recorded().Verdicts[tree]; ok {
		return &v, false, nil
	}
	v, err := l.sb.VerifyTree(ctx, tree, l.req.Out)
	return v, err == nil, err
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
