package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStateDirectoryOnATmpfs: the state directory on another file system
// than the repository (a tmpfs, as some users keep it). The store agents
// read is packed into the state directory: git pack-objects renamed its
// temporary file from the repository's object directory into it and
// failed with "Invalid cross-device link", so nothing could start.
func TestStateDirectoryOnATmpfs(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	shm, err := os.MkdirTemp("/dev/shm", "git-sandbox-e2e-state-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(shm) })
	var a, b syscall.Stat_t
	must(t, syscall.Stat(shm, &a))
	must(t, syscall.Stat(e.Repo, &b))
	if a.Dev == b.Dev {
		t.Fatalf("/dev/shm is on the repository's file system: the test proves nothing")
	}
	e.State = filepath.Join(shm, "git-sandbox")
	for i, v := range e.vars {
		if strings.HasPrefix(v, "XDG_STATE_HOME=") {
			e.vars[i] = "XDG_STATE_HOME=" + shm
		}
	}
	e.WriteFile("more.txt", "more history\n")
	e.Git("add", "more.txt")
	e.Git("commit", "-qm", "more history")
	r := e.MustSandbox("start", "tmpfs", "--agent", "shell", "--network", "none", "--",
		"sh", "-c", "git log --format=%s | tr '\\n' ' '; echo; echo agent > agent.txt")
	if !strings.Contains(r.Stdout, "more history initial commit") {
		t.Errorf("the agent cannot read the history:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(e.State, e.RepoID(), ".visible", "objects", "pack")); err != nil {
		t.Errorf("the store agents read is not in the state directory on the tmpfs: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(e.Repo, ".git", "objects", "pack", "tmp_*")); len(left) > 0 {
		t.Errorf("temporary packs left in the repository: %v", left)
	}
	e.MustSandbox("land", "tmpfs", "-m", "from the tmpfs")
	if got := readFile(filepath.Join(e.Repo, "agent.txt")); got != "agent\n" {
		t.Errorf("landed agent.txt = %q", got)
	}
}

// TestHooksInstallMakesTheStoreAhead: hooks install makes the store agents
// read, linking the repository's pack (it holds only what main reaches),
// so the first start packs nothing; doctor says what disk it takes.
func TestHooksInstallMakesTheStoreAhead(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.Git("gc", "-q")
	r := e.MustSandbox("hooks", "install")
	if !strings.Contains(r.Stderr, "made the store of what agents may read") {
		t.Errorf("hooks install did not make the store:\n%s", r)
	}
	packs, _ := filepath.Glob(filepath.Join(e.VisibleObjects(), "pack", "pack-*.pack"))
	theirs, _ := filepath.Glob(filepath.Join(e.Repo, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 || len(theirs) != 1 || filepath.Base(packs[0]) != filepath.Base(theirs[0]) {
		t.Fatalf("store packs %v, the repository's %v: want the repository's pack linked", packs, theirs)
	}
	var a, b syscall.Stat_t
	must(t, syscall.Stat(packs[0], &a))
	must(t, syscall.Stat(theirs[0], &b))
	if a.Ino != b.Ino {
		t.Error("the repository's pack was copied, not linked")
	}
	d := e.Sandbox("doctor")
	if !strings.Contains(d.Stdout, "store agents read:") || !strings.Contains(d.Stdout, "your repository's own packs, linked") {
		t.Errorf("doctor does not say what the store takes:\n%s", d.Stdout)
	}
	s := e.MustSandbox("start", "ahead", "--agent", "shell", "--network", "none", "--", "git", "log", "--format=%s")
	if !strings.Contains(s.Stdout, "initial commit") {
		t.Errorf("the agent cannot read the history:\n%s", s)
	}
}
