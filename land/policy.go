package land

// Land's policy: what must hold before a sandbox's work lands (the agent
// stopped, the reviewed tree, no markers left, nothing git cannot store,
// no nested repository or file in no snapshot lost, verify passed on this tree or on the merged
// one), the message and its trailers, the user's commit hooks, and what
// happens to the sandbox afterwards. The sandbox is reached through the
// Sandbox interface below, which internal/sandbox implements.

import (
	"context"
	"fmt"
	"io"
	"strings"

	units "github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// Sandbox is what land asks of the sandbox it lands.
type Sandbox interface {
	// Recorded is the sandbox's trusted record: land decides on its facts.
	Recorded() *record.Record
	// Display is the branch, escaped for printing.
	Display() string
	// Where names the worktree for messages.
	Where() string
	// Git is the user's repository, with its own configuration.
	Git() *gitcmd.Runner
	// Running reports whether the agent runs.
	Running(ctx context.Context) (bool, error)
	// UpdateFromBase brings the base's tip into the sandbox and returns
	// the paths left in conflict.
	UpdateFromBase(ctx context.Context) ([]string, error)
	// Final brings the agent's commits back and takes the snapshot land
	// works on; head is the agent's HEAD ("" when it has none).
	FinalSnapshot(ctx context.Context, reason rescue.Reason) (final *rescue.Taken, head string, err error)
	// LockVerify serialises verify runs and reloads the record (a verdict
	// may have come meanwhile); RunVerify runs verify on a tree and records
	// the verdict, under that lock, its output to out.
	LockVerify() (unlock func(), err error)
	VerifyTree(ctx context.Context, tree string, out io.Writer) (*record.Verdict, error)
	// CommitHooks finds the user's pre-commit and commit-msg hooks; none
	// inside a sandbox's files.
	CommitHooks(ctx context.Context) (dir string, names []string, err error)
	// RunCommitHooks runs them on the plan's tree and message in a fresh
	// container and returns the message commit-msg left.
	RunCommitHooks(ctx context.Context, p *Plan, dir string, names []string, out io.Writer) (string, error)
	// InsideSandboxes reports whether a path is among the sandboxes' files.
	InsideSandboxes(path string) bool
	// NestedRefusal is the refusal to remove the worktree while it holds
	// these nested repositories.
	NestedRefusal(nested []string) error
	// LockBase serialises the moves of one branch (full ref name) by
	// lands, and its checkout's update, across processes; journal is the
	// file the move under way is written to (see Recover).
	LockBase(ref string) (journal string, unlock func(), err error)
	// Landed is told what landed: with Keep the sandbox stays, its base
	// becoming the branch it landed on and its baseline the snapshot that
	// landed; without, it is removed.
	Landed(ctx context.Context, l Landed) error
}

// Landed is what a land did, as the sandbox is told of it.
type Landed struct {
	// Final is the snapshot that landed, as Commit on Ref (a full ref).
	Final  *rescue.Taken
	Commit gitcmd.Hash
	Ref    string
	Keep   bool
}

// Request is a land as the user asked for it.
type Request struct {
	Onto    string
	Message string
	Merge   bool
	Keep    bool
	Force   bool
	DryRun  bool
	// Expect is the tree (an id or a prefix of at least 7 digits) the user
	// reviewed, as diff printed it; land refuses any other.
	Expect string
	// Update runs git sandbox update first and lands only when it left no
	// conflicts.
	Update bool
	// NoSign leaves the commit unsigned whatever commit.gpgSign says.
	NoSign bool
	// NoVerify skips the user's pre-commit and commit-msg hooks (as git
	// commit --no-verify does); the commit records it in a trailer.
	NoVerify bool
	// VerifyMerged runs verify on the merged tree — exactly the tree the
	// base will hold — instead of applying the verdict rules to the
	// sandbox's own final tree (the landing queue's mode). A failure
	// refuses whatever Force says.
	VerifyMerged bool
	// Out receives the output of verify and the commit hooks.
	Out io.Writer
}

// Result is what land did or would do.
type Result struct {
	Plan    *Plan
	Commit  gitcmd.Hash
	Final   *rescue.Taken
	Verdict *record.Verdict
	// VerifyRan is set when land ran verify itself.
	VerifyRan bool
	// Forced says what --force went past ("" when nothing), as recorded in
	// the commit's Sandbox-Forced trailer.
	Forced string
	// Hooks are the user's commit hooks that ran on the landed tree (or
	// would run, with DryRun).
	Hooks   []string
	Cleaned bool
	// Rebased is the sandbox's new base (a short name) when a land --keep
	// onto another branch than its base made that branch its base.
	Rebased string
	// Already is set when the snapshot had landed as Commit by a land
	// killed before it removed the sandbox; this land finished it.
	Already bool
}

// landing is one land under way: its steps share what they found.
type landing struct {
	sb   Sandbox
	rec  *record.Record
	req  Request
	res  *Result
	ref  string
	onto string
	head string
	// hooksDir and hooks are the user's commit hooks; skipped those
	// --no-verify skips.
	hooksDir       string
	hooks, skipped []string
	sign           bool
	// unhooked is the message before the commit hooks rewrote it.
	unhooked string
	// done is set once nothing more is to be done (nothing to land, or a
	// dry run).
	done bool
}

// Land applies the sandbox's change onto its base branch as one commit.
func Land(ctx context.Context, sb Sandbox, req Request) (*Result, error) {
	if req.Out == nil {
		req.Out = io.Discard
	}
	l := &landing{sb: sb, rec: sb.Recorded(), req: req, res: &Result{}}
	var u steps.Undo
	run := func(name string, do func(context.Context) error) steps.Step {
		return steps.Step{Name: name, Do: func(ctx context.Context, _ *steps.Undo) error {
			if l.done {
				return nil
			}
			// A step before may have changed the record (update moves
			// the start and the baseline).
			l.rec = sb.Recorded()
			return do(ctx)
		}}
	}
	err := steps.Run(ctx, &u, steps.Options{Flow: "land"},
		run("checks", l.checks),
		run("update", l.update),
		run("final snapshot", l.final),
		run("refusals", l.refusals),
		run("plan", l.plan),
		run("verify", l.verify),
		run("commit hooks", l.commitHooks),
		run("apply", l.apply),
	)
	// On failure the result says how far land got: a verdict that
	// refused, a commit made before the clean-up failed.
	return l.res, err
}

// checks refuses a running agent, a land with no destination, and an
// --expect that names no tree.
func (l *landing) checks(ctx context.Context) error {
	sb := l.sb
	if running, err := sb.Running(ctx); err != nil {
		return err
	} else if running {
		return usererr.New("sandbox %s is still running", sb.Display()).
			Hint("wait for it (git sandbox wait %s) or stop it (git sandbox stop %s); land works on a stable snapshot", sb.Display(), sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	l.onto = l.req.Onto
	if l.onto == "" {
		l.onto = l.rec.Base
	}
	if l.onto == "" {
		return usererr.New("sandbox %s started from a commit, not a branch: land needs to know where to go", sb.Display()).
			Hint("name the branch: git sandbox land %s --onto BRANCH", sb.Display())
	}
	l.ref = l.onto
	if !strings.HasPrefix(l.ref, "refs/") {
		l.ref = "refs/heads/" + l.ref
	}
	return checkExpect(l.req.Expect)
}

// update brings the base in first (--update); conflicts refuse.
func (l *landing) update(ctx context.Context) error {
	if !l.req.Update || l.req.DryRun {
		return nil
	}
	conflicts, err := l.sb.UpdateFromBase(ctx)
	if err != nil {
		return err
	}
	if len(conflicts) > 0 {
		return ConflictsLeft(l.sb.Display(), conflicts, "update left conflicts; nothing was landed")
	}
	return nil
}

// final takes the snapshot that lands, and reads the user's commit hooks
// and signing.
func (l *landing) final(ctx context.Context) error {
	final, head, err := l.sb.FinalSnapshot(ctx, rescue.ReasonLand)
	if err != nil {
		return err
	}
	l.res.Final, l.head = final, head
	if l.hooksDir, l.hooks, err = l.sb.CommitHooks(ctx); err != nil {
		return err
	}
	if l.req.NoVerify {
		l.skipped = l.hooks
	}
	l.sign = !l.req.NoSign && signsCommits(ctx, l.sb.Git())
	return nil
}

// refusals refuses work that changed since the review, markers left by
// update, paths git cannot store, nested repositories that would be lost,
// and --merge without the agent's commits.
func (l *landing) refusals(ctx context.Context) error {
	sb, final, req := l.sb, l.res.Final, l.req
	if req.Expect != "" && !strings.HasPrefix(final.Tree, strings.ToLower(req.Expect)) {
		return usererr.New("the work in %s changed since you reviewed it: it is now tree %s, not %s", sb.Display(), short(final.Tree), termsafe.String(req.Expect)).
			Hint("nothing was landed; look again with git sandbox diff %s, then land the tree it names", sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	if !req.Force {
		if left := MarkersLeft(ctx, sb.Git(), final.ID, l.rec.UpdateConflicts); len(left) > 0 {
			return ConflictsLeft(sb.Display(), left, "conflict markers from git sandbox update remain; nothing was landed").
				Hint("or land them as they are with --force")
		}
	}
	// A nested repository git would not store (no commit checked out) is
	// refused as the nested repository it is.
	if len(final.Nested) > 0 && !req.Keep && !req.Force {
		return sb.NestedRefusal(final.Nested)
	}
	if err := l.lostWithWorktree(); err != nil {
		return err
	}
	if skipped := NotNested(final.Skipped, final.Nested); len(skipped) > 0 {
		return usererr.New("the sandbox holds %d path(s) git cannot store, such as %s", len(skipped), termsafe.String(skipped[0])).
			Hint("remove or rename them in the worktree %s (or with git sandbox exec %s -- …), and land again; nothing was landed", sb.Where(), sb.Display()).
			WithCode(usererr.ExitRefused)
	}
	if req.Merge && (l.head == "" || l.head == l.rec.Start) {
		return usererr.New("the agent made no commits: there is nothing for --merge to keep").
			Hint("land without --merge")
	}
	return nil
}

// lostWithWorktree refuses a land that removes the sandbox while files in
// no snapshot would go with its worktree: untracked files over
// rescue.max_file_size, files the agent wrote inside a submodule's path.
// --keep keeps them (and the sandbox); --force accepts the loss.
func (l *landing) lostWithWorktree() error {
	final, req := l.res.Final, l.req
	if req.Keep || req.Force || len(final.TooLarge)+len(final.InSubmodule) == 0 {
		return nil
	}
	var lost []string
	for _, f := range final.TooLarge {
		lost = append(lost, fmt.Sprintf("%s (%s, over rescue.max_file_size)", termsafe.String(f.Path), units.BytesSize(float64(f.Size))))
	}
	for _, p := range final.InSubmodule {
		lost = append(lost, fmt.Sprintf("%s (files inside a submodule)", termsafe.String(p)))
	}
	sb := l.sb
	return usererr.New("%s holds %d path(s) whose files are in no snapshot and would be deleted with its worktree: %s", sb.Display(), len(lost), strings.Join(lost, ", ")).
		Hint("copy what you need from %s first, or have the agent commit a large file (git add -f) or raise rescue.max_file_size", sb.Where()).
		Hint("git sandbox land %s --keep lands and keeps the sandbox with them; git sandbox land %s --force lands the rest and deletes them; nothing was landed", sb.Display(), sb.Display()).
		WithCode(usererr.ExitRefused)
}

// NotNested is skipped without the nested repositories (and what is in
// them).
func NotNested(skipped, nested []string) []string {
	var out []string
	for _, p := range skipped {
		p = strings.TrimSuffix(p, "/")
		in := false
		for _, n := range nested {
			if p == n || strings.HasPrefix(p, n+"/") {
				in = true
				break
			}
		}
		if !in {
			out = append(out, p)
		}
	}
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
