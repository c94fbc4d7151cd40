package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// CommitHooks finds the user's pre-commit and commit-msg hooks where git
// commit would (core.hooksPath from the user's configuration, else the
// repository's hooks directory): never in a sandbox's worktree or the
// agent's repository.
func (e *Env) CommitHooks(ctx context.Context) (dir string, names []string, err error) {
	dir, _, err = e.Repo.HooksDir(ctx)
	if err != nil {
		return "", nil, err
	}
	if e.insideSandboxes(dir) {
		// A hooks path inside the state directory is an agent's files.
		return dir, nil, nil
	}
	return dir, verify.FindCommitHooks(dir), nil
}

// runCommitHooks runs the hooks on the plan's tree in a fresh container
// hardened as the sandbox's verify is, and returns the message the
// commit-msg hook left (the plan's when there is none). A hook that fails
// refuses the land.
func (s *Sandbox) runCommitHooks(ctx context.Context, plan *land.Plan, dir string, names []string, io IO) (string, error) {
	if s.Workspace().Remote() {
		// The hooks' run mounts your hooks directory and reads the message
		// back from files: the sandbox's engine cannot see this machine's.
		return "", usererr.New("your %s hook(s) cannot run for sandbox %s yet: its engine %s cannot see this machine's files (copy mode)", strings.Join(names, " and "), s.Display(), termsafe.String(s.engineName())).
			Hint("land without them: git sandbox land %s --no-verify (the commit records it), and run them on the landed commit yourself", s.Display()).
			WithCode(usererr.ExitRefused)
	}
	o, cleanup, err := s.treeRun(ctx, io, "-hooks", container.RoleHooks, filepath.Join(s.env.Layout.Dir(s.Branch), "hooks-net"), s.env.Layout.CommitHooksDir(s.Branch))
	if err != nil {
		return "", err
	}
	defer cleanup()
	o.Tree = plan.Tree.String()
	// The hooks' git reads what the branches reach (plan.Tip among them)
	// from the visible store, brought up to date here.
	store := workspace.VisibleStore(s.env.Layout)
	if _, err := store.Refresh(ctx, s.env.Git()); err != nil {
		return "", err
	}
	s.env.UI.Infof("running your %s hook(s) on the tree to land (%s), in a container", strings.Join(names, " and "), shortID(plan.Tree.String()))
	res, err := verify.RunCommitHooks(ctx, verify.CommitHooksOptions{
		Options:        o,
		HooksDir:       dir,
		Hooks:          names,
		Also:           hooksAlso(s.env, dir),
		Branch:         plan.Ref,
		Tip:            plan.Tip,
		Message:        plan.Message,
		VisibleObjects: store.Objects(),
	})
	if err != nil {
		return "", err
	}
	if res.Code != 0 {
		// The run's status is the wrapper's; a hook's own is in the
		// output, above.
		why := fmt.Sprintf("your %s hook refused the land (exit status %d; its output is above)", strings.Join(names, " or "), res.Code)
		if res.Failed != "" {
			why = fmt.Sprintf("your %s hook refused the land (its output and exit status are above)", res.Failed)
		}
		return "", usererr.New("%s; nothing was landed", why).
			Hint("fix the work in the sandbox (git sandbox exec %s, or a follow-up task) and land again,", s.Display()).
			Hint("or land without your hooks: git sandbox land %s --no-verify (the commit records it)", s.Display()).
			WithCode(usererr.ExitRefused)
	}
	return res.Message, nil
}

// hooksAlso lists what hooks in dir read besides dir: husky (v9) sets
// core.hooksPath to .husky/_, whose hooks run the user's scripts one level
// up (.husky/pre-commit), so that directory is mounted too when it is in
// the user's own work tree. Without it they would find no script and pass.
func hooksAlso(e *Env, dir string) []string {
	parent := filepath.Dir(dir)
	wt := e.Repo.MainWorkTree
	if filepath.Base(dir) != "_" || wt == "" || parent == wt || !worktree.Within(parent, wt) {
		return nil
	}
	return []string{parent}
}
