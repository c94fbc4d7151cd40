package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/visible"
)

func TestCleanupMessage(t *testing.T) {
	for in, want := range map[string]string{
		"subject":                         "subject\n",
		"\n\nsubject  \n\n\n\nbody\t\n\n": "subject\n\nbody\n",
		"  \n\t\n":                        "",
		"a\n\n\nb\nc\n":                   "a\n\nb\nc\n",
	} {
		if got := CleanupMessage(in); got != want {
			t.Errorf("CleanupMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindCommitHooks(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if got := FindCommitHooks(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("a missing directory has hooks %q", got)
	}
	write("pre-commit.sample", 0o755)
	write("commit-msg", 0o644) // not executable: git ignores it
	if got := FindCommitHooks(dir); got != nil {
		t.Errorf("hooks = %q, want none", got)
	}
	write("real", 0o755)
	if err := os.Symlink("real", filepath.Join(dir, "pre-commit")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "commit-msg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := FindCommitHooks(dir); !slices.Equal(got, []string{PreCommit, CommitMsg}) {
		t.Errorf("hooks = %q", got)
	}
}

func hookOptions(t *testing.T, f *enginefake.Engine, common, commit string) CommitHooksOptions {
	o := options(t, f, common, commit)
	o.Labels[container.LabelRole] = container.RoleHooks
	hooks := t.TempDir()
	for _, h := range []string{PreCommit, CommitMsg} {
		if err := os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	store := visible.Store{Dir: filepath.Join(t.TempDir(), ".visible")}
	if _, err := store.Refresh(context.Background(), &gitcmd.Runner{GitDir: common}); err != nil {
		t.Fatal(err)
	}
	return CommitHooksOptions{Options: o, HooksDir: hooks, Hooks: []string{PreCommit, CommitMsg},
		Branch: "refs/heads/main", Tip: gitcmd.Hash(commit), Message: "feat: x\n\nSandbox: t1\n",
		VisibleObjects: store.Objects()}
}

func workspaceOf(c enginefake.Container) string {
	for _, m := range c.Spec.Mounts {
		if m.Target == container.Workspace {
			return m.Source
		}
	}
	return ""
}

// The hooks get a repository of their own: HEAD on the branch at the tip,
// an index holding the tree, the tree's objects packed in and the rest read
// from the visible store (never the user's object store); the message
// commit-msg leaves comes back cleaned.
func TestRunCommitHooksInARepositoryOfTheirOwn(t *testing.T) {
	common, commit := repoWithTree(t)
	f := enginefake.New("img")
	o := hookOptions(t, f, common, commit)
	// The tree to land holds a file no branch has.
	hostGit := func(stdin string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+common)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	work := hostGit("the agent's work\n", "hash-object", "-w", "--stdin")
	o.Tree = hostGit(hostGit("", "ls-tree", commit)+"\n100644 blob "+work+"\twork.txt\n", "mktree")
	f.OnStart = func(c enginefake.Container) (int, bool) {
		ws := workspaceOf(c)
		// The hooks' git reads the work (packed into its repository) and
		// the tip's history (from the visible store).
		for _, id := range []string{work, commit} {
			cmd := exec.Command("git", "cat-file", "-e", id)
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+filepath.Join(ws, ".git"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("the hooks' repository cannot read %s: %v %s", id, err, out)
			}
		}
		cmd := exec.Command("git", "ls-files", "--stage")
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+filepath.Join(ws, ".git"), "GIT_WORK_TREE="+ws)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "\tMakefile\n") || !strings.HasSuffix(strings.TrimSpace(string(out)), "\twork.txt") {
			t.Errorf("the hooks' index: %s, %v", out, err)
		}
		cmd = exec.Command("sh", "-c", `git rev-parse --symbolic-full-name HEAD && git rev-parse HEAD^{commit}`)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+filepath.Join(ws, ".git"))
		if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "refs/heads/main\n") || !strings.Contains(string(out), commit) {
			t.Errorf("the hooks' HEAD: %q, %v", out, err)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".git", "COMMIT_EDITMSG")); string(b) != o.Message {
			t.Errorf("the message given to commit-msg = %q", b)
		}
		mounts := map[string]bool{}
		for _, m := range c.Spec.Mounts {
			if m.Target != container.Workspace && m.Target != container.Home && !m.ReadOnly {
				t.Errorf("mount %s is writable", m.Target)
			}
			mounts[m.Target] = true
		}
		if !mounts[o.HooksDir] || !mounts[o.VisibleObjects] || mounts[filepath.Join(common, "objects")] {
			t.Errorf("mounts = %v", mounts)
		}
		if !slices.Equal(c.Spec.Argv[len(c.Spec.Argv)-3:], []string{o.HooksDir, "1", "1"}) || c.Spec.CapDrop[0] != "ALL" {
			t.Errorf("hooks container spec = %+v", c.Spec)
		}
		if err := os.WriteFile(filepath.Join(ws, ".git", "COMMIT_EDITMSG"), []byte("\nfeat: x  \n\n\nSandbox: t1\nChange-Id: I1\n\n"), 0o644); err != nil {
			t.Error(err)
		}
		return 0, true
	}
	res, err := RunCommitHooks(context.Background(), o)
	if err != nil || res.Code != 0 || res.Message != "feat: x\n\nSandbox: t1\nChange-Id: I1\n" {
		t.Fatalf("RunCommitHooks = %+v, %v", res, err)
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left", n)
	}
	if _, err := os.Stat(o.WorkDir); !os.IsNotExist(err) {
		t.Errorf("work directory left: %v", err)
	}
}

func TestRunCommitHooksFailures(t *testing.T) {
	common, commit := repoWithTree(t)
	for _, tc := range []struct {
		name   string
		code   int
		failed string
		edit   func(ws string) error
		errIs  string
	}{
		{name: "pre-commit fails", code: 3, failed: PreCommit},
		{name: "commit-msg fails", code: 4, failed: CommitMsg},
		{name: "killed", code: 137},
		{name: "message is a link", edit: func(ws string) error {
			p := filepath.Join(ws, ".git", "COMMIT_EDITMSG")
			_ = os.Remove(p)
			return os.Symlink("../Makefile", p)
		}, errIs: "not a file that can be opened"},
		{name: "message has escapes", edit: func(ws string) error {
			return os.WriteFile(filepath.Join(ws, ".git", "COMMIT_EDITMSG"), []byte("feat: \x1b[2Jx\n"), 0o644)
		}, errIs: "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := enginefake.New("img")
			o := hookOptions(t, f, common, commit)
			f.OnStart = func(c enginefake.Container) (int, bool) {
				if tc.edit != nil {
					if err := tc.edit(workspaceOf(c)); err != nil {
						t.Error(err)
					}
				}
				return tc.code, true
			}
			res, err := RunCommitHooks(context.Background(), o)
			if tc.errIs != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errIs) {
					t.Errorf("err = %v, want %q", err, tc.errIs)
				}
				return
			}
			if err != nil || res.Code != tc.code || res.Failed != tc.failed || res.Message != o.Message {
				t.Errorf("RunCommitHooks = %+v, %v", res, err)
			}
		})
	}
}
