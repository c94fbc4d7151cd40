package land

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
)

// commitHooks runs the user's commit hooks last, on exactly the tree and
// message that land: git commit runs them on what it commits. The base
// moving meanwhile is caught by Apply's compare-and-swap.
func (l *landing) commitHooks(ctx context.Context) error {
	if len(l.res.Hooks) == 0 {
		return nil
	}
	p := l.res.Plan
	l.unhooked = p.Message
	hooked, err := l.sb.RunCommitHooks(ctx, p, l.hooksDir, l.res.Hooks, l.req.Out)
	if err != nil {
		return err
	}
	if hooked != p.Message {
		p.Message, err = withOwnTrailers(ctx, l.sb.Git(), hooked, l.trailers(l.res.Forced))
	}
	return err
}

// apply moves the base to the planned commit (swap); then the sandbox is removed,
// or with Keep it stays, based on what landed: the branch it landed on is
// its base from now on (the next land, update and ps follow it), and its
// baseline is the snapshot that landed.
func (l *landing) apply(ctx context.Context) error {
	commit, err := l.swap(ctx)
	if err != nil || commit == "" {
		return err
	}
	l.res.Commit = commit
	if err := l.sb.Landed(ctx, Landed{Final: l.res.Final, Commit: commit, Ref: l.ref, Keep: l.req.Keep}); err != nil {
		if l.req.Keep {
			return err
		}
		return fmt.Errorf("landed as %s, but cleaning up failed: %w", commit.Short(), err)
	}
	l.res.Cleaned = !l.req.Keep
	if l.req.Keep && l.ref != l.rec.BaseRef {
		l.res.Rebased = strings.TrimPrefix(l.ref, "refs/heads/")
	}
	return nil
}

// message is -m, else the prompt's first line, else the subject of the
// agent's last commit, else "Land sandbox <branch>", with trailers naming
// the sandbox, the agent and the baseline (and what --force went past)
// joined to the message's own trailer block.
func (l *landing) message(ctx context.Context, forced string) (string, error) {
	msg, rec := l.req.Message, l.rec
	if strings.TrimSpace(msg) == "" {
		subject := strings.TrimSpace(strings.SplitN(strings.TrimSpace(rec.Prompt), "\n", 2)[0])
		if subject == "" {
			subject = l.agentSubject(ctx)
		}
		if subject == "" {
			subject = "Land sandbox " + rec.Branch
		}
		if len([]rune(subject)) > 72 {
			subject = string([]rune(subject)[:71]) + "…"
		}
		msg = subject
		if body := strings.TrimSpace(rec.Prompt); body != "" && body != subject {
			msg += "\n\n" + body
		}
	}
	return WithTrailers(ctx, l.sb.Git(), msg, l.trailers(forced))
}

// trailers name the sandbox, the agent, the baseline and the final
// snapshot, what --force went past, and the hooks --no-verify skipped.
func (l *landing) trailers(forced string) []Trailer {
	rec := l.rec
	trailers := []Trailer{
		{Key: "Sandbox", Value: rec.Branch},
		{Key: "Sandbox-Agent", Value: rec.Agent},
		{Key: "Sandbox-Baseline", Value: rec.Baseline},
		{Key: "Sandbox-Snapshot", Value: l.res.Final.ID},
	}
	if u, ok := meteredUsage(l.sb, rec); ok {
		trailers = append(trailers, Trailer{Key: "Sandbox-Usage", Value: u})
	} else if u := rec.TotalUsage(); !u.IsZero() {
		// Numbers formatted here, never the agent's text.
		trailers = append(trailers, Trailer{Key: "Sandbox-Usage", Value: u.String()})
	}
	if forced != "" {
		trailers = append(trailers, Trailer{Key: "Sandbox-Forced", Value: forced})
	}
	if len(l.skipped) > 0 {
		trailers = append(trailers, Trailer{Key: "Sandbox-No-Verify", Value: termsafe.String(strings.Join(l.skipped, ", ")) + " skipped"})
	}
	return trailers
}

// agentSubject is the subject of the agent's newest commit of its own (not
// a merge, not one the sandbox started with), or "".
func (l *landing) agentSubject(ctx context.Context) string {
	head, start := l.head, l.rec.Start
	if head == "" || head == start {
		return ""
	}
	if _, err := gitcmd.ParseHash(head); err != nil {
		return ""
	}
	out, err := l.sb.Git().Output(ctx, "log", "-1", "--no-merges", "--format=%s", head, "^"+start)
	if err != nil {
		return ""
	}
	s, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(s)
}

// sandboxTrailer matches a trailer line of the sandbox's own keys.
var sandboxTrailer = regexp.MustCompile(`(?i)^sandbox(-[a-z0-9-]+)?\s*:`)

// withOwnTrailers takes a message a commit-msg hook rewrote and puts the
// sandbox's trailers back exactly as land made them: any line that looks
// like one of them goes (a hook, steered by the agent's files, could have
// dropped, changed or forged them), then they are added again.
func withOwnTrailers(ctx context.Context, g *gitcmd.Runner, msg string, trailers []Trailer) (string, error) {
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
	return WithTrailers(ctx, g, body, trailers)
}

// signsCommits reports whether the user's configuration asks git commit
// to sign (commit.gpgSign).
func signsCommits(ctx context.Context, g *gitcmd.Runner) bool {
	out, err := g.Output(ctx, "config", "--type=bool", "--get", "commit.gpgSign")
	return err == nil && out == "true"
}

// MarkersLeft lists the paths an update left conflicted that still hold
// conflict markers in the snapshot.
func MarkersLeft(ctx context.Context, g *gitcmd.Runner, snapshot string, conflicted []string) []string {
	var left []string
	for _, p := range conflicted {
		b, err := g.Run(ctx, nil, "cat-file", "blob", snapshot+":"+p)
		if err != nil {
			continue // removed, or no longer a file
		}
		if HasMarkers(b) {
			left = append(left, p)
		}
	}
	return left
}

// HasMarkers reports whether content holds a conflict's opening and
// closing markers at the start of a line.
func HasMarkers(b []byte) bool {
	open := bytes.HasPrefix(b, []byte("<<<<<<< ")) || bytes.Contains(b, []byte("\n<<<<<<< "))
	return open && bytes.Contains(b, []byte("\n>>>>>>> "))
}

// ConflictsLeft is the error for paths still in conflict after an update
// of the sandbox shown as name.
func ConflictsLeft(name string, paths []string, msg string) *usererr.Error {
	return usererr.New("%s: %s", msg, strings.Join(quoteAll(paths), ", ")).
		Hint("resolve them in the sandbox (git sandbox exec %s, or a follow-up task: git sandbox start %s -p …), then land again", name, name).
		WithCode(usererr.ExitConflict)
}

func quoteAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = termsafe.String(p)
	}
	return out
}
