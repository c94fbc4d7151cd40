package land

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

type repo struct {
	t   *testing.T
	dir string
	g   *gitcmd.Runner
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_AUTHOR_NAME", "a")
	t.Setenv("GIT_AUTHOR_EMAIL", "a@x")
	t.Setenv("GIT_COMMITTER_NAME", "a")
	t.Setenv("GIT_COMMITTER_EMAIL", "a@x")
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return &repo{t: t, dir: dir, g: &gitcmd.Runner{GitDir: dir}}
}

// commit makes a commit with the given files (path -> content) on top of
// parent ("" for none).
func (r *repo) commit(parent string, files map[string]string) string {
	r.t.Helper()
	var spec strings.Builder
	for p, c := range files {
		id, err := r.g.Run(context.Background(), strings.NewReader(c), "hash-object", "-w", "--stdin")
		if err != nil {
			r.t.Fatal(err)
		}
		spec.WriteString("100644 blob " + strings.TrimSpace(string(id)) + "\t" + p + "\n")
	}
	tree, err := r.g.Run(context.Background(), strings.NewReader(spec.String()), "mktree")
	if err != nil {
		r.t.Fatal(err)
	}
	args := []string{"commit-tree", strings.TrimSpace(string(tree))}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	c, err := r.g.Run(context.Background(), strings.NewReader("c\n"), args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.TrimSpace(string(c))
}

func (r *repo) setRef(ref, id string) {
	r.t.Helper()
	if _, err := r.g.Run(context.Background(), nil, "update-ref", ref, id); err != nil {
		r.t.Fatal(err)
	}
}

func (r *repo) file(commit, path string) string {
	r.t.Helper()
	out, err := r.g.Run(context.Background(), nil, "cat-file", "blob", commit+":"+path)
	if err != nil {
		return "<absent>"
	}
	return string(out)
}

// The base moved and the baseline holds carried dirt: the change lands
// onto the new tip, without the dirt, with the baseline as merge base.
func TestPrepareAndApplyUseTheBaselineAsMergeBase(t *testing.T) {
	r := newRepo(t)
	start := r.commit("", map[string]string{"a": "1\n", "b": "1\n"})
	baseline := r.commit(start, map[string]string{"a": "1\n", "b": "1\n", "dirt": "carried\n"})
	final := r.commit(baseline, map[string]string{"a": "agent\n", "b": "1\n", "dirt": "carried\n", "new": "n\n"})
	tip := r.commit(start, map[string]string{"a": "1\n", "b": "moved\n"})
	r.setRef("refs/heads/main", tip)
	p, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/main", Baseline: baseline, Final: final, Message: "m\n"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Empty || p.Tip != tip || len(p.Changes) != 2 {
		t.Fatalf("plan = %+v", p)
	}
	commit, err := Apply(context.Background(), r.g, p, "test")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"a": "agent\n", "b": "moved\n", "new": "n\n", "dirt": "<absent>"} {
		if got := r.file(commit, path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if got, _ := r.g.Output(context.Background(), "rev-parse", "main"); got != commit {
		t.Errorf("main = %s, want %s", got, commit)
	}
}

func TestPrepareConflictAndEmpty(t *testing.T) {
	r := newRepo(t)
	start := r.commit("", map[string]string{"a": "1\n"})
	final := r.commit(start, map[string]string{"a": "agent\n"})
	r.setRef("refs/heads/main", r.commit(start, map[string]string{"a": "base\n"}))
	_, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/main", Baseline: start, Final: final})
	ue, ok := usererr.As(err)
	if !ok || ue.Code != usererr.ExitConflict || !strings.Contains(ue.Msg, "1 path(s): a") {
		t.Fatalf("conflict = %v", err)
	}
	r.setRef("refs/heads/main", final)
	if p, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/main", Baseline: start, Final: final}); err != nil || !p.Empty {
		t.Errorf("a change already on the base = %+v, %v", p, err)
	}
	if _, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/nope", Baseline: start, Final: final}); err == nil {
		t.Error("a missing branch was accepted")
	}
	if _, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/main", Forbidden: "refs/heads/main"}); err == nil {
		t.Error("landing onto the sandbox's own branch was accepted")
	}
}

func TestApplyIsCompareAndSwap(t *testing.T) {
	r := newRepo(t)
	start := r.commit("", map[string]string{"a": "1\n"})
	final := r.commit(start, map[string]string{"a": "1\n", "b": "2\n"})
	r.setRef("refs/heads/main", start)
	p, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/main", Baseline: start, Final: final, Message: "m\n"})
	if err != nil {
		t.Fatal(err)
	}
	moved := r.commit(start, map[string]string{"a": "other\n"})
	r.setRef("refs/heads/main", moved)
	if _, err := Apply(context.Background(), r.g, p, "test"); err == nil {
		t.Fatal("Apply moved a ref that moved since Prepare")
	}
	if got, _ := r.g.Output(context.Background(), "rev-parse", "main"); got != moved {
		t.Errorf("main = %s, want it untouched at %s", got, moved)
	}
}

func TestConflictErrorListsEachPathOnce(t *testing.T) {
	err := conflictError([]string{"b", "a", "b", "", "c\x1b[2J"})
	if !strings.Contains(err.Error(), "3 path(s): a, b, c\\x1b[2J") {
		t.Errorf("conflictError = %q", err)
	}
}
