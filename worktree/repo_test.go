package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	mkfile(t, filepath.Join(top, "sub", "dir", "f"), "")
	linked := filepath.Join(filepath.Dir(top), "linked")
	git(t, top, "worktree", "add", "-q", "-b", "side", linked)
	link := filepath.Join(filepath.Dir(top), "via-link")
	if err := os.Symlink(top, link); err != nil {
		t.Fatal(err)
	}
	common := filepath.Join(top, ".git")

	main, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	if main.CommonDir != common || main.GitDir != common || main.WorkTree != top || main.MainWorkTree != top ||
		main.Name != "proj" || main.Bare || !strings.HasPrefix(main.ID, "proj-") {
		t.Errorf("Open(main) = %+v", main)
	}
	tests := []struct {
		name          string
		dir           string
		gitDir, wtree string
	}{
		{"a subdirectory", filepath.Join(top, "sub", "dir"), common, top},
		{"through a symlink", link, common, top},
		{"a linked worktree", linked, filepath.Join(common, "worktrees", "linked"), linked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(ctx, tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.GitDir != tt.gitDir || r.WorkTree != tt.wtree {
				t.Errorf("GitDir %q WorkTree %q, want %q %q", r.GitDir, r.WorkTree, tt.gitDir, tt.wtree)
			}
			// Every worktree of one repository is the same repository.
			if r.CommonDir != common || r.MainWorkTree != top || r.ID != main.ID || r.Name != "proj" {
				t.Errorf("Open(%s) = %+v, want the main worktree's identity", tt.dir, r)
			}
		})
	}
	if other := newRepo(t, "proj"); func() string { r, _ := Open(ctx, other); return r.ID }() == main.ID {
		t.Error("two clones of one name share an id")
	}
	if r := main.Git(); r.GitDir != common || r.WorkTree != "" {
		t.Errorf("Git() = %+v", r)
	}
	if r := main.GitAt("/g", "/w"); r.GitDir != "/g" || r.WorkTree != "/w" {
		t.Errorf("GitAt = %+v", r)
	}
	if main.ObjectsDir() != filepath.Join(common, "objects") {
		t.Errorf("ObjectsDir = %q", main.ObjectsDir())
	}
}

// TestOpenBareWithLinkedWorktrees: sandboxes of a bare repository branch
// from the worktree in use; its name comes from the repository, so every
// worktree has one id. The bare repository itself is refused.
func TestOpenBareWithLinkedWorktrees(t *testing.T) {
	ctx := context.Background()
	src := newRepo(t, "src")
	root := filepath.Dir(src)
	bare := filepath.Join(root, "proj.git")
	git(t, root, "clone", "-q", "--bare", src, bare)
	wt1, wt2 := filepath.Join(root, "wt1"), filepath.Join(root, "wt2")
	git(t, bare, "worktree", "add", "-q", wt1, "main")
	git(t, bare, "worktree", "add", "-q", "-b", "two", wt2)
	r1, err := Open(ctx, wt1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(ctx, wt2)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Bare || r1.MainWorkTree != wt1 || r2.MainWorkTree != wt2 || r1.Name != "proj" || r1.ID != r2.ID || r1.CommonDir != bare {
		t.Errorf("Open of a bare repository's worktrees = %+v, %+v", r1, r2)
	}
	for _, dir := range []string{bare, filepath.Join(bare, "refs")} {
		if _, err := Open(ctx, dir); err == nil || !strings.Contains(err.Error(), "bare repository") {
			t.Errorf("Open(%s) = %v, want a bare repository refused", dir, err)
		}
	}
}

func TestOpenRefusals(t *testing.T) {
	ctx := context.Background()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(root, "plain")
	badGitfile := filepath.Join(root, "badgitfile")
	mkfile(t, filepath.Join(badGitfile, ".git"), "not a gitfile\n")
	dangling := filepath.Join(root, "dangling")
	mkfile(t, filepath.Join(dangling, ".git"), "gitdir: ../nowhere/.git/worktrees/x\n")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	sha256 := filepath.Join(root, "sha256")
	git(t, root, "init", "-q", "--object-format=sha256", sha256)

	// A sandbox root: a repository inside it is refused, unless it is a
	// sandbox worktree's top (whose gitfile the host writes).
	sandboxes := newRepo(t, "state")
	nested := filepath.Join(sandboxes, "agent-made")
	git(t, sandboxes, "init", "-q", nested)
	sandboxWT := filepath.Join(filepath.Dir(sandboxes), "user-repo")
	git(t, filepath.Dir(sandboxes), "init", "-q", sandboxWT)
	mkfile(t, filepath.Join(sandboxWT, "f"), "")
	git(t, sandboxWT, "add", "-A")
	git(t, sandboxWT, "commit", "-q", "-m", "c")
	wtPath := filepath.Join(sandboxes, "repo-1", "b", WorktreeDirName)
	git(t, sandboxWT, "worktree", "add", "-q", "-b", "b", wtPath)

	tests := []struct {
		name  string
		dir   string
		roots []string
		want  string
	}{
		{"not a repository", plain, nil, "not a git repository"},
		{"a .git that is no gitfile", badGitfile, nil, "is not a gitfile"},
		{"a gitfile to nowhere", dangling, nil, "points to a missing git directory"},
		{"SHA-256 objects", sha256, nil, "object names"},
		{"a repository inside the sandboxes", nested, []string{"", sandboxes}, "inside a sandbox's files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(ctx, tt.dir, tt.roots...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want %q", err, tt.want)
			}
			if ue, ok := usererr.As(err); !ok || (len(ue.Hints) == 0 && tt.name != "a .git that is no gitfile") {
				t.Errorf("not a user error with a hint: %#v", err)
			}
		})
	}
	r, err := Open(ctx, wtPath, sandboxes)
	if err != nil {
		t.Fatalf("a sandbox worktree's top refused: %v", err)
	}
	if r.MainWorkTree != sandboxWT {
		t.Errorf("MainWorkTree = %q, want %q", r.MainWorkTree, sandboxWT)
	}
}

func TestHooksDir(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	r, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		hooksPath string
		want      string
		set       bool
	}{
		{"", filepath.Join(top, ".git", "hooks"), false},
		{".githooks", filepath.Join(top, ".githooks"), true},
		{"/abs/hooks/", "/abs/hooks", true},
	}
	for _, tt := range tests {
		if tt.hooksPath != "" {
			git(t, top, "config", "core.hooksPath", tt.hooksPath)
		}
		got, set, err := r.HooksDir(ctx)
		if err != nil || got != tt.want || set != tt.set {
			t.Errorf("core.hooksPath %q: HooksDir = %q, %v, %v; want %q, %v", tt.hooksPath, got, set, err, tt.want, tt.set)
		}
	}
}

func TestValidAndCurrentBranch(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	r, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	g := r.GitAt(r.GitDir, r.WorkTree)
	for name, valid := range map[string]bool{"fix-login": true, "agent/fix": true, "": false, "-x": false, "a..b": false, "a b": false, "x.lock": false} {
		err := ValidBranch(ctx, g, name)
		if (err == nil) != valid {
			t.Errorf("ValidBranch(%q) = %v, want valid %v", name, err, valid)
		}
		if ue, ok := usererr.As(err); err != nil && (!ok || len(ue.Hints) == 0) {
			t.Errorf("ValidBranch(%q): not a user error with a hint", name)
		}
	}
	if b, err := CurrentBranch(ctx, g); err != nil || b != "main" {
		t.Errorf("CurrentBranch = %q, %v; want main", b, err)
	}
	git(t, top, "checkout", "-q", "--detach")
	if b, err := CurrentBranch(ctx, g); err != nil || b != "" {
		t.Errorf("CurrentBranch detached = %q, %v; want \"\"", b, err)
	}
	broken := r.GitAt(filepath.Join(top, "no-such-git-dir"), top)
	if _, err := CurrentBranch(ctx, broken); err == nil {
		t.Error("CurrentBranch of a missing git directory gave no error")
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/", "/a", false},
		{"/a/../b", "/a", false},
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v", tt.p, tt.dir, got)
		}
	}
}

func TestStateRoot(t *testing.T) {
	home := os.Getenv("HOME")
	tests := []struct {
		stateDir, xdg string
		want          string
	}{
		{"/s/state", "/x", "/s/state"},
		{"", "/x", "/x/git-sandbox"},
		{"", "relative", filepath.Join(home, ".local", "state", "git-sandbox")},
		{"", "", filepath.Join(home, ".local", "state", "git-sandbox")},
	}
	for _, tt := range tests {
		t.Setenv("GIT_SANDBOX_STATE_DIR", tt.stateDir)
		t.Setenv("XDG_STATE_HOME", tt.xdg)
		if got, err := StateRoot(); err != nil || got != tt.want {
			t.Errorf("StateRoot(%q, %q) = %q, %v; want %q", tt.stateDir, tt.xdg, got, err, tt.want)
		}
	}
	t.Setenv("GIT_SANDBOX_STATE_DIR", "rel")
	wd, _ := os.Getwd()
	if got, _ := StateRoot(); got != filepath.Join(wd, "rel") {
		t.Errorf("a relative GIT_SANDBOX_STATE_DIR = %q, want it made absolute", got)
	}
}

func TestExcludesFile(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, "proj")
	r, err := Open(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.ExcludesFile(); got != "" {
		t.Errorf("no excludes file: got %q", got)
	}
	xdg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "git", "ignore")
	mkfile(t, xdg, "*.log\n")
	t.Cleanup(func() { os.Remove(xdg) })
	if got := r.ExcludesFile(); got != xdg {
		t.Errorf("the XDG default: got %q, want %q", got, xdg)
	}
	own := filepath.Join(t.TempDir(), "ignore")
	mkfile(t, own, "*.tmp\n")
	git(t, top, "config", "core.excludesFile", own)
	if got := r.ExcludesFile(); got != own {
		t.Errorf("core.excludesFile: got %q, want %q", got, own)
	}
	git(t, top, "config", "core.excludesFile", own+".missing")
	if got := r.ExcludesFile(); got != "" {
		t.Errorf("a missing core.excludesFile: got %q", got)
	}
}
