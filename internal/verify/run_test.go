package verify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
)

// repoWithTree makes a repository holding one commit and returns its git
// directory and the commit.
func repoWithTree(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte("check:\n\ttrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "-A")
	run("commit", "-q", "-m", "x")
	return filepath.Join(dir, ".git"), run("rev-parse", "HEAD")
}

func options(t *testing.T, f *enginefake.Engine, common, tree string) Options {
	var out bytes.Buffer
	return Options{
		Engine: f, CommonDir: common, Tree: tree, Command: "make check", Image: "img",
		Name: "v1", Labels: map[string]string{container.LabelManaged: "1", container.LabelRole: container.RoleVerify},
		Network: container.NetworkNone, Limits: container.Limits{Pids: 64}, UID: 1000, GID: 1000,
		WorkDir: filepath.Join(t.TempDir(), "verify"), Stdout: &out, Stderr: &out,
	}
}

func TestRunOnTheExportedTree(t *testing.T) {
	common, tree := repoWithTree(t)
	f := enginefake.New("img")
	o := options(t, f, common, tree)
	// A container of the same name left by an interrupted run goes first.
	stale := &container.Spec{Name: "v1", Image: "img", User: "1:1", Network: container.NetworkNone, Limits: container.Limits{Pids: 1}}
	stale.Harden()
	if _, err := f.Create(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	f.OnStart = func(c enginefake.Container) (int, bool) {
		for _, m := range c.Spec.Mounts {
			if m.Target == container.Workspace {
				if b, err := os.ReadFile(filepath.Join(m.Source, "Makefile")); err != nil || !strings.HasPrefix(string(b), "check:") {
					t.Errorf("the tree is not exported in the workspace: %q, %v", b, err)
				}
			}
		}
		if c.Spec.Network != container.NetworkNone || c.Spec.CapDrop[0] != "ALL" || c.Spec.Argv[2] != "make check" {
			t.Errorf("verify container spec = %+v", c.Spec)
		}
		return 5, true
	}
	code, err := Run(context.Background(), o)
	if err != nil || code != 5 {
		t.Fatalf("run = %d, %v; want the command's 5", code, err)
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left", n)
	}
	if _, err := os.Stat(o.WorkDir); !os.IsNotExist(err) {
		t.Errorf("work directory left: %v", err)
	}
}

func TestRunCleansUpWhenTheEngineFails(t *testing.T) {
	common, tree := repoWithTree(t)
	for _, method := range []string{"Create", "Attach", "Start"} {
		f := enginefake.New("img")
		f.Fail(method, errors.New("engine says no"))
		o := options(t, f, common, tree)
		if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "engine says no") {
			t.Errorf("%s failing: %v", method, err)
		}
		if n := len(f.Containers()); n != 0 {
			t.Errorf("%s failing: %d containers left", method, n)
		}
		if _, err := os.Stat(o.WorkDir); !os.IsNotExist(err) {
			t.Errorf("%s failing: work directory left", method)
		}
	}
}
