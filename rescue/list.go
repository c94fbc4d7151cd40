package rescue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

const logFormat = "--format=%x1e%H%x00%T%x00%ct%x00%B"

// Read reads one snapshot commit. It fails for a commit that is not a
// snapshot.
func Read(ctx context.Context, g *gitcmd.Runner, id string) (*Snapshot, error) {
	out, err := g.Run(ctx, nil, "log", "-1", "--no-walk", logFormat, id+"^{commit}", "--")
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", id, err)
	}
	snaps := parseLog(out)
	if len(snaps) != 1 {
		return nil, fmt.Errorf("%s is not a git sandbox snapshot", id)
	}
	return &snaps[0], nil
}

// parseLog parses logFormat output, keeping only snapshot commits.
func parseLog(out []byte) []Snapshot {
	var snaps []Snapshot
	for _, rec := range strings.Split(string(out), "\x1e") {
		f := strings.SplitN(rec, "\x00", 4)
		if len(f) != 4 {
			continue
		}
		s, ok := parseMessage(f[3])
		if !ok {
			continue
		}
		s.ID, s.Tree = f[0], f[1]
		if sec, err := strconv.ParseInt(f[2], 10, 64); err == nil {
			s.Time = time.Unix(sec, 0).UTC()
		}
		if s.Baseline == "" && (s.Reason == ReasonStart || s.Reason == ReasonSetup) {
			s.Baseline = s.ID
		}
		snaps = append(snaps, s)
	}
	return snaps
}

func parseMessage(msg string) (Snapshot, bool) {
	var s Snapshot
	for _, line := range strings.Split(msg, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case trailerBranch:
			s.Branch = v
		case trailerReason:
			s.Reason = Reason(v)
		case trailerChanges:
			s.Changes, _ = strconv.Atoi(v)
		case trailerBaseline:
			s.Baseline = v
		case trailerStart:
			s.Start = v
		case trailerHead:
			s.Head = v
		case trailerSkipped:
			if p, err := strconv.Unquote(v); err == nil {
				s.Skipped = append(s.Skipped, p)
			}
		case trailerInSubmod:
			if p, err := strconv.Unquote(v); err == nil {
				s.InSubmodule = append(s.InSubmodule, p)
			}
		case trailerNested:
			if p, err := strconv.Unquote(v); err == nil {
				s.Nested = append(s.Nested, p)
			}
		case trailerTooLarge:
			n, q, _ := strings.Cut(v, " ")
			size, err1 := strconv.ParseInt(n, 10, 64)
			p, err2 := strconv.Unquote(q)
			if err1 == nil && err2 == nil {
				s.TooLarge = append(s.TooLarge, LargeFile{Path: p, Size: size})
			}
		}
	}
	return s, s.Reason != "" && s.Branch != ""
}

// Chain is one sandbox's chain of snapshots, newest first.
type Chain struct {
	Ref       string
	Snapshots []Snapshot
}

// Chains returns every snapshot chain in the repository (live and ended),
// optionally only those of one branch.
func Chains(ctx context.Context, g *gitcmd.Runner, branch string) ([]Chain, error) {
	refs, err := g.Lines(ctx, "for-each-ref", "--format=%(refname)", RefPrefix)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var chains []Chain
	for _, ref := range refs {
		if !strings.HasSuffix(ref, "/rescue") {
			continue
		}
		tip, err := Read(ctx, g, ref)
		if err != nil {
			continue
		}
		if branch != "" && tip.Branch != branch {
			continue
		}
		args := []string{"log", "--first-parent", logFormat, ref}
		if tip.Start != "" {
			args = append(args, "^"+tip.Start)
		}
		out, err := g.Run(ctx, nil, append(args, "--")...)
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		c := Chain{Ref: ref, Snapshots: parseLog(out)}
		for i := range c.Snapshots {
			c.Snapshots[i].Ref = ref
		}
		chains = append(chains, c)
	}
	return chains, nil
}

// List returns every snapshot, newest first.
func List(ctx context.Context, g *gitcmd.Runner, branch string) ([]Snapshot, error) {
	chains, err := Chains(ctx, g, branch)
	if err != nil {
		return nil, err
	}
	var all []Snapshot
	seen := map[string]bool{}
	for _, c := range chains {
		for _, s := range c.Snapshots {
			if !seen[s.ID] {
				seen[s.ID] = true
				all = append(all, s)
			}
		}
	}
	// Newest first; within one second, keep each chain's own order.
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.After(all[j].Time) })
	return all, nil
}
