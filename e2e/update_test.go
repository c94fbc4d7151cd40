package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An update that conflicts leaves markers, land refuses while they remain,
// a command run in the exited sandbox resolves them, and land then puts
// both sandboxes' work on the base.
func TestUpdateConflictResolveLand(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("lines.txt", "one\ntwo\nthree\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "lines")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `printf 'one\nTWO from t1\nthree\n' > lines.txt`)
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `printf 'one\nTWO from t2\nthree\n' > lines.txt; echo t2 > t2.txt`)
	e.MustSandbox("land", "t1")

	r := e.Sandbox("land", "t2")
	if r.Code != 3 {
		t.Fatalf("land of the second sandbox: want exit 3, got %s", r)
	}
	if !strings.Contains(r.Stderr, "lines.txt") || strings.Contains(r.Stderr, "lines.txt~") {
		t.Errorf("land does not name the real conflicting path:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "git sandbox update t2") || strings.Contains(r.Stderr, "BRANCH") {
		t.Errorf("land's hint does not name the update command:\n%s", r.Stderr)
	}

	r = e.Sandbox("update", "t2")
	if r.Code != 3 {
		t.Fatalf("update with a conflict: want exit 3, got %s", r)
	}
	if strings.TrimSpace(r.Stdout) != "lines.txt" {
		t.Errorf("update lists %q, want lines.txt", r.Stdout)
	}
	wt := e.Worktree("t2")
	got := readFile(filepath.Join(wt, "lines.txt"))
	for _, want := range []string{"<<<<<<< sandbox t2\n", "TWO from t2\n", "=======\n", "TWO from t1\n", ">>>>>>> main "} {
		if !strings.Contains(got, want) {
			t.Errorf("worktree lines.txt after update lacks %q:\n%s", want, got)
		}
	}
	if got := readFile(filepath.Join(wt, "t2.txt")); got != "t2\n" {
		t.Errorf("t2.txt after update = %q", got)
	}

	r = e.Sandbox("land", "t2")
	if r.Code != 3 || !strings.Contains(r.Stderr, "lines.txt") || !strings.Contains(r.Stderr, "markers") {
		t.Fatalf("land while markers remain: want exit 3 naming lines.txt, got %s", r)
	}
	mainBefore := e.Git("rev-parse", "main")

	r = e.MustSandbox("exec", "t2", "--", "sh", "-c", `printf 'one\nTWO from t1 and t2\nthree\n' > lines.txt; echo resolved`)
	if !strings.Contains(r.Stdout, "resolved") {
		t.Errorf("exec output not passed through: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Fatalf("main moved before land")
	}
	e.MustSandbox("land", "t2")
	if got := e.Git("show", "main:lines.txt"); got != "one\nTWO from t1 and t2\nthree" {
		t.Errorf("main:lines.txt = %q", got)
	}
	if got := e.Git("show", "main:t2.txt"); got != "t2" {
		t.Errorf("main:t2.txt = %q", got)
	}
	if got := e.changedPaths("main"); !slices.Equal(got, []string{"lines.txt", "t2.txt"}) {
		t.Errorf("the landed commit changes %q, want lines.txt and t2.txt", got)
	}
}
