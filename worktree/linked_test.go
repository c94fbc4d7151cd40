package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// TestLinkedWorktreeLifecycle: Add makes a locked worktree on a new
// branch, List and CheckedOutAt find it, AdminDir reads its record, and
// Remove deletes it and git's record of it, the branch kept.
func TestLinkedWorktreeLifecycle(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	r, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	g := r.Git()
	state := filepath.Join(filepath.Dir(top), "state")
	l := Layout{Root: state, RepoID: r.ID}
	path := l.Worktree("agent/one")
	head := git(t, top, "rev-parse", "HEAD")
	if err := Add(ctx, g, AddOptions{Path: path, Branch: "agent/one", Start: head, Reason: "git sandbox"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the worktree's parent: %v, %v; want mode 0700", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(path, "README")); err != nil || string(b) != "hello\n" {
		t.Errorf("the worktree's files: %q, %v", b, err)
	}
	list, err := List(ctx, g)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if list[0].Path != top || list[0].Branch != "refs/heads/main" {
		t.Errorf("main worktree entry %+v", list[0])
	}
	if e := list[1]; e.Path != path || e.Branch != "refs/heads/agent/one" || e.Head != head || !e.Locked {
		t.Errorf("sandbox worktree entry %+v, want locked at %s", e, head)
	}
	if e, err := CheckedOutAt(ctx, g, "refs/heads/agent/one"); err != nil || e == nil || e.Path != path {
		t.Errorf("CheckedOutAt(agent/one) = %+v, %v", e, err)
	}
	if e, err := CheckedOutAt(ctx, g, "refs/heads/none"); err != nil || e != nil {
		t.Errorf("CheckedOutAt(none) = %+v, %v", e, err)
	}
	admin, err := AdminDir(r.CommonDir, path)
	if err != nil || filepath.Dir(admin) != filepath.Join(r.CommonDir, "worktrees") {
		t.Fatalf("AdminDir = %q, %v", admin, err)
	}
	if err := Add(ctx, g, AddOptions{Path: path, Branch: "agent/one", Start: head}); err == nil {
		t.Error("a second Add of one branch and path succeeded")
	}

	if err := Remove(ctx, r.CommonDir, g, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the worktree is still there: %v", err)
	}
	if _, err := os.Stat(admin); !os.IsNotExist(err) {
		t.Errorf("git's record is still there: %v", err)
	}
	if git(t, top, "rev-parse", "agent/one") != head {
		t.Error("the branch went with the worktree")
	}
	// Removing what is gone is no error.
	if err := Remove(ctx, r.CommonDir, g, path); err != nil {
		t.Errorf("a second Remove = %v", err)
	}
	if _, err := List(ctx, r.GitAt(filepath.Join(top, "missing"), "")); err == nil {
		t.Error("List of a missing repository gave no error")
	}
}

// TestRemoveWhenTheDirectoryIsGone removes only git's record of a worktree
// whose directory went, and leaves the user's other worktrees (whose
// directories are merely elsewhere) alone: git worktree prune is never
// run.
func TestRemoveWhenTheDirectoryIsGone(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	r, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(top)
	mine, users := filepath.Join(root, "mine"), filepath.Join(root, "users")
	git(t, top, "worktree", "add", "-q", "-b", "mine", mine)
	git(t, top, "worktree", "add", "-q", "-b", "users", users)
	if err := os.RemoveAll(mine); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(users, users+"-unmounted"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ctx, r.CommonDir, r.Git(), mine); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(r.CommonDir, "worktrees"))
	if len(entries) != 1 || entries[0].Name() != "users" {
		t.Errorf("git's worktree records left: %v; want only the user's", entries)
	}
}

func TestMoveAside(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	r, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(top), "sb", WorktreeDirName)
	git(t, top, "worktree", "add", "-q", "-b", "sb", path)
	mkfile(t, filepath.Join(path, "work.txt"), "the agent's\n")
	trash := filepath.Join(filepath.Dir(top), "trash")
	if err := MoveAside(r.CommonDir, path, trash); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the worktree is still in place: %v", err)
	}
	moved, _ := filepath.Glob(filepath.Join(trash, WorktreeDirName+"-*", WorktreeDirName, "work.txt"))
	if len(moved) != 1 {
		t.Errorf("the worktree's files are not in the trash: %v", moved)
	}
	if entries, _ := os.ReadDir(filepath.Join(r.CommonDir, "worktrees")); len(entries) != 0 {
		t.Errorf("git's record is left: %v", entries)
	}
	// Nothing to move is no error.
	if err := MoveIntoTrash(path, trash); err != nil {
		t.Errorf("MoveIntoTrash of a missing path = %v", err)
	}
	// A trash that cannot be made: the directory is deleted in place.
	dir := filepath.Join(t.TempDir(), "d")
	mkfile(t, filepath.Join(dir, "f"), "x")
	blocker := filepath.Join(t.TempDir(), "file")
	mkfile(t, blocker, "")
	if err := MoveIntoTrash(dir, filepath.Join(blocker, "trash")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory was neither moved nor deleted: %v", err)
	}
}

func TestAdminDirChecksTheGitfile(t *testing.T) {
	common := filepath.Join(t.TempDir(), ".git")
	tests := []struct {
		name, gitfile, want string
	}{
		{"inside the repository", "gitdir: " + filepath.Join(common, "worktrees", "x") + "\n", ""},
		{"not a gitfile", "ref: nothing\n", "is not a gitfile"},
		{"outside the repository", "gitdir: /elsewhere/.git/worktrees/x\n", "points outside the repository"},
		{"escaping with ..", "gitdir: " + filepath.Join(common, "worktrees") + "/../../evil\n", "points outside the repository"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		mkfile(t, filepath.Join(dir, ".git"), tt.gitfile)
		got, err := AdminDir(common, dir)
		if tt.want == "" {
			if err != nil || got != filepath.Join(common, "worktrees", "x") {
				t.Errorf("%s: AdminDir = %q, %v", tt.name, got, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: AdminDir = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if _, err := AdminDir(common, t.TempDir()); err == nil {
		t.Error("a worktree without a gitfile gave no error")
	}
}

// TestStripGitlinks removes submodule entries from a worktree's index and
// nothing else.
func TestStripGitlinks(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	sub := git(t, top, "rev-parse", "HEAD")
	git(t, top, "update-index", "--add", "--cacheinfo", "160000,"+sub+",vendor/lib")
	git(t, top, "update-index", "--add", "--cacheinfo", "160000,"+sub+",other")
	g := &gitcmd.Runner{GitDir: filepath.Join(top, ".git")}
	if err := StripGitlinks(ctx, g); err != nil {
		t.Fatal(err)
	}
	if got := git(t, top, "ls-files", "--stage"); strings.Contains(got, "160000") || !strings.Contains(got, "README") {
		t.Errorf("index after StripGitlinks:\n%s", got)
	}
	// Nothing to strip: nothing changes.
	if err := StripGitlinks(ctx, g); err != nil {
		t.Errorf("a second StripGitlinks = %v", err)
	}
	if err := StripGitlinks(ctx, &gitcmd.Runner{GitDir: filepath.Join(top, "missing")}); err == nil {
		t.Error("StripGitlinks of a missing repository gave no error")
	}
}

// TestLayoutNamesEveryPathApart: every path of a sandbox lies in its own
// directory and no two are the same; the repository's own files are dot
// names no branch can take.
func TestLayoutNamesEveryPathApart(t *testing.T) {
	l := Layout{Root: "/s", RepoID: "proj-0123"}
	b := "agent/x"
	dir := l.Dir(b)
	inSandbox := map[string]string{
		"PrivateGitDir": l.PrivateGitDir(b), "GivenObjects": l.GivenObjects(b), "Gitfile": l.Gitfile(b),
		"Record": l.Record(b), "Lock": l.Lock(b), "RecordLock": l.RecordLock(b), "SupervisorLock": l.SupervisorLock(b),
		"VerifyLock": l.VerifyLock(b), "VerifyDir": l.VerifyDir(b), "CommitHooksDir": l.CommitHooksDir(b),
		"RescueIndex": l.RescueIndex(b), "ScratchGitDir": l.ScratchGitDir(b), "Quarantine": l.Quarantine(b),
		"SnapshotUsage": l.SnapshotUsage(b), "SupervisorLog": l.SupervisorLog(b), "ProxyDir": l.ProxyDir(b),
		"TrustDir": l.TrustDir(b), "NetLogDir": l.NetLogDir(b), "Home": l.Home(b), "Worktree": l.Worktree(b),
	}
	seen := map[string]string{}
	for name, p := range inSandbox {
		if filepath.Dir(p) != dir {
			t.Errorf("%s = %q is not directly in %q", name, p, dir)
		}
		if other, ok := seen[p]; ok {
			t.Errorf("%s and %s are both %q", name, other, p)
		}
		seen[p] = name
	}
	if l.NetLog(b) != filepath.Join(l.NetLogDir(b), "egress.jsonl") {
		t.Errorf("NetLog = %q", l.NetLog(b))
	}
	for name, p := range map[string]string{"Trash": l.Trash(), "ForecastCache": l.ForecastCache(), "FleetDir": l.FleetDir(), "VisibleStore": l.VisibleStore()} {
		if filepath.Dir(p) != l.RepoDir() || !strings.HasPrefix(filepath.Base(p), ".") {
			t.Errorf("%s = %q: not a dot name in %q", name, p, l.RepoDir())
		}
	}
	if l.Logins("claude", "") != "/s/logins/claude" || l.Logins("claude", "proj-0123") != "/s/logins/claude@proj-0123" {
		t.Errorf("Logins = %q, %q", l.Logins("claude", ""), l.Logins("claude", "proj-0123"))
	}
}
