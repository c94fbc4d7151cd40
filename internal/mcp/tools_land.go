package mcp

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/rescue"
)

type diffIn struct {
	Branch   string   `json:"branch" jsonschema:"the sandbox's branch"`
	Paths    []string `json:"paths,omitempty" jsonschema:"only these paths (pathspecs)"`
	StatOnly bool     `json:"stat_only,omitempty" jsonschema:"only the diffstat, no patch"`
}

// diffSummary is what sandbox_diff says itself; the rest is the agent's.
type diffSummary struct {
	Branch   string `json:"branch"`
	Running  bool   `json:"running"`
	Snapshot string `json:"snapshot"`
	// Tree is the tree shown: sandbox_land's expect.
	Tree  string `json:"tree"`
	Files int    `json:"files"`
	// Flags counts the paths to look at twice; AgentCommits the agent's
	// commits (land --merge would keep them).
	Flags        int `json:"flags"`
	AgentCommits int `json:"agent_commits"`
	// LeftOut counts files the snapshot could not keep: they would not
	// land.
	LeftOut int `json:"left_out,omitempty"`
	// CutBytes is how much of the patch was left out for size.
	CutBytes int `json:"cut_bytes,omitempty"`
}

// maxPatch caps the patch sandbox_diff shows.
const maxPatch = 192 << 10

func (s *Server) diff(ctx context.Context, _ *sdk.CallToolRequest, in diffIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	running, _ := sb.Running(ctx)
	final, sync, err := sb.Final(ctx, rescue.ReasonManual)
	if err != nil {
		return result{}, err
	}
	v := reviewView{sb: sb, to: final.ID, head: sync.Head, paths: in.Paths, statOnly: in.StatOnly}
	text, n, err := s.reviewText(ctx, &v)
	if err != nil {
		return result{}, err
	}
	sum := diffSummary{Branch: sb.Branch, Running: running, Snapshot: final.ID, Tree: final.Tree, Files: n.files,
		Flags: n.flags, AgentCommits: n.commits, LeftOut: len(final.Skipped) + len(final.TooLarge) + len(final.InSubmodule)}
	b := &block{What: fmt.Sprintf("what landing sandbox %s would apply, as git sandbox diff shows it", sb.Display()), Body: text, Limit: maxPatch}
	sum.CutBytes = b.frame().Cut
	note := fmt.Sprintf("sandbox_land with expect %q lands exactly this tree", gitcmd.Hash(final.Tree).Short())
	if running {
		note = "the agent is still running: its work may still change. " + note
	}
	if n.files == 0 {
		return result{Summary: sum, Note: "nothing to land: no changes since its baseline"}, nil
	}
	return result{Summary: sum, Untrusted: b, Note: note}, nil
}

// reviewView is one diff to show: a sandbox's baseline to a snapshot.
type reviewView struct {
	sb       *sandbox.Sandbox
	to       string
	head     string
	paths    []string
	statOnly bool
}

// reviewCounts are what the trusted summary says of a review.
type reviewCounts struct{ files, flags, commits int }

// reviewText is a diff as git sandbox diff shows it without colour: the
// paths to look at twice, the agent's commits, the diffstat and, unless
// statOnly, the patch; every name in it escaped.
func (s *Server) reviewText(ctx context.Context, v *reviewView) (string, reviewCounts, error) {
	g := s.env.Git()
	changes, err := review.Changes(ctx, g, v.sb.Baseline, v.to, v.paths...)
	if err != nil || len(changes) == 0 {
		return "", reviewCounts{}, err
	}
	flags := review.FlagsOf(ctx, g, changes)
	n := reviewCounts{files: len(changes), flags: len(flags)}
	var out bytes.Buffer
	review.WriteFlags(&out, flags, false)
	if v.head != "" {
		commits, total, err := review.Commits(ctx, g, v.sb.Start, v.head, 50)
		if err != nil {
			return "", n, err
		}
		n.commits = total
		review.WriteCommits(&out, commits, total)
	}
	formats := []review.Format{review.FormatStat}
	if !v.statOnly {
		formats = append(formats, review.FormatPatch)
	}
	for _, f := range formats {
		patch, err := review.Patch(ctx, g, v.sb.Baseline, v.to, review.PatchOptions{Format: f, Paths: v.paths})
		if err != nil {
			return "", n, err
		}
		if err := review.Render(&out, patch, false); err != nil {
			return "", n, err
		}
		out.WriteByte('\n')
	}
	return out.String(), n, nil
}

type landIn struct {
	Branch  string `json:"branch" jsonschema:"the sandbox's branch"`
	Message string `json:"message,omitempty" jsonschema:"the commit message (default: the task's prompt)"`
	Expect  string `json:"expect,omitempty" jsonschema:"the tree sandbox_diff named: land only if the work is still exactly it"`
	Keep    bool   `json:"keep,omitempty" jsonschema:"keep the sandbox after landing (the next land starts from here)"`
	DryRun  bool   `json:"dry_run,omitempty" jsonschema:"show what would land and change nothing"`
}

// landed is sandbox_land's own answer.
type landed struct {
	Branch  string `json:"branch"`
	Landed  bool   `json:"landed"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Nothing bool   `json:"nothing_to_land,omitempty"`
	// Command is what the user runs to land, when landing is theirs.
	Command   string `json:"command,omitempty"`
	AllowLand bool   `json:"allow_land"`
	Onto      string `json:"onto,omitempty"`
	Commit    string `json:"commit,omitempty"`
	Tree      string `json:"tree,omitempty"`
	Files     int    `json:"files"`
	Verify    string `json:"verify,omitempty"`
	// Checkout is the checkout of the base that was brought along.
	Checkout string `json:"checkout_updated,omitempty"`
	Removed  bool   `json:"sandbox_removed"`
}

func (s *Server) land(ctx context.Context, _ *sdk.CallToolRequest, in landIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	if !s.allowLand && !in.DryRun {
		cmd := LandCommand(in.Branch, in.Expect)
		return result{
			Summary: landed{Branch: sb.Branch, Command: cmd},
			Note:    "Nothing was landed: landing is the user's (mcp.allow_land is not set in their config). Ask them to review and run: " + cmd,
		}, nil
	}
	var out tailBuffer
	out.max = 32 << 10
	res, err := land.Land(ctx, sb, land.Request{Message: in.Message, Expect: in.Expect, Keep: in.Keep, DryRun: in.DryRun, Out: &out})
	if err != nil {
		return result{}, err
	}
	s.watch.poke()
	return landResult(sb, in, res, out.String(), s.allowLand), nil
}

// landResult is what a land did, the agent's names and the output of
// verify and the hooks in the block.
func landResult(sb *sandbox.Sandbox, in landIn, res *land.Result, output string, allow bool) result {
	p := res.Plan
	// Already: an interrupted land had moved the base; this one finished it.
	done := !p.Empty || res.Already
	out := landed{Branch: sb.Branch, Landed: !in.DryRun && done, DryRun: in.DryRun, Nothing: !done, AllowLand: allow,
		Onto: strings.TrimPrefix(p.Ref, "refs/heads/"), Files: len(p.Changes), Removed: res.Cleaned}
	if res.Final != nil {
		out.Tree = res.Final.Tree
	}
	if !res.Commit.IsZero() {
		out.Commit = res.Commit.String()
	}
	if res.Verdict != nil {
		out.Verify = map[bool]string{true: "passed", false: "failed"}[res.Verdict.OK]
	}
	if p.Checkout != nil && out.Landed {
		out.Checkout = p.Checkout.Path
	}
	if in.DryRun && !allow {
		out.Command = LandCommand(in.Branch, in.Expect)
	}
	var body strings.Builder
	fmt.Fprintf(&body, "message:\n%s\n\nfiles:\n", strings.TrimRight(p.Message, "\n"))
	for _, ch := range p.Changes {
		fmt.Fprintf(&body, "%c\t%s\n", ch.Status, ch.Path)
	}
	for _, f := range p.Flags {
		fmt.Fprintf(&body, "look twice: %s: %s\n", f.Path, f.Reason)
	}
	if output != "" {
		fmt.Fprintf(&body, "\noutput of verify and the commit hooks:\n%s", output)
	}
	return result{Summary: out, Untrusted: &block{What: fmt.Sprintf("the commit message, files and check output of landing sandbox %s", sb.Display()), Body: body.String()}}
}

// safeWord is what a shell takes as one word without quotes.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9._/@%+=:,-]+$`)

// LandCommand is the git sandbox land command the user runs to land
// branch (with --expect TREE when a tree was named), quoted for a POSIX
// shell and escaped for the terminal.
func LandCommand(branch, expect string) string {
	cmd := "git sandbox land " + shellWord(branch)
	if expect != "" {
		cmd += " --expect " + shellWord(expect)
	}
	return termsafe.Text(cmd)
}

func shellWord(s string) string {
	if safeWord.MatchString(s) && !strings.HasPrefix(s, "-") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
