package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/verify"
	"github.com/git-sandbox/git-sandbox/internal/workspace"

	"github.com/git-sandbox/git-sandbox/hooks"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
)

// HooksCmd groups the hook management commands.
type HooksCmd struct {
	Install   HooksInstallCmd   `cmd:"" help:"Install the pre-push hook (keeping and calling yours)."`
	Uninstall HooksUninstallCmd `cmd:"" help:"Remove the pre-push hook and put yours back."`
	Status    HooksStatusCmd    `cmd:"" help:"Show whether the pre-push hook is installed."`
}

// HookCmd groups what the installed hooks run.
type HookCmd struct {
	PrePush HookPrePushCmd `cmd:"" name:"pre-push" help:"Check a push (run by the installed pre-push hook)."`
}

func hooksDir(app *App) (*sandbox.Env, string, bool, error) {
	env, err := app.Env()
	if err != nil {
		return nil, "", false, err
	}
	dir, viaConfig, err := env.Repo.HooksDir(app.Ctx)
	return env, dir, viaConfig, err
}

// HooksInstallCmd is git sandbox hooks install.
type HooksInstallCmd struct {
	Force bool `help:"Install even into a hooks directory inside a work tree, or when a copy of your hook from an interrupted install is in the way."`
}

// Help is hooks install's long help.
func (c *HooksInstallCmd) Help() string {
	return `Adds a pre-push hook to this repository's hooks directory (core.hooksPath when
you set one, else .git/hooks). An existing pre-push hook is kept, renamed to
pre-push.git-sandbox-chained, and runs first; its refusal stops the push.

On push the hook refuses refs/sandbox/*, a sandbox branch whose agent is still
running, and one whose recorded verify failed; with verify_before_push = true in
your config, every pushed commit is verified in a fresh container first: the
commits the remote does not have yet (by its old value and its remote-tracking
refs), one run per distinct tree, oldest first, stopping at the first failure,
which names the commit. A ref the remote has no history of at all (a first
push) has its tip verified only.

A hooks directory inside a work tree (core.hooksPath = .husky, say) holds files
the repository tracks or would commit: install refuses it, since the hook would
be committed and pushed, and gone after a checkout. --force installs anyway.`
}

// Run installs the hook.
func (c *HooksInstallCmd) Run(app *App) error {
	env, dir, viaConfig, err := hooksDir(app)
	if err != nil {
		return err
	}
	if err := c.checkInWorkTree(app, env, dir); err != nil {
		return err
	}
	before := hooks.Status(dir, viaConfig)
	st, err := hooks.Install(dir, c.Force)
	if err != nil {
		return err
	}
	switch {
	case before.Installed:
		app.UI.Infof("the pre-push hook is already installed in %s", dir)
	case st.Chained:
		app.UI.Infof("installed the pre-push hook in %s; your own hook runs first (%s)", dir, hooks.Chained)
	default:
		app.UI.Infof("installed the pre-push hook in %s", dir)
	}
	if viaConfig {
		app.UI.Infof("note: %s is your core.hooksPath; every repository using it gets the check", dir)
	}
	if _, err := proc.LookPath("git-sandbox"); err != nil {
		app.UI.Warnf("git-sandbox is not on PATH, so the hook will refuse pushes until it is")
	}
	// The store agents read is made now rather than by the first start.
	if res, err := workspace.FillVisible(app.Ctx, env.Repo, env.Layout); err != nil {
		app.UI.Warnf("the store of what agents may read was not made ahead (the first start makes it): %v", err)
	} else if res.Objects > 0 {
		app.UI.Infof("made the store of what agents may read (%d objects your branches and tags reach), so the first start does not wait for it", res.Objects)
	}
	return nil
}

// checkInWorkTree refuses a hooks directory inside a work tree (without
// --force; with it, warns), naming the tracked hook files install would
// change.
func (c *HooksInstallCmd) checkInWorkTree(app *App, env *sandbox.Env, dir string) error {
	in := hooks.CheckWorkTree(app.Ctx, env.Repo, dir)
	if in == nil {
		return nil
	}
	if !c.Force {
		return in.Refusal()
	}
	app.UI.Warnf("%s is inside the work tree %s: the hook files installed there will show in git status and be committed by git commit -a", termsafe.String(dir), termsafe.String(in.WorkTree))
	for _, p := range in.Tracked {
		app.UI.Warnf("%s is tracked: installing changes it in your work tree", termsafe.String(p))
	}
	return nil
}

// HooksUninstallCmd is git sandbox hooks uninstall.
type HooksUninstallCmd struct{}

// Run removes the hook.
func (c *HooksUninstallCmd) Run(app *App) error {
	_, dir, viaConfig, err := hooksDir(app)
	if err != nil {
		return err
	}
	st := hooks.Status(dir, viaConfig)
	if err := hooks.Uninstall(dir); err != nil {
		return err
	}
	if st.Chained {
		app.UI.Infof("removed the pre-push hook from %s and put your own back", dir)
	} else {
		app.UI.Infof("removed the pre-push hook from %s", dir)
	}
	return nil
}

// HooksStatusCmd is git sandbox hooks status.
type HooksStatusCmd struct{}

// Run prints the hook state.
func (c *HooksStatusCmd) Run(app *App) error {
	_, dir, viaConfig, err := hooksDir(app)
	if err != nil {
		return err
	}
	st := hooks.Status(dir, viaConfig)
	where := dir
	if viaConfig {
		where += " (core.hooksPath)"
	}
	fmt.Fprintf(app.Stdout, "hooks directory  %s\n", where)
	switch {
	case st.Installed && st.Chained:
		fmt.Fprintf(app.Stdout, "pre-push         installed; your own hook runs first (%s)\n", hooks.Chained)
	case st.Installed:
		fmt.Fprintf(app.Stdout, "pre-push         installed\n")
	case st.Foreign:
		fmt.Fprintf(app.Stdout, "pre-push         not installed (a pre-push hook of yours is there; install keeps it)\n")
	default:
		fmt.Fprintf(app.Stdout, "pre-push         not installed\n")
	}
	if p, err := proc.LookPath("git-sandbox"); err == nil {
		fmt.Fprintf(app.Stdout, "git-sandbox      %s\n", p)
	} else {
		fmt.Fprintf(app.Stdout, "git-sandbox      not on PATH: the hook refuses pushes\n")
	}
	if env, err := app.Env(); err == nil {
		fmt.Fprintf(app.Stdout, "verify_before_push %v\n", env.Config.VerifyBeforePush)
	}
	return nil
}

// HookPrePushCmd is git sandbox hook pre-push.
type HookPrePushCmd struct {
	Remote string `arg:"" optional:"" help:"Name of the remote."`
	URL    string `arg:"" optional:"" help:"URL of the remote."`
}

// Run checks a push; the ref lines come on standard input.
func (c *HookPrePushCmd) Run(app *App) error {
	// Ctrl-C during a verify run must still remove its container and files.
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	app.Ctx = ctx
	env, err := app.Env()
	if err != nil {
		return err
	}
	updates, err := hooks.ParseUpdates(app.Stdin)
	if err != nil {
		return err
	}
	repo := pushRepo{env}
	if refused := hooks.Check(ctx, repo, updates); len(refused) > 0 {
		return hooks.RefusalError(refused)
	}
	if !env.Config.VerifyBeforePush {
		return nil
	}
	refused, err := hooks.VerifyPushed(ctx, repo, updates, hooks.VerifyOptions{Config: env.Config, Remote: c.Remote, UI: app.UI})
	if err != nil {
		return err
	}
	return hooks.RefusalError(refused)
}

// pushRepo is the repository as the pre-push hook sees it.
type pushRepo struct{ *sandbox.Env }

func (r pushRepo) Sandbox(branch string) (hooks.Sandbox, bool, error) {
	sb, err := r.Find(branch)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return sb, true, nil
}

func (r pushRepo) PrepareVerify(ctx context.Context, run hooks.PushRun) (verify.Options, func(), error) {
	return r.PushVerify(ctx, run.Ref, run.Commit, run.Out)
}
