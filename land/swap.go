package land

// The move of the base. Lands onto one branch from separate processes
// (a fleet, several terminals, a lead agent) take the branch's land lock
// for the short part that ends with the compare-and-swap: the base's tip
// is read again there, and when another land moved it since the plan, the
// land is planned again on the new tip (and what ran on the planned tree —
// verify of the merged tree, the user's commit hooks — runs again on the
// new one) before the swap. Under the lock the swap loses only to what
// moves the branch without it (the user's own git); that is retried a
// bounded number of times. The lock also keeps two lands from updating
// the base's checkout at once, which git's own index lock would refuse
// and a rollback of the loser could undo.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// swapAttempts bounds how often land plans again and retries the
// compare-and-swap when the base moved under it.
const swapAttempts = 5

// swapPause is the pause before the next attempt, times the attempt.
var swapPause = 50 * time.Millisecond

// retryable reports whether err is a swap lost to a moved base.
func retryable(err error) bool {
	return errors.Is(err, ErrMoved) || errors.Is(err, ErrCheckoutMoved)
}

// swap makes the planned commit and moves the base to it, planning again
// first when the base moved; it returns "" when the plan made again had
// nothing left to land.
func (l *landing) swap(ctx context.Context) (gitcmd.Hash, error) {
	var err error
	for attempt := 1; attempt <= swapAttempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Duration(attempt-1) * swapPause):
			}
		}
		var commit gitcmd.Hash
		commit, err = l.swapLocked(ctx)
		if !retryable(err) {
			return commit, err
		}
	}
	return "", usererr.Wrap(err, "%v (%d attempts)", err, swapAttempts).
		Hint("something other than git sandbox keeps moving the branch; land again when it is done")
}

// swapLocked is one attempt, under the branch's land lock.
func (l *landing) swapLocked(ctx context.Context) (gitcmd.Hash, error) {
	journal, unlock, err := l.sb.LockBase(l.ref)
	if err != nil {
		return "", err
	}
	defer unlock()
	g := l.sb.Git()
	// A journal under the lock is a land that died moving the base.
	if what, err := Recover(ctx, g, journal); err != nil {
		return "", err
	} else if what != "" {
		fmt.Fprintf(l.req.Out, "git sandbox: repaired: %s\n", what)
	}
	tip, err := g.RevParse(ctx, l.ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("land: read %s: %w", l.ref, err)
	}
	if tip != l.res.Plan.Tip {
		if err := l.replan(ctx); err != nil || l.done {
			return "", err
		}
	}
	return apply(ctx, g, l.res.Plan, "git sandbox land "+l.rec.Branch, journal)
}

// replan plans the land again on the base's new tip and runs again what
// ran on the old merged tree: verify of the merged tree (the landing
// queue's mode) and the user's commit hooks, on the message as it was
// before they rewrote it.
func (l *landing) replan(ctx context.Context) error {
	msg := l.res.Plan.Message
	if l.unhooked != "" {
		msg = l.unhooked
	}
	p, err := l.prepare(ctx, msg)
	if err != nil {
		return err
	}
	l.res.Plan = p
	if l.done = p.Empty; l.done {
		return nil
	}
	if l.req.VerifyMerged {
		if err := l.verifyMerged(ctx); err != nil || l.done {
			return err
		}
	}
	return l.commitHooks(ctx)
}

// finishLanded finishes a land of this very snapshot that moved the base
// and was killed before it removed the sandbox (or moved its baseline):
// the base holds a commit whose Sandbox-Snapshot trailer names the final
// snapshot, made since the sandbox started.
func (l *landing) finishLanded(ctx context.Context) error {
	if l.rec.BaseTip == "" || l.res.Final == nil {
		return nil
	}
	out, err := l.sb.Git().Output(ctx, "rev-list", "-1", "-F", "--grep=Sandbox-Snapshot: "+l.res.Final.ID,
		l.ref, "^"+l.rec.BaseTip, "--")
	if err != nil || out == "" {
		return nil
	}
	commit, err := gitcmd.ParseHash(out)
	if err != nil {
		return nil
	}
	if err := l.sb.Landed(ctx, Landed{Final: l.res.Final, Commit: commit, Ref: l.ref, Keep: l.req.Keep}); err != nil {
		return err
	}
	l.res.Commit, l.res.Already, l.res.Cleaned = commit, true, !l.req.Keep
	return nil
}
