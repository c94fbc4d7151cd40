package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// LandCmd is git sandbox land.
type LandCmd struct {
	Branch   string `arg:"" help:"The sandbox."`
	Message  string `short:"m" help:"Commit message (default: the prompt, else the agent's last commit subject)." placeholder:"MSG"`
	Onto     string `help:"Land on this branch instead of the sandbox's base." placeholder:"REF"`
	Merge    bool   `help:"Keep the agent's commits, under a merge commit."`
	Keep     bool   `help:"Keep the sandbox after landing (the next land starts from here, on the branch landed on)."`
	Force    bool   `help:"Land although verify failed or ran on other work."`
	DryRun   bool   `help:"Show what would land and change nothing."`
	Expect   string `help:"Land only if the work is this tree (as git sandbox diff printed it)." placeholder:"TREE"`
	Update   bool   `help:"Run git sandbox update first; land only if it leaves no conflicts."`
	NoSign   bool   `help:"Do not sign the commit, even with commit.gpgSign set."`
	NoVerify bool   `help:"Skip your pre-commit and commit-msg hooks (recorded in the commit); not the verify command."`
}

// Help is land's long help.
func (c *LandCmd) Help() string {
	return `Applies the sandbox's change — baseline to a final snapshot, so uncommitted work
lands too and work present at start does not — onto the base branch's current
tip with a 3-way merge, as one commit with trailers naming the sandbox, the
agent and the baseline. The base ref moves by compare-and-swap; when the base is
checked out, its files and index follow, and local changes elsewhere stay.
Lands onto one branch take turns for that move: one whose base another land
moved meanwhile merges again onto the new tip (your hooks run again on the new
tree). A land that was killed is finished or undone by the next land onto the
branch, or by git sandbox doctor.
The trailers join the message's own trailer block (Signed-off-by …); a land
--force past a failed verify says so in a Sandbox-Forced trailer. With
commit.gpgSign set the commit is signed as git commit signs (user.signingKey,
gpg.format openpgp or ssh); --no-sign leaves it unsigned.

Your pre-commit and commit-msg hooks (core.hooksPath, else .git/hooks) run
for the landed commit as git commit runs them, but never on this machine: in a
fresh container hardened like verify's, on an exported copy of the tree to land
(a repository of its own: HEAD on the base branch, the index holding the tree).
commit-msg may rewrite the message (plain text only); files the hooks change are
not taken. A hook that fails refuses the land with its output. --no-verify skips
them, as git commit --no-verify does, and the commit records it in a
Sandbox-No-Verify trailer. Without such hooks nothing runs.

With --expect TREE it lands only the tree you reviewed: git sandbox diff prints
it, and work that changed since (an agent that noticed the review) is refused.
Land prints the diffstat of what it applies.

Refuses while the agent runs, when verify failed or ran on other work (--force
overrides that), when the worktree holds files in no snapshot that removing it
would lose — a nested git repository, an untracked file over
rescue.max_file_size, files written inside a submodule (--force lands the rest
and deletes them; --keep deletes nothing) — and when the base's checkout has local changes where the change
writes. A conflict changes nothing and exits with status 3: bring the
base into the sandbox with git sandbox update, resolve, and land again (land
refuses while files the update left conflicted still hold markers; --force
overrides). The message is -m, else the task's prompt, else the subject of the
agent's last commit.

Afterwards the container, worktree, branch and agent repository are removed;
the snapshots stay. With --keep the sandbox stays and the next land starts
from here: its baseline is what landed, and the branch it landed on (--onto)
is its base from now on, for land, update, diff and ps.`
}

// Run lands.
func (c *LandCmd) Run(app *App) error {
	// Ctrl-C while verify or your hooks run must still remove their
	// container and files.
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	app.Ctx = ctx
	env, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	res, err := land.Land(app.Ctx, sb, land.Request{
		Onto: c.Onto, Message: c.Message, Merge: c.Merge, Keep: c.Keep, Force: c.Force, DryRun: c.DryRun, Expect: c.Expect, Update: c.Update, NoSign: c.NoSign, NoVerify: c.NoVerify, Out: app.IO().Stderr,
	})
	if err != nil {
		return err
	}
	p := res.Plan
	onto := termsafe.String(strings.TrimPrefix(p.Ref, "refs/heads/"))
	warnNotLanded(app, res.Final, c.DryRun || p.Empty)
	if res.Already {
		app.UI.Infof("%s had landed on %s as %s by a land that was interrupted; finished it", sb.Display(), onto, res.Commit.Short())
		if res.Cleaned {
			app.UI.Infof("removed the sandbox; its snapshots stay (git sandbox rescue list %s)", sb.Display())
		}
		fmt.Fprintln(app.Stdout, res.Commit)
		return nil
	}
	if p.Empty {
		app.UI.Infof("nothing to land: %s changes nothing on %s", sb.Display(), onto)
		return nil
	}
	verb := "landed"
	if c.DryRun {
		verb = "would land"
	}
	if res.Verdict != nil {
		state := "passed"
		if !res.Verdict.OK {
			state = fmt.Sprintf("FAILED (exit code %d), %s with --force", res.Verdict.ExitCode, verb)
		}
		app.UI.Infof("verify %s on this tree", state)
	}
	for _, f := range p.Flags {
		fmt.Fprintf(app.UI.Writer(), "  ! %s: %s\n", termsafe.String(f.Path), termsafe.String(f.Reason))
	}
	if c.DryRun && len(res.Hooks) > 0 {
		app.UI.Infof("your %s hook(s) would run on the tree in a container", strings.Join(res.Hooks, " and "))
	}
	if c.DryRun {
		printDryRun(app, sb.Display(), onto, p)
		return nil
	}
	signed := ""
	if p.Sign {
		signed = ", signed"
	}
	app.UI.Infof("%s %s (tree %s) on %s as %s: %d file(s)%s", verb, sb.Display(), gitcmd.Hash(res.Final.Tree).Short(), onto, res.Commit.Short(), len(p.Changes), signed)
	// What the commit changed on the base: with --update the baseline
	// moved to the base during the land, so the sandbox's old baseline
	// would count the base's own new files as landed.
	if stat, err := review.Patch(app.Ctx, env.Git(), p.Tip.String(), res.Commit.String(), review.PatchOptions{Format: review.FormatStat}); err == nil {
		_ = review.Render(app.UI.Writer(), stat, false)
	} else {
		app.UI.Warnf("cannot show the diffstat: %v", err)
	}
	if p.Checkout != nil {
		app.UI.Infof("updated the checkout %s", p.Checkout.Path)
	}
	if res.Rebased != "" {
		app.UI.Infof("the base of %s is now %s: the next land, update and diff follow it", sb.Display(), termsafe.String(res.Rebased))
	}
	if res.Cleaned {
		app.UI.Infof("removed the sandbox; its snapshots stay (git sandbox rescue list %s)", sb.Display())
	}
	fmt.Fprintln(app.Stdout, res.Commit)
	return nil
}

// printDryRun prints the commit land would make: its message, its files
// and where it would go.
func printDryRun(app *App, name, onto string, p *land.Plan) {
	fmt.Fprintf(app.Stdout, "%s\n", termsafe.Text(strings.TrimRight(p.Message, "\n")))
	fmt.Fprintln(app.Stdout)
	for _, ch := range p.Changes {
		fmt.Fprintf(app.Stdout, "%c\t%s\n", ch.Status, termsafe.String(ch.Path))
	}
	app.UI.Infof("would land %s on %s (%s): %d file(s); nothing was changed", name, onto, p.Tip.Short(), len(p.Changes))
}

// warnNotLanded names the files the snapshot that lands (or would) left out.
func warnNotLanded(app *App, final *rescue.Taken, would bool) {
	if would {
		warnTooLarge(app, final.TooLarge, "would not land")
		warnInSubmodule(app, final.InSubmodule, "would not land")
		return
	}
	warnTooLarge(app, final.TooLarge, "was not landed")
	warnInSubmodule(app, final.InSubmodule, "were not landed")
}
