package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/ui"

	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// DiffCmd is git sandbox diff.
type DiffCmd struct {
	Branch   string   `arg:"" help:"The sandbox."`
	Paths    []string `arg:"" optional:"" help:"Only these paths (pathspecs, after --)."`
	Stat     bool     `help:"Only the files changed and how much." xor:"format"`
	NameOnly bool     `help:"Only the names of the files changed." xor:"format"`
	WordDiff bool     `help:"Show changed words instead of changed lines." xor:"format"`
	Text     bool     `short:"a" help:"Show binary files as text (escaped), like git diff --text."`
	NoPager  bool     `help:"Do not page the output, even on a terminal."`
}

// Help is diff's long help.
func (c *DiffCmd) Help() string {
	return `Shows exactly what land would apply: the change from the sandbox's baseline to a
snapshot taken now (committed and uncommitted work alike; work that was there at
start is not part of it). The agent's commits are brought back first.

Paths to look at twice are listed first: symlinks (and where they point),
gitlinks and .gitmodules, executable bits, CI workflows, hooks,
package-manager and build scripts, editor and agent settings, and binary content
in a text or source file (git shows it only as "Binary files differ"; --text
shows it, escaped). Renames are detected as git diff detects them (diff.renames
is honoured). Colour on a terminal unless NO_COLOR is set; changed words are
highlighted. The agent's commits are listed after the flags: land --merge
keeps each of them as it is.

On a terminal the output goes through your pager, chosen as git chooses it
(GIT_PAGER, core.pager, PAGER, less); --no-pager turns it off. Paths after
-- limit the diff: git sandbox diff BRANCH -- src/

The tree shown is named at the end; land --expect TREE lands exactly it.`
}

// Run shows the change.
func (c *DiffCmd) Run(app *App) error {
	env, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	running, err := sb.Running(app.Ctx)
	if err == nil && running {
		app.UI.Warnf("%s is still running: its work may still change", sb.Display())
	}
	final, sync, err := sb.Final(app.Ctx, rescue.ReasonManual)
	if err != nil {
		return err
	}
	if running {
		sb.WarnNested(final.Nested)
	}
	warnNestedLost(app, final.Nested, "would not land")
	g := env.Git()
	changes, err := review.Changes(app.Ctx, g, sb.Baseline, final.ID, c.Paths...)
	if err != nil {
		return err
	}
	for _, p := range final.Skipped {
		app.UI.Warnf("%s cannot be stored by git and would not land", termsafe.String(p))
	}
	warnTooLarge(app, final.TooLarge, "would not land")
	warnInSubmodule(app, final.InSubmodule, "would not land")
	if len(changes) == 0 {
		if len(c.Paths) > 0 {
			app.UI.Infof("nothing to land at these paths: %s has no changes there since its baseline", sb.Display())
			return nil
		}
		app.UI.Infof("nothing to land: %s has no changes since its baseline", sb.Display())
		return nil
	}
	flags := review.FlagsOf(app.Ctx, g, changes)
	color := app.UI.Color(app.Stdout)
	format := review.FormatPatch
	switch {
	case c.Stat:
		format = review.FormatStat
	case c.NameOnly:
		format = review.FormatNameOnly
	}
	patch, err := review.Patch(app.Ctx, g, sb.Baseline, final.ID, review.PatchOptions{
		Format: format, Paths: c.Paths, WordDiff: c.WordDiff, Porcelain: color, Text: c.Text,
	})
	if err != nil {
		return err
	}
	out := app.Stdout
	if !c.NoPager {
		if pager := startPager(app, g); pager != nil {
			defer func() { _ = pager.Close() }()
			out = pager
		}
	}
	if c.NameOnly {
		// The names alone go to stdout, for scripts; the flags to stderr.
		printFlags(app.UI.Writer(), flags, false)
		return review.Render(out, patch, false)
	}
	printFlags(out, flags, color)
	if sync.Head != "" {
		commits, total, err := review.Commits(app.Ctx, g, sb.Start, sync.Head, maxListedCommits)
		if err != nil {
			return err
		}
		printCommits(out, commits, total)
	}
	if c.WordDiff && color {
		err = review.RenderWords(out, patch)
	} else {
		err = review.Render(out, patch, color)
	}
	if err != nil {
		return err
	}
	// The tree shown, so land can refuse anything else: the agent may
	// change its work between this review and land.
	app.UI.Infof("this is tree %s", gitcmd.Hash(final.Tree).Short())
	app.UI.Hintf("git sandbox land %s --expect %s lands exactly this", sb.Display(), gitcmd.Hash(final.Tree).Short())
	return nil
}

// startPager starts the user's pager when stdout is a terminal, chosen as
// git chooses it: GIT_PAGER, core.pager, PAGER, else less. It returns nil
// when there is no pager to run ("cat", empty, or not a terminal).
func startPager(app *App, g *gitcmd.Runner) *proc.Pager {
	f, ok := app.Stdout.(*os.File)
	if !ok || !ui.IsTerminal(f) {
		return nil
	}
	cmd, set := os.LookupEnv("GIT_PAGER")
	if !set {
		// git var reads core.pager and PAGER; the runner drops GIT_*
		// variables, so GIT_PAGER was looked at above.
		out, err := g.Output(app.Ctx, "var", "GIT_PAGER")
		if err != nil {
			return nil
		}
		cmd = out
	}
	if cmd = strings.TrimSpace(cmd); cmd == "" || cmd == "cat" {
		return nil
	}
	p, err := proc.StartPager(cmd, f)
	if err != nil {
		app.UI.Warnf("cannot start the pager %s: %v", termsafe.String(cmd), err)
		return nil
	}
	return p
}

// maxListedCommits is how many of the agent's commits diff names.
const maxListedCommits = 50

// printCommits lists the agent's commits: land --merge keeps each of
// them, with every file it ever held, not only the change the diff shows.
func printCommits(w io.Writer, commits []review.Commit, total int) {
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "land --merge would also add the agent's %d commit(s):\n", total)
	for _, c := range commits {
		fmt.Fprintf(w, "  %s %s\n", termsafe.String(c.ID), termsafe.String(c.Subject))
	}
	if total > len(commits) {
		fmt.Fprintf(w, "  … and %d more\n", total-len(commits))
	}
	fmt.Fprintln(w)
}

func printFlags(w io.Writer, flags []review.Flag, color bool) {
	if len(flags) == 0 {
		return
	}
	on, off := "", ""
	if color {
		on, off = "\x1b[1;33m", "\x1b[0m"
	}
	fmt.Fprintf(w, "%slook at these twice:%s\n", on, off)
	for _, f := range flags {
		fmt.Fprintf(w, "  %s! %s%s: %s\n", on, termsafe.String(f.Path), off, termsafe.String(f.Reason))
	}
	fmt.Fprintln(w)
}
