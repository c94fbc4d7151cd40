package land

import (
	"context"
	"fmt"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Trailer is one "Key: value" line of a commit message's trailer block.
type Trailer struct {
	Key, Value string
}

// WithTrailers adds trailers to a commit message the way git does: they
// join the message's own trailer block (Signed-off-by and the like) when
// it has one, so git interpret-trailers --parse finds them all together,
// else they start a new paragraph. A message that is only a subject line
// gets a new paragraph even when the subject looks like a trailer
// ("feat: x"), as a commit's subject is never part of its trailer block.
func WithTrailers(ctx context.Context, g *gitcmd.Runner, msg string, trailers []Trailer) (string, error) {
	msg = strings.TrimRight(msg, "\n")
	var block strings.Builder
	args := []string{"interpret-trailers", "--no-divider", "--where", "end", "--if-exists", "add", "--if-missing", "add"}
	for _, t := range trailers {
		if strings.ContainsAny(t.Key+t.Value, "\n\r") || t.Key == "" {
			return "", fmt.Errorf("trailer %q: not one line", t.Key)
		}
		fmt.Fprintf(&block, "%s: %s\n", t.Key, t.Value)
		args = append(args, "--trailer", t.Key+": "+t.Value)
	}
	if !strings.Contains(strings.TrimSpace(msg), "\n") {
		return msg + "\n\n" + block.String(), nil
	}
	out, err := g.Run(ctx, strings.NewReader(msg+"\n"), args...)
	if err != nil {
		return "", fmt.Errorf("add the sandbox trailers: %w", err)
	}
	return strings.TrimRight(string(out), "\n") + "\n", nil
}
