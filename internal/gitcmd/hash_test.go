package gitcmd

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// testRepo creates an empty bare repository and a runner on it that reads
// no configuration and has an identity for commits.
func testRepo(t *testing.T) *Runner {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	return &Runner{GitDir: dir, Isolated: true, Env: []string{
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x",
	}}
}

// testCommit writes a commit of one file on top of parents.
func testCommit(t *testing.T, g *Runner, content string, parents ...Hash) Hash {
	t.Helper()
	ctx := context.Background()
	blob, err := g.Run(ctx, strings.NewReader(content), "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := g.Run(ctx, strings.NewReader("100644 blob "+strings.TrimSpace(string(blob))+"\tf\n"), "mktree")
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.CommitTree(ctx, CommitTreeRequest{Tree: Hash(strings.TrimSpace(string(tree))), Parents: parents, Message: content})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseHash(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"0123456789abcdef0123456789abcdef01234567", true},
		{string(ZeroHash), true},
		{"0123456789ABCDEF0123456789abcdef01234567", false}, // git writes lowercase
		{"0123456789abcdef", false},
		{"0123456789abcdef0123456789abcdef012345670", false},
		{"0123456789abcdef0123456789abcdef0123456g", false},
		{"", false},
		{"HEAD", false},
	}
	for _, tt := range tests {
		h, err := ParseHash(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseHash(%q) error = %v, want ok %v", tt.in, err, tt.ok)
		}
		if tt.ok && h.String() != tt.in {
			t.Errorf("ParseHash(%q) = %q", tt.in, h)
		}
	}
}

func TestHashMethods(t *testing.T) {
	h := Hash("0123456789abcdef0123456789abcdef01234567")
	if h.Short() != "0123456789ab" {
		t.Errorf("Short = %q", h.Short())
	}
	if Hash("abc").Short() != "abc" {
		t.Errorf("Short of a short hash = %q", Hash("abc").Short())
	}
	for _, z := range []Hash{"", ZeroHash} {
		if !z.IsZero() {
			t.Errorf("%q.IsZero() = false", z)
		}
	}
	if h.IsZero() || Hash("0000000000000000000000000000000000000001").IsZero() {
		t.Error("a real object name is zero")
	}
}

func TestRevParse(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	c := testCommit(t, g, "one\n")
	if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: "refs/heads/main", New: c}); err != nil {
		t.Fatal(err)
	}
	if got, err := g.RevParse(ctx, "refs/heads/main"); err != nil || got != c {
		t.Errorf("RevParse(main) = %q, %v; want %s", got, err, c)
	}
	if got, err := g.PeelToCommit(ctx, "main"); err != nil || got != c {
		t.Errorf("PeelToCommit(main) = %q, %v; want %s", got, err, c)
	}
	tree, err := g.PeelToTree(ctx, "main")
	if err != nil || tree == c || tree.IsZero() {
		t.Errorf("PeelToTree(main) = %q, %v", tree, err)
	}
	for _, rev := range []string{"refs/heads/nope", "nope^{tree}", "--all", "-q", string(tree) + "^{commit}"} {
		if _, err := g.RevParse(ctx, rev); !errors.Is(err, ErrNotExist) {
			t.Errorf("RevParse(%q) = %v, want ErrNotExist", rev, err)
		}
	}
	broken := &Runner{GitDir: t.TempDir() + "/missing", Isolated: true}
	if _, err := broken.RevParse(ctx, "HEAD"); err == nil || errors.Is(err, ErrNotExist) {
		t.Errorf("RevParse without a repository = %v, want a failure that is not ErrNotExist", err)
	}

	got, err := g.RevParseMany(ctx, "main", "main^{tree}")
	if err != nil || !slices.Equal(got, []Hash{c, tree}) {
		t.Errorf("RevParseMany = %q, %v; want [%s %s]", got, err, c, tree)
	}
	for _, revs := range [][]string{{"main", "nope"}, {"main", "a\nmain"}, {string(ZeroHash)}} {
		if _, err := g.RevParseMany(ctx, revs...); !errors.Is(err, ErrNotExist) {
			t.Errorf("RevParseMany(%q) = %v, want ErrNotExist", revs, err)
		}
	}

	if full, err := g.SymbolicFullName(ctx, "main"); err != nil || full != "refs/heads/main" {
		t.Errorf("SymbolicFullName(main) = %q, %v", full, err)
	}
	if full, err := g.SymbolicFullName(ctx, c.String()); err != nil || full != "" {
		t.Errorf("SymbolicFullName(commit id) = %q, %v; want \"\"", full, err)
	}
}
