package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
)

// onHooks makes every hooks container run fn on its workspace, then exit
// with code; it counts the runs.
func (te *testEnv) onHooks(code int, fn func(ws string)) *int {
	runs := new(int)
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		if c.Spec.Labels[container.LabelRole] != container.RoleHooks {
			return 0, false
		}
		*runs++
		for _, m := range c.Spec.Mounts {
			if m.Target == container.Workspace && fn != nil {
				fn(m.Source)
			}
		}
		return code, true
	}
	return runs
}

func (te *testEnv) hooks(names ...string) {
	te.t.Helper()
	dir := filepath.Join(te.repo, ".git", "hooks")
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			te.t.Fatal(err)
		}
	}
}

func TestLandWithoutHooksRunsNone(t *testing.T) {
	te := newTestEnv(t)
	runs := te.onHooks(1, nil)
	sb := te.finished("t1")
	if _, err := land.Land(context.Background(), sb, landOpts()); err != nil {
		t.Fatal(err)
	}
	if *runs != 0 {
		t.Errorf("%d hooks containers without hooks", *runs)
	}
}

func TestLandTakesCommitMsgsMessageWithItsOwnTrailers(t *testing.T) {
	te := newTestEnv(t)
	te.hooks("pre-commit", "commit-msg")
	runs := te.onHooks(0, func(ws string) {
		p := filepath.Join(ws, ".git", "COMMIT_EDITMSG")
		b, _ := os.ReadFile(p)
		msg := strings.ReplaceAll(string(b), "Sandbox: t1\n", "Sandbox: forged\n") + "Change-Id: I123\n"
		if err := os.WriteFile(p, []byte(msg), 0o644); err != nil {
			t.Error(err)
		}
	})
	sb := te.finished("t1")
	res, err := land.Land(context.Background(), sb, landOpts())
	if err != nil {
		t.Fatal(err)
	}
	msg := te.git("log", "-1", "--format=%B", res.Commit.String())
	if *runs != 1 || !strings.HasPrefix(msg, "land it\n") || !strings.Contains(msg, "Change-Id: I123\nSandbox: t1\n") || strings.Contains(msg, "forged") {
		t.Errorf("%d runs; message = %q", *runs, msg)
	}
}

func TestLandRefusedByAHook(t *testing.T) {
	te := newTestEnv(t)
	te.hooks("commit-msg")
	runs := te.onHooks(4, nil)
	sb := te.finished("t1")
	tip := te.git("rev-parse", "main")
	_, err := land.Land(context.Background(), sb, landOpts())
	var ue *usererr.Error
	if !errors.As(err, &ue) || ue.Code != usererr.ExitRefused || !strings.Contains(err.Error(), "commit-msg hook refused the land") {
		t.Fatalf("land = %v", err)
	}
	if te.git("rev-parse", "main") != tip || *runs != 1 {
		t.Errorf("main moved, or %d runs", *runs)
	}
	// --no-verify skips the hooks and says so in the commit.
	o := landOpts()
	o.NoVerify = true
	res, err := land.Land(context.Background(), te.find("t1"), o)
	if err != nil {
		t.Fatal(err)
	}
	if msg := te.git("log", "-1", "--format=%B", res.Commit.String()); !strings.Contains(msg, "Sandbox-No-Verify: commit-msg skipped") || *runs != 1 {
		t.Errorf("%d runs; message = %q", *runs, msg)
	}
}

// ps's conflict check reads regular files only, never through a link or
// from a FIFO.
func TestConflictsInWorktree(t *testing.T) {
	te := newTestEnv(t)
	sb := te.finished("t1")
	markers := "<<<<<<< sandbox t1\nours\n=======\ntheirs\n>>>>>>> main abc\n"
	te.writeIn(sb.Worktree, "conflicted.txt", markers)
	te.writeIn(sb.Worktree, "resolved.txt", "both\n")
	te.writeIn(sb.Worktree, "other.txt", markers)
	if err := os.Symlink("other.txt", filepath.Join(sb.Worktree, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(sb.Worktree, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := sb.Update(func(r *record.Record) error {
		r.UpdateConflicts = []string{"conflicted.txt", "resolved.txt", "link.txt", "fifo.txt", "gone.txt"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.ConflictsInWorktree(); !slices.Equal(got, []string{"conflicted.txt"}) {
		t.Errorf("ConflictsInWorktree = %q, want conflicted.txt only", got)
	}
}
