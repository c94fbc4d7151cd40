package rescue

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Tip is what a ref under refs/sandbox (a sandbox's newest snapshot, its
// baseline) or another ref asked for names.
type Tip struct {
	// ID and Tree are the commit the ref names and its tree.
	ID, Tree string
	// Time is its committer time; the rest are a snapshot's trailers.
	Time     time.Time
	Changes  int
	TooLarge int
	Nested   []string
}

// ReadTips reads every sandbox's newest snapshot and its change count,
// and the refs named in extra (the bases, for the conflict forecast), with
// one git process. (git before 2.40 applies the options of one trailers
// atom to every other in the same format, so the trailers are read whole
// and picked here, not asked for by key.)
func ReadTips(ctx context.Context, g *gitcmd.Runner, extra ...string) map[string]Tip {
	out := map[string]Tip{}
	args := []string{"for-each-ref",
		"--format=%(refname) %(objectname) %(tree) %(committerdate:unix)%00%(contents:trailers:only,unfold)%00", RefPrefix}
	raw, err := g.Run(ctx, nil, append(args, extra...)...)
	if err != nil {
		return out
	}
	for _, rec := range strings.Split(string(raw), "\x00\n") {
		head, trailers, _ := strings.Cut(rec, "\x00")
		f := strings.Fields(head)
		if len(f) < 2 {
			continue
		}
		t := Tip{ID: f[1]}
		if len(f) >= 4 {
			t.Tree = f[2]
			if sec, err := strconv.ParseInt(f[3], 10, 64); err == nil {
				t.Time = time.Unix(sec, 0)
			}
		}
		t.readTrailers(trailers, strings.HasPrefix(f[0], RefPrefix))
		out[f[0]] = t
	}
	return out
}

// readTrailers fills the change count from a commit's trailer lines and,
// for a snapshot (one under RefPrefix), the too-large and nested counts.
func (t *Tip) readTrailers(lines string, snapshot bool) {
	changes := ""
	for _, line := range strings.Split(lines, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(key, trailerChanges):
			// (Two such trailers read as one number, as git's
			// separator= joins them.)
			changes += value
		case !snapshot:
		case strings.EqualFold(key, trailerTooLarge) && value != "":
			t.TooLarge++
		case strings.EqualFold(key, trailerNested) && value != "":
			if p, err := strconv.Unquote(value); err == nil {
				t.Nested = append(t.Nested, p)
			}
		}
	}
	t.Changes, _ = strconv.Atoi(changes)
}
