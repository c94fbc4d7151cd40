package main

import (
	"fmt"
	"io"

	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// DiffCmd is git sandbox diff.
type DiffCmd struct {
	Branch   string `arg:"" help:"The sandbox."`
	Stat     bool   `help:"Only the files changed and how much." xor:"format"`
	NameOnly bool   `help:"Only the names of the files changed." xor:"format"`
}

// Help is diff's long help.
func (c *DiffCmd) Help() string {
	return `Shows exactly what land would apply: the change from the sandbox's baseline to a
snapshot taken now (committed and uncommitted work alike; work that was there at
start is not part of it). The agent's commits are brought back first.

Paths to look at twice are listed first: symlinks (and where they point),
gitlinks and .gitmodules, executable bits, CI workflows, hooks,
package-manager and build scripts, editor and agent settings. The agent's
commits are listed next: land --merge keeps each of them as it is. Colour on a
terminal unless NO_COLOR is set; changed words are highlighted.`
}

// Run shows the change.
func (c *DiffCmd) Run(app *App) error {
	env, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	if running, err := sb.Running(app.Ctx); err == nil && running {
		app.UI.Warnf("%s is still running: its work may still change", sb.Display())
	}
	final, sync, err := sb.Final(app.Ctx, rescue.ReasonManual)
	if err != nil {
		return err
	}
	g := env.Git()
	changes, err := review.Changes(app.Ctx, g, sb.Baseline, final.ID)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		app.UI.Infof("nothing to land: %s has no changes since its baseline", sb.Display())
		return nil
	}
	flags := review.FlagsOf(app.Ctx, g, changes)
	color := app.UI.Color(app.Stdout)
	flagOut := app.Stdout
	format := review.FormatPatch
	switch {
	case c.Stat:
		format = review.FormatStat
	case c.NameOnly:
		format = review.FormatNameOnly
		flagOut = app.UI.Writer()
		color = false
	}
	printFlags(flagOut, flags, color && flagOut == app.Stdout)
	if sync.Head != "" {
		commits, total, err := review.Commits(app.Ctx, g, sb.Start, sync.Head, maxListedCommits)
		if err != nil {
			return err
		}
		printCommits(flagOut, commits, total)
	}
	for _, p := range final.Skipped {
		app.UI.Warnf("%s cannot be stored by git and would not land", termsafe.String(p))
	}
	patch, err := review.Patch(app.Ctx, g, sb.Baseline, final.ID, format)
	if err != nil {
		return err
	}
	return review.Render(app.Stdout, patch, color)
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
