package land

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/review"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
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

func TestAttributesIndexHoldsTheAttributesAlongThePaths(t *testing.T) {
	r := newRepo(t)
	c := r.commit("", map[string]string{
		".gitattributes":       "*.txt filter=a\n",
		"g/.gitattributes":     "*.bin filter=lfs\n",
		"other/.gitattributes": "*.bin filter=nope\n",
		"g/h/x.bin":            "x",
		"top.txt":              "t",
		"other/y.bin":          "y",
	})
	tree, err := r.g.RevParse(context.Background(), c+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	idx := *r.g
	idx.IndexFile = filepath.Join(t.TempDir(), "index")
	files := []blobEntry{{path: "g/h/x.bin"}, {path: "top.txt"}}
	if err := attributesIndex(context.Background(), &idx, tree, files); err != nil {
		t.Fatal(err)
	}
	if got, _ := idx.Output(context.Background(), "ls-files"); got != ".gitattributes\ng/.gitattributes" {
		t.Errorf("index holds %q", got)
	}
	out, err := idx.Run(context.Background(), strings.NewReader("g/h/x.bin\x00top.txt\x00"), "check-attr", "--cached", "-z", "--stdin", "filter")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.ReplaceAll(string(out), "\x00", " "); got != "g/h/x.bin filter lfs top.txt filter a " {
		t.Errorf("attributes: %q", got)
	}
}

func TestLocalFilesLooksAtThePathsOnly(t *testing.T) {
	newRepo(t) // the test's git environment
	wt := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = wt
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	write := func(p, c string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(wt, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wt, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q")
	write("t/tracked.txt", "t\n")
	write("dir/kept.txt", "k\n")
	write(".gitignore", "*.log\n")
	run("add", "-A")
	write("untracked.txt", "u\n") // at a path the land writes
	write("u/v/new.txt", "n\n")   // a directory the index has nothing in, holding one
	write("t/x.log", "ignored\n") // ignored, at a path the land writes
	write("file", "a file\n")     // where the land needs a directory
	write("elsewhere.txt", "e\n") // not where the land writes
	g := &gitcmd.Runner{GitDir: filepath.Join(wt, ".git"), WorkTree: wt}
	changes := []review.Entry{{Path: "untracked.txt"}, {Path: "u/v/w.txt"}, {Path: "t/x.log"}, {Path: "file/inner"}, {Path: "t/tracked.txt"}, {Path: "new/a.txt"}}
	got, _, err := localFiles(context.Background(), g, wt, changes)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"untracked.txt", "u/", "t/x.log", "file"}; !slices.Equal(got, want) {
		t.Errorf("local files %q, want %q", got, want)
	}
	// A directory the index tracks where the land writes a file: only a
	// walk can tell what is in it.
	if got, _, err := localFiles(context.Background(), g, wt, []review.Entry{{Path: "dir"}}); err != nil || got != nil {
		t.Errorf("tracked directory: %q %v, want nil", got, err)
	}
}

// TestCheckLocalChangesLooksAtTheLandsEntries: the refusal names a
// tracked file changed at a land path, under it, and where the land
// needs a directory (deleted there), and nothing changed elsewhere.
func TestCheckLocalChangesLooksAtTheLandsEntries(t *testing.T) {
	newRepo(t) // the test's git environment
	wt := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = wt
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	write := func(p, c string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(wt, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wt, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q")
	for _, p := range []string{"a.txt", "d/e.txt", "f", "g[1].txt", "other.txt", "big/x.txt", "hx.txt"} {
		write(p, p+"\n")
	}
	run("add", "-A")
	run("-c", "user.name=a", "-c", "user.email=a@x", "commit", "-qm", "c")
	p := &Plan{Checkout: &worktree.Entry{Path: wt}, CheckoutGitDir: filepath.Join(wt, ".git")}
	check := func(changes []string) error {
		p.Changes = nil
		for _, c := range changes {
			p.Changes = append(p.Changes, review.Entry{Path: c})
		}
		return checkLocalChanges(context.Background(), p, false)
	}
	write("other.txt", "changed elsewhere\n")
	write("big/x.txt", "changed elsewhere\n")
	write("hx.txt", "changed elsewhere\n") // a glob's match, not the path; and a path that is no magic
	if err := check([]string{"a.txt", "d/new.txt", "g[1].txt", "big/y.txt", "h*.txt", ":(bogus)x"}); err != nil {
		t.Fatalf("a change elsewhere refused the land: %v", err)
	}
	write("a.txt", "changed\n")
	write("d/e.txt", "changed\n")
	write("g[1].txt", "changed\n")
	if err := os.Remove(filepath.Join(wt, "f")); err != nil {
		t.Fatal(err)
	}
	err := check([]string{"a.txt", "f/inner.txt", "g[1].txt", "gx.txt"})
	if err == nil {
		t.Fatal("local changes at the land's paths were not refused")
	}
	for _, want := range []string{": a.txt,", " f/inner.txt,", " g[1].txt,"} {
		if !strings.Contains(err.Error()+",", want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	// A file where the index has a directory: git status looks at all.
	if err := check([]string{"d"}); err == nil || !strings.Contains(err.Error(), ": d") {
		t.Errorf("a changed file under a land path: %v", err)
	}
}

// newCheckout makes an empty directory for a checkout, in the test's git
// environment, with git run there (its output trimmed) and a file writer.
func newCheckout(t *testing.T) (wt string, git func(...string) string, write func(p, c string)) {
	newRepo(t)
	wt = t.TempDir()
	git = func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=a", "-c", "user.email=a@x"}, args...)...)
		cmd.Dir = wt
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write = func(p, c string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(wt, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return wt, git, write
}

// TestApplyUpdatesACheckoutWithStaleStatData: a file the land changes
// whose stat data changed but not its content (touched) is updated; one
// whose content changed after Prepare stops the land, nothing moved.
func TestApplyUpdatesACheckoutWithStaleStatData(t *testing.T) {
	wt, git, write := newCheckout(t)
	git("init", "-q", "-b", "main")
	write("a", "1\n")
	write("b", "1\n")
	git("add", "-A")
	git("commit", "-qm", "start")
	g := &gitcmd.Runner{GitDir: filepath.Join(wt, ".git")}
	landOnce := func(content string) (*Plan, error) {
		t.Helper()
		tree := git("rev-parse", "HEAD^{tree}")
		blob, err := g.Run(context.Background(), strings.NewReader(content), "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		ix := &gitcmd.Runner{GitDir: g.GitDir, IndexFile: filepath.Join(t.TempDir(), "index")}
		if _, err := ix.Run(context.Background(), nil, "read-tree", tree); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.Run(context.Background(), nil, "update-index", "--cacheinfo", "100644,"+strings.TrimSpace(string(blob))+",a"); err != nil {
			t.Fatal(err)
		}
		final, _ := ix.Output(context.Background(), "write-tree")
		fc := git("commit-tree", "-p", "HEAD", "-m", "final", final)
		return Prepare(context.Background(), g, Options{Ref: "refs/heads/main", Baseline: git("rev-parse", "HEAD"), Final: fc, Message: "m\n"})
	}
	p, err := landOnce("agent\n")
	if err != nil || p.Checkout == nil {
		t.Fatalf("plan %+v, %v", p, err)
	}
	// Same content, new stat data: read-tree alone would call it not
	// up to date.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(wt, "a"), later, later); err != nil {
		t.Fatal(err)
	}
	write("b", "1\n")
	if _, err := Apply(context.Background(), g, p, "test"); err != nil {
		t.Fatalf("a touched file stopped the land: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(wt, "a")); string(got) != "agent\n" {
		t.Errorf("a = %q after the land", got)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("the checkout is not clean after the land: %q", st)
	}

	p, err = landOnce("again\n")
	if err != nil {
		t.Fatal(err)
	}
	tip := git("rev-parse", "HEAD")
	write("a", "mine\n") // after Prepare looked
	if _, err := Apply(context.Background(), g, p, "test"); err == nil {
		t.Fatal("a local change made after Prepare was overwritten")
	}
	if got, _ := os.ReadFile(filepath.Join(wt, "a")); string(got) != "mine\n" || git("rev-parse", "HEAD") != tip {
		t.Errorf("a = %q, HEAD %s after a refused land; want them untouched", got, git("rev-parse", "HEAD"))
	}
}

// A land of more paths than git status is given as pathspecs leaves the
// checkout's tracked files to read-tree, which refuses a local change in
// the way before it writes anything; the refusal names the path, as the
// look before the land does for fewer paths, and for a dry run
// (Thorough). What read-tree would take or write over is still refused
// before anything is made: an ignored file where the land adds one, a
// staged change, a deleted file.
func TestWideLandLeavesTrackedFilesToReadTree(t *testing.T) {
	wt, git, write := newCheckout(t)
	git("init", "-q", "-b", "main")
	write(".gitignore", "*.log\n")
	for i := range 2 * maxPathspecs {
		write(fmt.Sprintf("f%02d", i), "1\n")
	}
	git("add", "-A")
	git("commit", "-qm", "start")
	start := git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "agent")
	for i := range 2 * maxPathspecs {
		write(fmt.Sprintf("f%02d", i), "agent\n")
	}
	write("added.log", "the agent's\n")
	git("add", "-A", "-f")
	git("commit", "-qm", "agent")
	final := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	g := &gitcmd.Runner{GitDir: filepath.Join(wt, ".git")}
	prepare := func(thorough bool) (*Plan, error) {
		return Prepare(context.Background(), g, Options{Ref: "refs/heads/main", Baseline: start, Final: final, Message: "m\n", Thorough: thorough})
	}

	write("f07", "mine\n")
	if _, err := prepare(true); err == nil || !strings.Contains(err.Error(), "local changes where the land would write: f07") {
		t.Errorf("a thorough look does not name the local change: %v", err)
	}
	p, err := prepare(false)
	if err != nil {
		t.Fatalf("the plan of a wide land looked at the tracked files: %v", err)
	}
	if !p.trackedLeft {
		t.Fatal("the tracked files of a wide land were not left to read-tree")
	}
	_, err = Apply(context.Background(), g, p, "test")
	if err == nil || !strings.Contains(err.Error(), "local changes where the land would write: f07") {
		t.Errorf("read-tree's refusal does not name the local change: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(wt, "f07")); string(got) != "mine\n" || git("rev-parse", "HEAD") != start {
		t.Errorf("the refused land changed something: f07 %q, HEAD %s", got, git("rev-parse", "HEAD"))
	}
	if got, _ := os.ReadFile(filepath.Join(wt, "f08")); string(got) != "1\n" {
		t.Errorf("the refused land wrote f08: %q", got)
	}

	git("checkout", "--", "f07")
	// Staged as the land has it, changed on top: read-tree would take it
	// (and could not put it back). Deleted, not staged: read-tree would
	// write it again.
	write("f10", "agent\n")
	git("add", "f10")
	write("f10", "agent and mine\n")
	if err := os.Remove(filepath.Join(wt, "f11")); err != nil {
		t.Fatal(err)
	}
	if _, err := prepare(false); err == nil || !strings.Contains(err.Error(), "f10, f11") {
		t.Errorf("a staged change and a deletion at the land's paths were not refused up front: %v", err)
	}
	git("reset", "-q", "--hard")
	write("added.log", "mine, ignored\n")
	if _, err := prepare(false); err == nil || !strings.Contains(err.Error(), "added.log") {
		t.Errorf("an ignored file where the land adds one was not refused up front: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(wt, "added.log")); string(got) != "mine, ignored\n" {
		t.Errorf("added.log = %q", got)
	}
}
