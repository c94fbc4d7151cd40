package main

import (
	"io"
	"os"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/ui"

	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/land"
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
	final, sync, err := takeFinal(app, sb)
	if err != nil {
		return err
	}
	g := env.Git()
	changes, err := review.Changes(app.Ctx, g, sb.Baseline, final.ID, c.Paths...)
	if err != nil {
		return err
	}
	warnLeftOut(app, final)
	if len(changes) == 0 {
		if len(c.Paths) > 0 {
			app.UI.Infof("nothing to land at these paths: %s has no changes there since its baseline", sb.Display())
			return nil
		}
		app.UI.Infof("nothing to land: %s has no changes since its baseline", sb.Display())
		return nil
	}
	v := diffView{g: g, start: sb.Start, agentHead: sync.Head}
	v.flags = review.FlagsOf(app.Ctx, g, changes)
	v.color = app.UI.Color(app.Stdout)
	if v.patch, err = c.patch(app, g, sb.Baseline, final.ID, v.color); err != nil {
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
		review.WriteFlags(app.UI.Writer(), v.flags, false)
		return review.Render(out, v.patch, false)
	}
	if err := c.show(app, out, v); err != nil {
		return err
	}
	// The tree shown, so land can refuse anything else: the agent may
	// change its work between this review and land.
	app.UI.Infof("this is tree %s", gitcmd.Hash(final.Tree).Short())
	app.UI.Hintf("git sandbox land %s --expect %s lands exactly this", sb.Display(), gitcmd.Hash(final.Tree).Short())
	return nil
}

// takeFinal takes the snapshot diff shows, as land would take it, and
// warns when the sandbox is still running and about nested repositories.
func takeFinal(app *App, sb *sandbox.Sandbox) (*rescue.Taken, *sandbox.SyncResult, error) {
	running, err := sb.Running(app.Ctx)
	if err == nil && running {
		app.UI.Warnf("%s is still running: its work may still change", sb.Display())
	}
	final, sync, err := sb.Final(app.Ctx, rescue.ReasonManual)
	if err != nil {
		return nil, nil, err
	}
	if running {
		sb.WarnNested(final.Nested)
	}
	warnNestedLost(app, final.Nested, "would not land")
	return final, sync, nil
}

// warnLeftOut warns about the files the snapshot could not keep: they
// would not land. Nested repositories were named already, with what
// land does about them.
func warnLeftOut(app *App, final *rescue.Taken) {
	for _, p := range land.NotNested(final.Skipped, final.Nested) {
		app.UI.Warnf("%s cannot be stored by git and would not land", termsafe.String(p))
	}
	warnTooLarge(app, final.TooLarge, "would not land")
	warnInSubmodule(app, final.InSubmodule, "would not land")
}

// patch is the diff from baseline to final in the format the flags ask
// for, the porcelain of a word diff when it will be coloured.
func (c *DiffCmd) patch(app *App, g *gitcmd.Runner, baseline, final string, color bool) ([]byte, error) {
	format := review.FormatPatch
	switch {
	case c.Stat:
		format = review.FormatStat
	case c.NameOnly:
		format = review.FormatNameOnly
	}
	return review.Patch(app.Ctx, g, baseline, final, review.PatchOptions{
		Format: format, Paths: c.Paths, WordDiff: c.WordDiff, Porcelain: color, Text: c.Text,
	})
}

// diffView is what diff shows, bar the names-only form.
type diffView struct {
	// g is the user's repository.
	g *gitcmd.Runner
	// start and agentHead bound the agent's commits (agentHead is "" when
	// it made none).
	start, agentHead string
	flags            []review.Flag
	patch            []byte
	color            bool
}

// show writes v to out: the paths to look at twice, the agent's commits,
// then the patch (changed words highlighted when asked and coloured).
func (c *DiffCmd) show(app *App, out io.Writer, v diffView) error {
	review.WriteFlags(out, v.flags, v.color)
	if v.agentHead != "" {
		commits, total, err := review.Commits(app.Ctx, v.g, v.start, v.agentHead, maxListedCommits)
		if err != nil {
			return err
		}
		review.WriteCommits(out, commits, total)
	}
	if c.WordDiff && v.color {
		return review.RenderWords(out, v.patch)
	}
	return review.Render(out, v.patch, v.color)
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
