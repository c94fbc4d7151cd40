package sandbox

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
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
	if s.Copy != nil {
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
	store := s.env.visibleStore()
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
		which := "your " + strings.Join(names, " or ") + " hook"
		if res.Failed != "" {
			which = "your " + res.Failed + " hook"
		}
		return "", usererr.New("%s refused the land (exit status %d; its output is above); nothing was landed", which, res.Code).
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

// sandboxTrailer matches a trailer line of the sandbox's own keys.
var sandboxTrailer = regexp.MustCompile(`(?i)^sandbox(-[a-z0-9-]+)?\s*:`)

// withOwnTrailers takes a message a commit-msg hook rewrote and puts the
// sandbox's trailers back exactly as land made them: any line that looks
// like one of them goes (a hook, steered by the agent's files, could have
// dropped, changed or forged them), then they are added again.
func withOwnTrailers(ctx context.Context, s *Sandbox, msg string, trailers []land.Trailer) (string, error) {
	var keep []string
	for _, l := range strings.Split(msg, "\n") {
		if !sandboxTrailer.MatchString(l) {
			keep = append(keep, l)
		}
	}
	body := verify.CleanupMessage(strings.Join(keep, "\n"))
	if strings.TrimSpace(body) == "" {
		return "", usererr.New("the commit-msg hook left no message of its own").
			Hint("nothing was landed; fix the hook, or land with --no-verify").
			WithCode(usererr.ExitRefused)
	}
	return land.WithTrailers(ctx, s.env.Git(), body, trailers)
}

// hooksTrailer records hooks --no-verify skipped.
func hooksTrailer(names []string) land.Trailer {
	return land.Trailer{Key: "Sandbox-No-Verify", Value: termsafe.String(strings.Join(names, ", ")) + " skipped"}
}
