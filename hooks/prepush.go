package hooks

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
)

// Update is one line git gives a pre-push hook.
type Update struct {
	LocalRef, LocalSHA, RemoteRef, RemoteSHA string
}

// Deletes reports whether the update deletes the remote ref.
func (u Update) Deletes() bool { return strings.Trim(u.LocalSHA, "0") == "" }

// ParseUpdates reads pre-push's standard input.
func ParseUpdates(r io.Reader) ([]Update, error) {
	var out []Update
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("pre-push: unexpected input line %q", sc.Text())
		}
		out = append(out, Update{LocalRef: f[0], LocalSHA: f[1], RemoteRef: f[2], RemoteSHA: f[3]})
	}
	return out, sc.Err()
}

// Refusal is one refused ref and why.
type Refusal struct {
	Ref    string
	Reason string
	Hint   string
}

// Check applies the rules that need no container run: sandbox refs never
// leave; a sandbox branch waits while its agent runs or when its recorded
// verify verdict for the pushed tree failed. Deletions and tags pass.
func Check(ctx context.Context, env Repo, updates []Update) []Refusal {
	var refused []Refusal
	for _, u := range updates {
		if u.Deletes() {
			continue
		}
		if strings.HasPrefix(u.LocalRef, "refs/sandbox/") || strings.HasPrefix(u.RemoteRef, "refs/sandbox/") {
			refused = append(refused, Refusal{Ref: u.RemoteRef, Reason: "sandbox refs (snapshots of agents' work) never leave this machine",
				Hint: "push a branch instead; git sandbox rescue restore SNAPSHOT --branch NEW makes one"})
			continue
		}
		if strings.HasPrefix(u.RemoteRef, "refs/tags/") || !strings.HasPrefix(u.LocalRef, "refs/heads/") {
			continue
		}
		branch := strings.TrimPrefix(u.LocalRef, "refs/heads/")
		sb, ok, err := env.Sandbox(branch)
		if err != nil || !ok {
			continue
		}
		running, err := sb.Running(ctx)
		if err != nil {
			hint := "start Docker and push again"
			if engine := sb.Recorded().Engine; engine != "" {
				hint = fmt.Sprintf("make engine %s answer (git sandbox doctor checks it) and push again", termsafe.String(engine))
			}
			refused = append(refused, Refusal{Ref: u.LocalRef, Reason: "it is a sandbox branch, and whether its agent still runs cannot be told: " + err.Error(),
				Hint: hint})
			continue
		}
		if running {
			refused = append(refused, Refusal{Ref: u.LocalRef, Reason: "its sandbox's agent is still running",
				Hint: fmt.Sprintf("wait for it (git sandbox wait %s) and push again", termsafe.String(branch))})
			continue
		}
		tree, err := env.Git().PeelToTree(ctx, u.LocalSHA)
		if err != nil {
			continue
		}
		if v, ok := sb.Verdict(tree.String()); ok && !v.OK {
			refused = append(refused, Refusal{Ref: u.LocalRef, Reason: fmt.Sprintf("verify failed on this commit's tree (exit code %d)", v.ExitCode),
				Hint: fmt.Sprintf("fix it and run git sandbox verify %s", termsafe.String(branch))})
		}
	}
	return refused
}

// Repo is what the pre-push hook asks of the repository and its
// sandboxes.
type Repo interface {
	// Git is the user's repository.
	Git() *gitcmd.Runner
	// Sandbox returns the sandbox of branch (ok false when it is none's).
	Sandbox(branch string) (sb Sandbox, ok bool, err error)
	// PrepareVerify prepares verify's run on a pushed commit: as strict
	// as its sandbox when the ref is a sandbox's branch, in a work
	// directory of its own that cleanup removes with what the run made.
	PrepareVerify(ctx context.Context, run PushRun) (verify.Options, func(), error)
}

// Sandbox is what the hook asks of a sandbox.
type Sandbox interface {
	Running(ctx context.Context) (bool, error)
	Verdict(tree string) (record.Verdict, bool)
	Recorded() *record.Record
}

// PushRun is one pushed commit's verify run.
type PushRun struct {
	Ref, Commit string
	// Out receives its output.
	Out io.Writer
}

// VerifyOptions configure verify-before-push.
type VerifyOptions struct {
	Config *config.Loaded
	// Remote is the remote pushed to (its name, or a URL), as git gives
	// it to the hook: commits its remote-tracking refs hold are not
	// verified again.
	Remote string
	// UI receives progress, warnings and a failed run's (escaped) output.
	UI *ui.Printer
}

// Pushed is one commit of a pushed range to verify.
type Pushed struct {
	Ref, Commit, Tree, Subject string
	// index and of place it among the commits verified.
	index, of int
}

// PushedCommits lists the commits a push sends that need verifying, oldest
// first, one per distinct tree (the first commit with each tree): for each
// update, the commits of the local side not in the remote's old value nor
// in any of the remote's remote-tracking refs. When the remote has none of
// them (a new ref on a remote this repository knows nothing of), the range
// would be the whole history, and only the tip is verified; tipOnly names
// those refs. Deletions and tags are not verified.
func PushedCommits(ctx context.Context, env Repo, updates []Update, remote string) (list []Pushed, tipOnly []string, err error) {
	g := env.Git()
	seen := map[string]bool{}
	var remoteRefs []string
	if remote != "" && !strings.ContainsAny(remote, "*?[\\") {
		remoteRefs, err = g.Lines(ctx, "for-each-ref", "--format=%(objectname)", "refs/remotes/"+remote+"/")
		if err != nil {
			return nil, nil, fmt.Errorf("pre-push: %w", err)
		}
	}
	for _, u := range updates {
		if u.Deletes() || strings.HasPrefix(u.RemoteRef, "refs/tags/") {
			continue
		}
		if _, err := gitcmd.ParseHash(u.LocalSHA); err != nil {
			return nil, nil, fmt.Errorf("pre-push: %w", err)
		}
		exclude := append([]string{}, remoteRefs...)
		if old := gitcmd.Hash(u.RemoteSHA); !old.IsZero() {
			if _, err := gitcmd.ParseHash(u.RemoteSHA); err == nil {
				if _, err := g.RevParse(ctx, u.RemoteSHA+"^{commit}"); err == nil {
					exclude = append(exclude, u.RemoteSHA)
				}
			}
		}
		args := []string{"log", "--reverse", "--topo-order", "--format=%H %T %s"}
		if len(exclude) == 0 {
			args = append(args, "-1")
			tipOnly = append(tipOnly, u.LocalRef)
		}
		args = append(args, u.LocalSHA)
		if len(exclude) > 0 {
			args = append(args, "--not")
			args = append(args, exclude...)
		}
		args = append(args, "--")
		lines, err := g.Lines(ctx, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("pre-push: list the pushed commits of %s: %w", termsafe.String(u.LocalRef), err)
		}
		for _, l := range lines {
			f := strings.SplitN(l, " ", 3)
			if len(f) < 2 || seen[f[1]] {
				continue
			}
			seen[f[1]] = true
			c := Pushed{Ref: u.LocalRef, Commit: f[0], Tree: f[1]}
			if len(f) == 3 {
				c.Subject = f[2]
			}
			list = append(list, c)
		}
	}
	for i := range list {
		list[i].index, list[i].of = i, len(list)
	}
	return list, tipOnly, nil
}

// VerifyPushed runs the verify command on every pushed commit (one run per
// distinct tree, oldest first, stopping at the first failure), each in a
// fresh hardened container on a throwaway copy of the commit's files, and
// returns the refusals. The container and the copy are removed also when
// ctx is cancelled (Ctrl-C).
func VerifyPushed(ctx context.Context, env Repo, updates []Update, o VerifyOptions) ([]Refusal, error) {
	cfg, p := o.Config, o.UI
	if cfg.Verify == "" {
		p.Warnf("verify_before_push is set but no verify command is configured; pushing unverified")
		return nil, nil
	}
	// The image is the repository's choice when its .sandbox.toml names
	// one: the same policy as start's, with no terminal to ask on.
	if refused := cfg.RefusedImages(cfg.RepoImageChoice()); len(refused) > 0 {
		return nil, config.RefuseImages("the pushed commits were not verified", refused).
			Hint("git push --no-verify skips the hook")
	}
	todo, tipOnly, err := PushedCommits(ctx, env, updates, o.Remote)
	if err != nil || len(todo) == 0 {
		return nil, err
	}
	for _, r := range tipOnly {
		p.Infof("note: the remote has none of %s's history; verifying its tip only", termsafe.String(r))
	}
	if len(todo) > 1 {
		p.Infof("verifying %d pushed commits before the push, oldest first: %s", len(todo), termsafe.String(cfg.Verify))
	}
	for i, c := range todo {
		refusal, err := verifyOne(ctx, env, c, o)
		if err != nil || refusal == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if left := len(todo) - i - 1; left > 0 {
			refusal.Reason += fmt.Sprintf("; %d later commit(s) were not verified", left)
		}
		return []Refusal{*refusal}, nil
	}
	return nil, nil
}

// verifyOne verifies one pushed commit, and returns the refusal when the
// verify command failed.
func verifyOne(ctx context.Context, env Repo, c Pushed, o VerifyOptions) (*Refusal, error) {
	var output strings.Builder
	run, cleanup, err := env.PrepareVerify(ctx, PushRun{Ref: c.Ref, Commit: c.Commit, Out: &output})
	if err != nil {
		return nil, err
	}
	defer cleanup()
	short := gitcmd.Hash(c.Commit).Short()
	o.UI.Infof("verifying %s (%s %s)%s before the push: %s", termsafe.String(c.Ref), short, termsafe.String(c.Subject), progress(c.index, c.of), termsafe.String(o.Config.Verify))
	run.Tree, run.Command = c.Tree, o.Config.Verify
	code, err := verify.Run(ctx, run)
	if err != nil || code == 0 {
		return nil, err
	}
	fmt.Fprint(o.UI.Writer(), termsafe.Text(output.String()))
	why := fmt.Sprintf("verify failed on the pushed commit %s (%s; exit code %d; output above)", short, termsafe.String(c.Subject), code)
	return &Refusal{Ref: c.Ref, Reason: why, Hint: "every pushed commit is verified, so fix that commit itself (git rebase -i) and push again"}, nil
}

// progress is " [i/n]" when there is more than one run.
func progress(i, n int) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(" [%d/%d]", i+1, n)
}

// RefusalError turns refusals into the error the hook exits with.
func RefusalError(refused []Refusal) error {
	if len(refused) == 0 {
		return nil
	}
	var lines []string
	e := usererr.New("push refused").WithCode(usererr.ExitRefused)
	for _, r := range refused {
		lines = append(lines, fmt.Sprintf("%s: %s", termsafe.String(r.Ref), r.Reason))
		if r.Hint != "" {
			e.Hint("%s", r.Hint)
		}
	}
	e.Msg = "push refused: " + strings.Join(lines, "; ")
	return e
}
