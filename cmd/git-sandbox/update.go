package main

import (
	"fmt"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// UpdateCmd is git sandbox update.
type UpdateCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	Wait   bool   `help:"Wait for a running agent to exit instead of refusing."`
}

// Help is update's long help.
func (c *UpdateCmd) Help() string {
	return `Brings the base branch's current tip into the sandbox: a 3-way merge of the
base tip and the sandbox's files (committed, uncommitted and carried work alike),
with the commit the sandbox is based on as merge base, written into the sandbox's
worktree. Clean results apply silently; conflicting files get standard conflict
markers labelled with the sandbox and the base, and are listed.

The baseline moves to the base tip, so land afterwards applies only the agent's
work. The agent's repository sees the new base: its base branch moves, and its
branch fast-forwards or gets a merge commit (with conflicts, its next commit is
the merge). What the agent had staged stays staged, except on paths the base
changed too (named; the files keep the content). A snapshot is taken before and
after, so nothing can be lost.

Refused while the agent runs (stop it first, or --wait). Exits with status 3
when conflicts remain; land refuses until they are resolved.`
}

// Run updates.
func (c *UpdateCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	res, err := sb.UpdateBase(app.Ctx, sandbox.UpdateOptions{Wait: c.Wait})
	if err != nil {
		return err
	}
	base := termsafe.String(sb.Base)
	if res.UpToDate {
		app.UI.Infof("%s is up to date with %s (%s)", sb.Display(), base, res.Tip.Short())
		return nil
	}
	app.UI.Infof("updated %s to %s (%s); snapshots %s before, %s after",
		sb.Display(), base, res.Tip.Short(), gitcmd.Hash(res.Before.ID).Short(), gitcmd.Hash(res.After.ID).Short())
	if len(res.Conflicts) == 0 {
		return nil
	}
	for _, p := range res.Conflicts {
		fmt.Fprintf(app.Stdout, "%s\n", termsafe.String(p))
	}
	names := make([]string, len(res.Conflicts))
	for i, p := range res.Conflicts {
		names[i] = termsafe.String(p)
	}
	return usererr.New("%d path(s) conflict and hold conflict markers: %s", len(res.Conflicts), strings.Join(names, ", ")).
		Hint("resolve them in the sandbox: git sandbox exec %s, or a follow-up task with git sandbox start %s -p …", sb.Display(), sb.Display()).
		Hint("then git sandbox land %s; it refuses while the markers remain", sb.Display()).
		WithCode(usererr.ExitConflict)
}
