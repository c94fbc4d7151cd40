package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// RescueCmd groups the snapshot commands.
type RescueCmd struct {
	List     RescueListCmd     `cmd:"" help:"List every snapshot, newest first."`
	Show     RescueShowCmd     `cmd:"" help:"Show what a snapshot holds, against its baseline."`
	Restore  RescueRestoreCmd  `cmd:"" help:"Bring a snapshot back as a new branch, or into its sandbox."`
	Snapshot RescueSnapshotCmd `cmd:"" help:"Take a snapshot of a sandbox now."`
	Prune    RescuePruneCmd    `cmd:"" help:"Delete the snapshots of removed sandboxes older than a given age."`
}

// resolveSnapshot opens the repository and finds the snapshot the user named.
func resolveSnapshot(app *App, name string) (*sandbox.Env, *rescue.Snapshot, error) {
	env, err := app.Env()
	if err != nil {
		return nil, nil, err
	}
	s, err := rescue.Resolve(app.Ctx, env.Git(), name)
	return env, s, err
}

// RescueListCmd is git sandbox rescue list.
type RescueListCmd struct {
	Branch string `arg:"" optional:"" help:"Only this sandbox's snapshots."`
	JSON   bool   `help:"Print a JSON array."`
}

// Help is rescue list's long help.
func (c *RescueListCmd) Help() string {
	return `Every snapshot of every sandbox of this repository, live or removed: its id,
sandbox, time, why it was taken (start, setup, interval, exit, stop, land, rm,
manual, restore) and how many files differed from the baseline.`
}

// Run lists snapshots.
func (c *RescueListCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	list, err := rescue.List(app.Ctx, env.Git(), c.Branch)
	if err != nil {
		return err
	}
	if c.JSON {
		if list == nil {
			list = []rescue.Snapshot{}
		}
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(list) == 0 {
		app.UI.Infof("no snapshots")
		return nil
	}
	rows := [][]string{{"SNAPSHOT", "SANDBOX", "TIME", "REASON", "CHANGES", "NOTE"}}
	for _, s := range list {
		note := ""
		if len(s.Skipped) > 0 {
			note = fmt.Sprintf("%d path(s) git cannot store were skipped", len(s.Skipped))
		}
		if len(s.TooLarge) > 0 {
			note = strings.TrimSpace(note + fmt.Sprintf(" %d file(s) too large were skipped", len(s.TooLarge)))
		}
		if len(s.Nested) > 0 {
			note = strings.TrimSpace(note + fmt.Sprintf(" %d nested repositor%s", len(s.Nested), map[bool]string{true: "y", false: "ies"}[len(s.Nested) == 1]))
		}
		if strings.Contains(s.Ref, "/ended/") {
			note = strings.TrimSpace(note + " ended sandbox")
		}
		rows = append(rows, []string{s.ID[:12], termsafe.String(s.Branch), s.Time.Local().Format("2006-01-02 15:04:05"), string(s.Reason), strconv.Itoa(s.Changes), note})
	}
	table(app.Stdout, rows)
	return nil
}

// RescueShowCmd is git sandbox rescue show.
type RescueShowCmd struct {
	Snapshot string `arg:"" help:"Snapshot id (as rescue list prints it)."`
	Stat     bool   `help:"Only the files changed and how much."`
}

// Run shows a snapshot.
func (c *RescueShowCmd) Run(app *App) error {
	env, s, err := resolveSnapshot(app, c.Snapshot)
	if err != nil {
		return err
	}
	g := env.Git()
	w := app.Stdout
	fmt.Fprintf(w, "snapshot %s\n", s.ID)
	fmt.Fprintf(w, "sandbox  %s\n", termsafe.String(s.Branch))
	fmt.Fprintf(w, "time     %s\n", s.Time.Local().Format(time.RFC3339))
	fmt.Fprintf(w, "reason   %s\n", s.Reason)
	fmt.Fprintf(w, "baseline %s\n", s.Baseline)
	if s.Head != "" {
		fmt.Fprintf(w, "agent    %s (the agent's HEAD then)\n", s.Head)
	}
	fmt.Fprintf(w, "changes  %d files since the baseline\n", s.Changes)
	for _, p := range s.Skipped {
		fmt.Fprintf(w, "skipped  %s (git cannot store this path)\n", termsafe.String(p))
	}
	for _, p := range s.InSubmodule {
		fmt.Fprintf(w, "skipped  %s/… (files written inside a submodule)\n", termsafe.String(p))
	}
	for _, f := range s.TooLarge {
		fmt.Fprintf(w, "skipped  %s (%s, larger than rescue.max_file_size)\n", termsafe.String(f.Path), units.BytesSize(float64(f.Size)))
	}
	for _, p := range s.Nested {
		fmt.Fprintf(w, "skipped  %s/… (a nested git repository: only its commit, if any, is kept)\n", termsafe.String(p))
	}
	fmt.Fprintln(w)
	format := review.FormatPatch
	if c.Stat {
		format = review.FormatStat
	}
	patch, err := review.Patch(app.Ctx, g, s.Baseline, s.ID, review.PatchOptions{Format: format})
	if err != nil {
		return err
	}
	return review.Render(w, patch, app.UI.Color(w))
}

// RescueRestoreCmd is git sandbox rescue restore.
type RescueRestoreCmd struct {
	Snapshot string `arg:"" help:"Snapshot id (as rescue list prints it)."`
	Branch   string `help:"Create this branch holding the snapshot's files (no sandbox needed)." placeholder:"NEW" xor:"where" required:""`
	Worktree bool   `help:"Put the snapshot's files back into its sandbox's worktree." xor:"where" required:""`
	Force    bool   `help:"Replace an existing branch, or overwrite the worktree's current files."`
}

// Help is rescue restore's long help.
func (c *RescueRestoreCmd) Help() string {
	return `--branch NEW makes a branch with one commit on top of where the sandbox started,
whose files are exactly the snapshot's. --worktree writes the snapshot's files
back into the sandbox (which must not be running); its current state is taken
as a snapshot first. Nothing is overwritten without --force.`
}

// Run restores a snapshot.
func (c *RescueRestoreCmd) Run(app *App) error {
	env, s, err := resolveSnapshot(app, c.Snapshot)
	if err != nil {
		return err
	}
	g := env.Git()
	if c.Branch != "" {
		if err := worktree.ValidBranch(app.Ctx, g, c.Branch); err != nil {
			return err
		}
		commit, err := rescue.RestoreBranch(app.Ctx, g, s, c.Branch, c.Force)
		if err != nil {
			return err
		}
		app.UI.Infof("restored snapshot %s of %s as branch %s (%s)", s.ID[:12], termsafe.String(s.Branch), termsafe.String(c.Branch), commit.Short())
		return nil
	}
	sb, err := env.Find(s.Branch)
	if err != nil {
		return usererr.New("sandbox %s no longer exists", termsafe.String(s.Branch)).
			Hint("restore into a branch instead: git sandbox rescue restore %s --branch NEW", s.ID[:12])
	}
	if running, err := sb.Running(app.Ctx); err != nil || running {
		if err != nil {
			return err
		}
		return usererr.New("sandbox %s is running", sb.Display()).
			Hint("stop it first: git sandbox stop %s", sb.Display()).WithCode(usererr.ExitRefused)
	}
	cur, changed, err := sb.Snapshotter().RestoreWorktree(app.Ctx, s, c.Force)
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		app.UI.Infof("the worktree of %s already holds snapshot %s", sb.Display(), s.ID[:12])
		return nil
	}
	if !c.Force {
		return usererr.New("restoring would change %d file(s) in the worktree of %s", len(changed), sb.Display()).
			Hint("its current state is saved as snapshot %s; rerun with --force to restore", cur.ID[:12]).
			WithCode(usererr.ExitRefused)
	}
	app.UI.Infof("restored snapshot %s into %s (%d files; the state before is snapshot %s)", s.ID[:12], sb.Display(), len(changed), cur.ID[:12])
	return nil
}

// RescueSnapshotCmd is git sandbox rescue snapshot.
type RescueSnapshotCmd struct {
	Branch string `arg:"" help:"The sandbox."`
}

// Run takes a snapshot.
func (c *RescueSnapshotCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	t, err := sb.Snapshotter().Take(app.Ctx, rescue.ReasonManual)
	if err != nil {
		return err
	}
	if !t.New {
		app.UI.Infof("nothing changed since snapshot %s", t.ID[:12])
	} else {
		app.UI.Infof("snapshot %s (%d changes since the baseline)", t.ID[:12], t.Changes)
	}
	for _, p := range t.Skipped {
		app.UI.Warnf("skipped %s: git cannot store this path", termsafe.String(p))
	}
	warnTooLarge(app, t.TooLarge, "is not in the snapshot")
	fmt.Fprintln(app.Stdout, t.ID)
	return nil
}

// RescuePruneCmd is git sandbox rescue prune.
type RescuePruneCmd struct {
	OlderThan string `required:"" help:"Age of the newest snapshot of a chain, such as 14d or 36h." placeholder:"AGE"`
	DryRun    bool   `help:"Only list what would be deleted."`
}

// Help is rescue prune's long help.
func (c *RescuePruneCmd) Help() string {
	return `Deletes the snapshot refs of sandboxes that no longer exist when their newest
snapshot is older than --older-than. A live sandbox's snapshots are never
pruned. git gc later frees the space.`
}

// Run prunes.
func (c *RescuePruneCmd) Run(app *App) error {
	age, err := config.ParseDuration(c.OlderThan)
	if err != nil {
		return usererr.New("--older-than %q: %v", c.OlderThan, err).Hint("use a duration such as 14d, 36h or 90m")
	}
	env, err := app.Env()
	if err != nil {
		return err
	}
	live := func(branch string) bool { _, err := env.Find(branch); return err == nil }
	pruned, err := rescue.Prune(app.Ctx, env.Git(), age, time.Now(), live, c.DryRun)
	if err != nil {
		return err
	}
	verb := "pruned"
	if c.DryRun {
		verb = "would prune"
	}
	for _, p := range pruned {
		app.UI.Infof("%s %d snapshot(s) of %s (newest %s)", verb, p.Count, termsafe.String(p.Branch), p.Newest.Local().Format("2006-01-02 15:04"))
	}
	if len(pruned) == 0 {
		app.UI.Infof("nothing to prune")
	}
	return nil
}

// warnTooLarge warns about the untracked files a snapshot left out for
// their size; what says what that means for the command.
func warnTooLarge(app *App, files []rescue.LargeFile, what string) {
	for _, f := range files {
		app.UI.Warnf("%s (%s) is larger than rescue.max_file_size and %s", termsafe.String(f.Path), units.BytesSize(float64(f.Size)), what)
	}
	if len(files) > 0 {
		app.UI.Hintf("to keep such a file, have the agent commit it (git add -f), or raise rescue.max_file_size in your config")
	}
}

// warnInSubmodule warns about files the agent wrote inside a submodule's
// path: the snapshot keeps the submodule's commit (gitlink), not them.
func warnInSubmodule(app *App, paths []string, what string) {
	for _, p := range paths {
		app.UI.Warnf("the agent wrote files inside the submodule %s: they belong to the submodule's own repository and %s", termsafe.String(p), what)
	}
	if len(paths) > 0 {
		app.UI.Hintf("to change a submodule, commit in its own repository and update the submodule's commit")
	}
}

// warnNestedLost names the nested repositories a snapshot met: their files
// are in no snapshot (a gitlink at most), so they do not land and rm or
// land's cleanup would delete them.
func warnNestedLost(app *App, paths []string, what string) {
	for _, p := range paths {
		app.UI.Warnf("%s is a nested git repository: its files are in no snapshot and %s", termsafe.String(p), what)
	}
	if len(paths) > 0 {
		app.UI.Hintf("land and rm refuse while it is there (--force goes ahead and deletes it with the worktree)")
	}
}
