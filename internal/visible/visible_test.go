package visible

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

type repo struct {
	t     *testing.T
	dir   string
	host  *gitcmd.Runner
	store Store
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	root := t.TempDir()
	r := &repo{t: t, dir: filepath.Join(root, "repo"), store: Store{Dir: filepath.Join(root, "state", ".visible")}}
	r.git("init", "-q", "-b", "main", r.dir)
	r.host = &gitcmd.Runner{GitDir: filepath.Join(r.dir, ".git")}
	r.commit("README", "hello\n")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = filepath.Dir(r.dir)
	if _, err := os.Stat(r.dir); err == nil {
		cmd.Dir = r.dir
	}
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes a file and commits it on the current branch; it returns
// the commit and the file's blob.
func (r *repo) commit(name, content string) (commit, blob string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("add", name)
	r.git("commit", "-qm", "add "+name)
	return r.git("rev-parse", "HEAD"), r.git("rev-parse", "HEAD:"+name)
}

// has reports whether the visible store alone holds id.
func (r *repo) has(id string) bool {
	cmd := exec.Command("git", "cat-file", "-e", id)
	cmd.Env = append(os.Environ(), "GIT_DIR="+filepath.Join(r.dir, ".git"), "GIT_OBJECT_DIRECTORY="+r.store.Objects())
	return cmd.Run() == nil
}

func (r *repo) refresh() *Result {
	r.t.Helper()
	res, err := r.store.Refresh(context.Background(), r.host)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func (r *repo) packCount() int {
	r.t.Helper()
	packs, err := r.store.packs()
	if err != nil {
		r.t.Fatal(err)
	}
	return len(packs)
}

func TestRefreshPacksBranchesAndTagsOnly(t *testing.T) {
	r := newRepo(t)
	c1, b1 := r.commit("a.txt", "one\n")
	r.git("tag", "-a", "-m", "release", "v1")
	tag := r.git("rev-parse", "v1")
	// The stash, a blob staged then unstaged, and a snapshot ref.
	os.WriteFile(filepath.Join(r.dir, "a.txt"), []byte("stashed secret\n"), 0o644)
	r.git("stash", "-q")
	stash := r.git("rev-parse", "refs/stash")
	stashBlob := r.git("rev-parse", "refs/stash:a.txt")
	os.WriteFile(filepath.Join(r.dir, "dangling.txt"), []byte("dangling secret\n"), 0o644)
	r.git("add", "dangling.txt")
	dangling := r.git("rev-parse", ":dangling.txt")
	r.git("rm", "-q", "--cached", "dangling.txt")
	r.git("checkout", "-q", "-b", "tmp")
	snap, snapBlob := r.commit("dotenv", "SECRET=1\n")
	r.git("update-ref", "refs/sandbox/other/rescue", snap)
	r.git("checkout", "-q", "main")
	r.git("branch", "-D", "tmp")

	res := r.refresh()
	if res.Objects == 0 {
		t.Fatal("the first refresh packed nothing")
	}
	for _, id := range []string{c1, b1, tag} {
		if !r.has(id) {
			t.Errorf("the store lacks %s, which a branch or tag reaches", id)
		}
	}
	for name, id := range map[string]string{"stash": stash, "stashed blob": stashBlob, "dangling blob": dangling, "snapshot": snap, "snapshot's blob": snapBlob} {
		if r.has(id) {
			t.Errorf("the store holds the %s %s", name, id)
		}
	}
	if got := string(res.Refs); !strings.Contains(got, c1+" refs/heads/main\n") || !strings.Contains(got, tag+" refs/tags/v1\n") || strings.Contains(got, "refs/sandbox") || strings.Contains(got, "refs/stash") {
		t.Errorf("refs = %q", got)
	}
}

func TestRefreshIsIncremental(t *testing.T) {
	r := newRepo(t)
	first := r.refresh()
	if first.Objects != 3 || r.packCount() != 1 {
		t.Fatalf("first refresh: %d objects, %d packs; want 3 (commit, tree, blob), 1", first.Objects, r.packCount())
	}
	// Nothing new: no pack.
	if again := r.refresh(); again.Objects != 0 || r.packCount() != 1 {
		t.Errorf("a refresh with nothing new packed %d objects (%d packs)", again.Objects, r.packCount())
	}
	// A new branch at an old commit: nothing to pack either.
	r.git("branch", "old")
	if again := r.refresh(); again.Objects != 0 || r.packCount() != 1 {
		t.Errorf("a new branch at a packed commit packed %d objects", again.Objects)
	}
	// One new commit: its commit, tree and blob only.
	c, b := r.commit("b.txt", "two\n")
	next := r.refresh()
	if next.Objects != 3 || r.packCount() != 2 {
		t.Errorf("after one commit: %d objects, %d packs; want 3, 2", next.Objects, r.packCount())
	}
	if !r.has(c) || !r.has(b) {
		t.Error("the new commit is not in the store")
	}
}

func TestRefreshAfterARewrittenBranch(t *testing.T) {
	r := newRepo(t)
	old, oldBlob := r.commit("a.txt", "old\n")
	r.refresh()
	// main is rewritten, and the old commit pruned from the user's store:
	// the tips file names a commit only the visible store has.
	r.git("reset", "-q", "--hard", "HEAD~1")
	r.git("reflog", "expire", "--expire=now", "--all")
	r.git("gc", "-q", "--prune=now")
	if exec.Command("git", "-C", r.dir, "cat-file", "-e", old).Run() == nil {
		t.Fatal("the old commit is still in the user's store: the test proves nothing")
	}
	c, b := r.commit("a.txt", "new\n")
	res := r.refresh()
	if res.Objects == 0 || !r.has(c) || !r.has(b) {
		t.Errorf("the rewritten branch's commit was not packed (%d objects)", res.Objects)
	}
	// What the branch held before stays (published history; see the
	// package doc).
	if !r.has(old) || !r.has(oldBlob) {
		t.Error("the old commit left the store")
	}
}

func TestRefreshRollsUpPacks(t *testing.T) {
	old := MaxPacks
	MaxPacks = 4
	t.Cleanup(func() { MaxPacks = old })
	r := newRepo(t)
	r.refresh()
	var ids []string
	for i := range 5 {
		c, b := r.commit("f.txt", strings.Repeat("x", i+1)+"\n")
		ids = append(ids, c, b)
		res := r.refresh()
		if i < 3 && res.Rolled != 0 {
			t.Errorf("refresh %d rolled up %d packs with %d in the store", i, res.Rolled, r.packCount())
		}
		if i == 3 && res.Rolled != 4 {
			t.Errorf("refresh %d rolled up %d packs, want 4 (every pack but the largest)", i, res.Rolled)
		}
	}
	if n := r.packCount(); n != 3 {
		t.Errorf("%d packs after the roll-up and one more commit, want 3", n)
	}
	for _, id := range ids {
		if !r.has(id) {
			t.Errorf("%s left the store in the roll-up", id)
		}
	}
}

func TestRefreshRemovesWhatAKilledRunLeft(t *testing.T) {
	r := newRepo(t)
	r.refresh()
	// A scratch directory and a pack without its index.
	scratch := filepath.Join(r.store.Dir, scratchPrefix+"123")
	os.MkdirAll(scratch, 0o755)
	half := filepath.Join(r.store.Objects(), "pack", "pack-"+strings.Repeat("ab", 20)+".pack")
	os.WriteFile(half, []byte("PACK"), 0o444)
	// A tips file that names a commit the store never got (the pack of a
	// run killed before its rename, tips written by hand here).
	c, _ := r.commit("b.txt", "b\n")
	os.WriteFile(r.store.tipsFile(), []byte(c+"\n"), 0o644)
	res := r.refresh()
	if _, err := os.Stat(scratch); err == nil {
		t.Error("the scratch directory is still there")
	}
	if _, err := os.Stat(half); err == nil {
		t.Error("the pack without an index is still there")
	}
	if res.Objects == 0 || !r.has(c) {
		t.Errorf("a tip the store does not hold was trusted (%d objects packed)", res.Objects)
	}
}

func TestGive(t *testing.T) {
	r := newRepo(t)
	base, _ := r.commit("a.txt", "a\n")
	res := r.refresh()
	r.git("checkout", "-q", "--detach")
	c, b := r.commit("b.txt", "b\n")
	given := filepath.Join(t.TempDir(), "given")
	n, err := Give(context.Background(), r.host, given, []string{c}, res.Refs.IDs())
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("gave %d objects, want 3 (the commit, its tree, the new blob)", n)
	}
	cmd := exec.Command("git", "cat-file", "-e", b)
	cmd.Env = append(os.Environ(), "GIT_DIR="+filepath.Join(r.dir, ".git"), "GIT_OBJECT_DIRECTORY="+given)
	if cmd.Run() != nil {
		t.Error("the given store lacks the new blob")
	}
	// Nothing beyond what exclude reaches: no pack at all.
	if n, err := Give(context.Background(), r.host, given, []string{base}, []string{c}); err != nil || n != 0 {
		t.Errorf("Give of a reachable commit = %d, %v", n, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(given, "pack")); len(entries) != 2 {
		t.Errorf("given pack directory holds %d files, want one pack and its index", len(entries))
	}
	if _, err := Give(context.Background(), r.host, given, []string{"--all"}, nil); err == nil {
		t.Error("Give took an option for an object id")
	}
}

// TestStoreOnAnotherFileSystem: the store in a tmpfs, the repository on a
// disk. git pack-objects renames its temporary file into the name it is
// given, which failed across file systems ("Invalid cross-device link").
func TestStoreOnAnotherFileSystem(t *testing.T) {
	r := newRepo(t)
	shm, err := os.MkdirTemp("/dev/shm", "visible-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	var a, b syscall.Stat_t
	if syscall.Stat(shm, &a) != nil || syscall.Stat(r.dir, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is on the same file system as the test's temporary directory")
	}
	r.store = Store{Dir: filepath.Join(shm, ".visible")}
	c1, blob := r.commit("a.txt", "one\n")
	// The user's pack holds only what main reaches: it is copied in, as
	// it cannot be linked across file systems.
	r.git("gc", "-q")
	if res := r.refresh(); res.Objects == 0 || res.Reused != 1 {
		t.Fatalf("first fill: %+v", res)
	}
	if !r.has(c1) || !r.has(blob) {
		t.Error("the store lacks what main reaches")
	}
	c2, _ := r.commit("b.txt", "two\n")
	given := filepath.Join(shm, "given", "objects")
	if _, err := Give(context.Background(), r.host, given, []string{c2}, []string{c1}); err != nil {
		t.Fatalf("give: %v", err)
	}
	// Nothing was written into the user's object directory.
	if left, _ := filepath.Glob(filepath.Join(r.dir, ".git", "objects", "pack", "tmp_*")); len(left) > 0 {
		t.Errorf("temporary files left in the user's store: %v", left)
	}
}

func TestRefsWith(t *testing.T) {
	refs := Refs("a refs/heads/main\nb refs/tags/v1\n")
	if got := string(refs.With("c", "refs/heads/sb")); got != "a refs/heads/main\nc refs/heads/sb\nb refs/tags/v1\n" {
		t.Errorf("added: %q", got)
	}
	if got := string(refs.With("c", "refs/heads/main")); got != "c refs/heads/main\nb refs/tags/v1\n" {
		t.Errorf("replaced: %q", got)
	}
}

func TestRefreshPacksExtraCommits(t *testing.T) {
	r := newRepo(t)
	r.git("checkout", "-q", "-b", "side")
	c, blob := r.commit("side.txt", "side\n")
	r.git("checkout", "-q", "main")
	r.git("update-ref", "refs/remotes/origin/side", c)
	r.git("branch", "-D", "side")
	res, err := r.store.Refresh(context.Background(), r.host, c)
	if err != nil {
		t.Fatal(err)
	}
	if !r.has(c) || !r.has(blob) || strings.Contains(string(res.Refs), "origin") {
		t.Errorf("extra commit not packed, or refs %q", res.Refs)
	}
}
