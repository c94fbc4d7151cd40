package land

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
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
	// gitcmd drops inherited GIT_* variables: the runner carries its own
	// identity and reads no configuration.
	g := &gitcmd.Runner{GitDir: dir, Isolated: true, Env: []string{
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x",
	}}
	return &repo{t: t, dir: dir, g: g}
}

// commit makes a commit with the given files (path -> content, paths may
// have directories) on top of parent ("" for none).
func (r *repo) commit(parent string, files map[string]string) string {
	r.t.Helper()
	ctx := context.Background()
	ix := &gitcmd.Runner{GitDir: r.dir, IndexFile: filepath.Join(r.t.TempDir(), "index")}
	for p, c := range files {
		blob, err := ix.Run(ctx, strings.NewReader(c), "hash-object", "-w", "--stdin")
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := ix.Run(ctx, nil, "update-index", "--add", "--cacheinfo", "100644,"+strings.TrimSpace(string(blob))+","+p); err != nil {
			r.t.Fatal(err)
		}
	}
	tree, err := ix.Output(ctx, "write-tree")
	if err != nil {
		r.t.Fatal(err)
	}
	req := gitcmd.CommitTreeRequest{Tree: gitcmd.Hash(tree), Message: "c\n"}
	if parent != "" {
		req.Parents = []gitcmd.Hash{gitcmd.Hash(parent)}
	}
	c, err := r.g.CommitTree(ctx, req)
	if err != nil {
		r.t.Fatal(err)
	}
	return c.String()
}

func (r *repo) setRef(ref, id string) {
	r.t.Helper()
	if err := r.g.UpdateRef(context.Background(), gitcmd.UpdateRefRequest{Ref: ref, New: gitcmd.Hash(id), AnyOld: true}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *repo) ref(name string) string {
	r.t.Helper()
	h, err := r.g.RevParse(context.Background(), name)
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
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
	if p.Empty || p.Tip.String() != tip || len(p.Changes) != 2 {
		t.Fatalf("plan = %+v", p)
	}
	commit, err := Apply(context.Background(), r.g, p, "test")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"a": "agent\n", "b": "moved\n", "new": "n\n", "dirt": "<absent>"} {
		if got := r.file(commit.String(), path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if got := r.ref("main"); got != commit.String() {
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
	_, err = Apply(context.Background(), r.g, p, "test")
	if !errors.Is(err, ErrMoved) {
		t.Fatalf("Apply onto a ref that moved since Prepare = %v, want ErrMoved", err)
	}
	if got := r.ref("main"); got != moved {
		t.Errorf("main = %s, want it untouched at %s", got, moved)
	}
}

// A file on one side where the other made a directory: git moves the file
// aside as vendor/lib~<commit>; the conflict names vendor/lib.
func TestPrepareConflictNamesRealPaths(t *testing.T) {
	r := newRepo(t)
	start := r.commit("", map[string]string{"vendor/other": "x\n", "f": "1\n"})
	final := r.commit(start, map[string]string{"vendor/other": "x\n", "f": "1\n", "vendor/lib": "file\n"})
	r.setRef("refs/heads/main", r.commit(start, map[string]string{"vendor/other": "x\n", "f": "1\n", "vendor/lib/x.go": "dir\n"}))
	_, err := Prepare(context.Background(), r.g, Options{Ref: "refs/heads/main", Baseline: start, Final: final})
	ue, ok := usererr.As(err)
	if !ok || ue.Code != usererr.ExitConflict {
		t.Fatalf("conflict = %v", err)
	}
	if !strings.HasSuffix(ue.Msg, "1 path(s): vendor/lib") {
		t.Errorf("conflict message = %q, want it to name vendor/lib only", ue.Msg)
	}
}

func TestConflictErrorListsEachPathOnce(t *testing.T) {
	err := conflictError([]string{"b", "a", "b", "", "c\x1b[2J"}, "fix-1")
	if !strings.Contains(err.Error(), "3 path(s): a, b, c\\x1b[2J") {
		t.Errorf("conflictError = %q", err)
	}
	ue, _ := usererr.As(err)
	hints := strings.Join(ue.Hints, "\n")
	if !strings.Contains(hints, "git sandbox update fix-1") || strings.Contains(hints, "BRANCH") {
		t.Errorf("conflict hints = %q, want the exact update command", hints)
	}
}
