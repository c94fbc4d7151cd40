package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
)

// nestedRepo makes a nested repository with a commit in a worktree, as
// the agent's git init would.
func (te *testEnv) nestedRepo(wt, dir string) {
	te.t.Helper()
	te.gitIn(wt, "init", "-q", dir)
	te.writeIn(wt, dir+"/one.txt", "one\n")
	te.gitIn(filepath.Join(wt, dir), "add", "one.txt")
	te.gitIn(filepath.Join(wt, dir), "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "-m", "nested")
}

// While the agent is stopped its nested repositories' .git are out of the
// worktree; a start puts them back first and names them; land and rm
// refuse to delete them.
func TestNestedRepositoriesQuarantinedWhileStopped(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.nestedRepo(sb.Worktree, "lib")
	te.writeIn(sb.Worktree, "top.txt", "top\n")
	gitDir := filepath.Join(sb.Worktree, "lib", ".git")
	if _, err := sb.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(gitDir); err == nil {
		t.Fatal("lib/.git is in the worktree after stop")
	}
	sb = te.find("t1")
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"rm", func() error { _, err := sb.Remove(context.Background(), RemoveOptions{}); return err }},
		{"land", func() error { _, err := land.Land(context.Background(), sb, land.Request{}); return err }},
	} {
		err := c.run()
		if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "nested git repositor") || !strings.Contains(err.Error(), "lib") {
			t.Errorf("%s with a nested repository: %v", c.name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(sb.Worktree, "lib", "one.txt")); err != nil {
		t.Fatalf("the nested repository's files are gone: %v", err)
	}
	te.err.Reset()
	if _, err := te.env.Start(context.Background(), detached("t1")); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		t.Fatalf("lib/.git not restored before the start: %v", err)
	}
	if !strings.Contains(te.err.String(), filepath.Join(sb.Worktree, "lib")+" is a nested git repository") {
		t.Errorf("start does not name the nested repository:\n%s", te.err.String())
	}
}
