package forecast

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// repo is a scratch repository whose trees the tests build with an index.
type repo struct {
	t   *testing.T
	dir string
	g   *gitcmd.Runner
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	cmd := exec.Command("git", "init", "-q", "--bare", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return &repo{t: t, dir: dir, g: &gitcmd.Runner{GitDir: dir}}
}

// tree writes a tree holding files (path → content).
func (r *repo) tree(files map[string]string) gitcmd.Hash {
	r.t.Helper()
	idx := filepath.Join(r.t.TempDir(), "index")
	g := &gitcmd.Runner{GitDir: r.dir, IndexFile: idx}
	for p, c := range files {
		id, err := g.Run(context.Background(), strings.NewReader(c), "hash-object", "-w", "--stdin")
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := g.Run(context.Background(), nil, "update-index", "--add", "--cacheinfo", "100644,"+strings.TrimSpace(string(id))+","+p); err != nil {
			r.t.Fatal(err)
		}
	}
	out, err := g.Output(context.Background(), "write-tree")
	if err != nil {
		r.t.Fatal(err)
	}
	return gitcmd.Hash(out)
}

// commit makes a root commit of tree (a baseline).
func (r *repo) commit(tree gitcmd.Hash) gitcmd.Hash {
	r.t.Helper()
	g := *r.g
	g.Env = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
	h, err := g.CommitTree(context.Background(), gitcmd.CommitTreeRequest{Tree: tree, Message: "baseline\n"})
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func lines(n int, change map[int]string) string {
	var b strings.Builder
	for i := range n {
		if s, ok := change[i]; ok {
			b.WriteString(s + "\n")
			continue
		}
		b.WriteString("line\n")
	}
	return b.String()
}

func TestComputeMarksPairsThatMeet(t *testing.T) {
	r := newRepo(t)
	start := map[string]string{"shared.txt": lines(20, nil), "other.txt": "o\n", "dir/x": "x\n"}
	blTree := r.tree(start)
	bl := r.commit(blTree)
	with := func(p, c string) gitcmd.Hash {
		files := map[string]string{}
		for k, v := range start {
			files[k] = v
		}
		files[p] = c
		return r.tree(files)
	}
	a := with("shared.txt", lines(20, map[int]string{5: "A"}))
	b := with("shared.txt", lines(20, map[int]string{5: "B"}))
	c := with("other.txt", "C\n")
	d := with("shared.txt", lines(20, map[int]string{15: "D"})) // same file, other lines: merges cleanly
	sbs := []Sandbox{
		{Name: "a", BaseRef: "refs/heads/main", Baseline: bl, BaselineTree: blTree, Final: a},
		{Name: "b", BaseRef: "refs/heads/main", Baseline: bl, BaselineTree: blTree, Final: b},
		{Name: "c", BaseRef: "refs/heads/main", Baseline: bl, BaselineTree: blTree, Final: c},
		{Name: "d", BaseRef: "refs/heads/main", Baseline: bl, BaselineTree: blTree, Final: d},
		{Name: "idle", BaseRef: "refs/heads/main", Baseline: bl, BaselineTree: blTree, Final: blTree},
	}
	cacheFile := filepath.Join(t.TempDir(), "forecast.json")
	o := Options{Git: r.g, Tips: map[string]gitcmd.Hash{"refs/heads/main": blTree}, CacheFile: cacheFile}
	got, err := Compute(context.Background(), o, sbs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"b"}, "b": {"a"}, "c": nil, "d": nil, "idle": nil}
	for name, names := range want {
		if g := got[name].Names(); !reflect.DeepEqual(g, names) {
			t.Errorf("%s conflicts with %v, want %v", name, g, names)
		}
	}
	if p := got["a"].With["b"]; !reflect.DeepEqual(p, []string{"shared.txt"}) {
		t.Errorf("a↔b paths %v", p)
	}

	// The base moves to a's change (a landed): b now conflicts with the
	// base, and no longer with a's sandbox once a is gone.
	merged := a
	o.Tips["refs/heads/main"] = merged
	got, err = Compute(context.Background(), o, sbs[1:])
	if err != nil {
		t.Fatal(err)
	}
	if g := got["b"].Names(); !reflect.DeepEqual(g, []string{BaseName}) {
		t.Errorf("after a landed b conflicts with %v, want [base]", g)
	}
	if g := got["d"].Names(); g != nil {
		t.Errorf("after a landed d conflicts with %v", g)
	}

	// A second run is answered by the cache: with the object store gone,
	// any git process would fail.
	o.Git = &gitcmd.Runner{GitDir: filepath.Join(t.TempDir(), "missing")}
	again, err := Compute(context.Background(), o, sbs[1:])
	if err != nil {
		t.Fatalf("warm run ran git: %v", err)
	}
	if !reflect.DeepEqual(again["b"], got["b"]) {
		t.Errorf("cached result %+v, want %+v", again["b"], got["b"])
	}
}

func TestComputeDifferentBaselines(t *testing.T) {
	r := newRepo(t)
	t1 := r.tree(map[string]string{"f": lines(10, nil), "g": "g\n"})
	bl1 := r.commit(t1)
	// The base moved (g changed) before b started.
	t2 := r.tree(map[string]string{"f": lines(10, nil), "g": "g2\n"})
	bl2 := r.commit(t2)
	a := r.tree(map[string]string{"f": lines(10, map[int]string{3: "A"}), "g": "g\n"})
	b := r.tree(map[string]string{"f": lines(10, map[int]string{3: "B"}), "g": "g2\n"})
	c := r.tree(map[string]string{"f": lines(10, map[int]string{8: "C"}), "g": "g2\n"})
	sbs := []Sandbox{
		{Name: "a", BaseRef: "refs/heads/main", Baseline: bl1, BaselineTree: t1, Final: a},
		{Name: "b", BaseRef: "refs/heads/main", Baseline: bl2, BaselineTree: t2, Final: b},
		{Name: "c", BaseRef: "refs/heads/main", Baseline: bl2, BaselineTree: t2, Final: c},
		{Name: "elsewhere", BaseRef: "refs/heads/other", Baseline: bl2, BaselineTree: t2, Final: b},
	}
	o := Options{Git: r.g, Tips: map[string]gitcmd.Hash{"refs/heads/main": t2, "refs/heads/other": t2}}
	got, err := Compute(context.Background(), o, sbs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"b"}, "b": {"a"}, "c": nil, "elsewhere": nil}
	for name, names := range want {
		if g := got[name].Names(); !reflect.DeepEqual(g, names) {
			t.Errorf("%s conflicts with %v, want %v", name, g, names)
		}
	}
}

func TestMayMeet(t *testing.T) {
	ch := func(specs ...string) []change {
		var out []change
		for _, s := range specs {
			del := strings.HasPrefix(s, "-")
			out = append(out, change{path: strings.TrimPrefix(s, "-"), deleted: del})
		}
		return out
	}
	for _, tc := range []struct {
		a, b []change
		want bool
	}{
		{ch("a.txt"), ch("b.txt"), false},
		{ch("a.txt"), ch("a.txt"), true},
		{ch("d"), ch("d/x"), true},           // file/directory
		{ch("d/x"), ch("d"), true},           // directory/file
		{ch("d/e/x"), ch("d/y"), false},      // siblings
		{ch("-d/x", "e/x"), ch("d/y"), true}, // a directory rename may carry d/y
		{ch("-top"), ch("other"), false},     // the root is never renamed
		{nil, ch("x"), false},
	} {
		if got := mayMeet(tc.a, tc.b); got != tc.want {
			t.Errorf("mayMeet(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestParseDiffTrees(t *testing.T) {
	t1, t2, t3 := gitcmd.Hash(strings.Repeat("1", 40)), gitcmd.Hash(strings.Repeat("2", 40)), gitcmd.Hash(strings.Repeat("3", 40))
	raw := string(t1) + " " + string(t2) + "\nM\x00a\x00A\x00d/new\nline\x00" + string(t1) + " " + string(t3) + "\nD\x00gone\x00"
	got, err := parseDiffTrees([]byte(raw), [][2]gitcmd.Hash{{t1, t2}, {t1, t3}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]gitcmd.Hash][]change{
		{t1, t2}: {{path: "a"}, {path: "d/new\nline"}},
		{t1, t3}: {{path: "gone", deleted: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
