package review

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Commit is one of the agent's commits: what land --merge keeps.
type Commit struct {
	ID      string
	Subject string
}

// Commits lists the commits reachable from to but not from from (newest
// first), at most max of them, and how many there are in all.
func Commits(ctx context.Context, g *gitcmd.Runner, from, to string, max int) ([]Commit, int, error) {
	if from == "" || to == "" || from == to {
		return nil, 0, nil
	}
	rng := from + ".." + to
	n, err := g.Output(ctx, "rev-list", "--count", rng)
	if err != nil {
		return nil, 0, fmt.Errorf("list the agent's commits: %w", err)
	}
	total, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return nil, 0, fmt.Errorf("list the agent's commits: %q", n)
	}
	out, err := g.Run(ctx, nil, "log", "--no-decorate", "--no-show-signature", "-z", "--format=%h %s", "-n", strconv.Itoa(max), rng)
	if err != nil {
		return nil, 0, fmt.Errorf("list the agent's commits: %w", err)
	}
	var list []Commit
	for _, rec := range strings.Split(string(out), "\x00") {
		rec = strings.TrimLeft(rec, "\n")
		if rec == "" {
			continue
		}
		id, subject, _ := strings.Cut(rec, " ")
		list = append(list, Commit{ID: id, Subject: subject})
	}
	return list, total, nil
}
