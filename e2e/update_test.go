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
	// ps shows the sandbox as conflicted, naming the path.
	if ps := e.PsOf("t2"); !slices.Equal(ps.Conflicts, []string{"lines.txt"}) {
		t.Errorf("ps --json conflicts = %q, want lines.txt", ps.Conflicts)
	}
	if r := e.MustSandbox("ps"); !strings.Contains(r.Stdout, ", 1 conflicted") || !strings.Contains(r.Stderr, "conflict markers in lines.txt") {
		t.Errorf("ps does not show the conflict: %s", r)
	}

	r = e.MustSandbox("exec", "t2", "--", "sh", "-c", `printf 'one\nTWO from t1 and t2\nthree\n' > lines.txt; echo resolved`)
	if !strings.Contains(r.Stdout, "resolved") {
		t.Errorf("exec output not passed through: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Fatalf("main moved before land")
	}
	if r := e.MustSandbox("ps"); strings.Contains(r.Stdout, "conflicted") || len(e.PsOf("t2").Conflicts) != 0 {
		t.Errorf("ps still shows a resolved conflict: %s", r)
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

// A clean update lands only the agent's work, and the agent's repository
// sees the new base commit in its history.
func TestUpdateCleanThenLand(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c",
		`echo agent > agent.txt && git add agent.txt && git commit -qm "agent work"`)
	e.WriteFile("base.txt", "base\n")
	e.Git("add", "base.txt")
	e.Git("commit", "-qm", "base change")
	tip := e.Git("rev-parse", "main")

	e.MustSandbox("update", "t1")
	wt := e.Worktree("t1")
	if got := readFile(filepath.Join(wt, "base.txt")); got != "base\n" {
		t.Errorf("base.txt in the worktree after update = %q", got)
	}
	r := e.MustSandbox("exec", "t1", "--", "sh", "-c", `git log --format=%H; echo; git rev-parse main; git status --porcelain`)
	log, rest, _ := strings.Cut(r.Stdout, "\n\n")
	if !strings.Contains(log, tip) {
		t.Errorf("the agent's git log lacks the new base commit %s:\n%s", tip, r.Stdout)
	}
	if lines := strings.Split(strings.TrimSpace(rest), "\n"); lines[0] != tip || len(lines) != 1 {
		t.Errorf("inside: main = %q, status should be clean:\n%s", lines[0], rest)
	}
	if got := e.PsOf("t1").Changes; got != 1 {
		t.Errorf("ps after update: %d changes, want 1 (agent.txt)", got)
	}

	e.MustSandbox("land", "t1")
	if got := e.changedPaths("main"); !slices.Equal(got, []string{"agent.txt"}) {
		t.Errorf("the landed commit changes %q, want agent.txt only", got)
	}
	if got := e.Git("rev-parse", "main^"); got != tip {
		t.Errorf("landed on %s, want the base tip %s", got, tip)
	}
	// No -m and no prompt: the agent's last commit names the land.
	if got := e.Git("log", "-1", "--format=%s", "main"); got != "agent work" {
		t.Errorf("land message subject = %q, want the agent's commit subject", got)
	}
}

// Uncommitted, committed and carried work all survive an update, with a
// snapshot before and after it.
func TestUpdateKeepsEveryKindOfWork(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("shared.txt", "one\ntwo\nthree\n")
	e.Git("add", "shared.txt")
	e.Git("commit", "-qm", "shared")
	e.WriteFile("carried.txt", "carried\n")
	e.MustSandbox("start", "t1", "--carry", "--agent", "shell", "--", "sh", "-c",
		`echo c > committed.txt && git add committed.txt && git commit -qm c && echo u > uncommitted.txt && echo more >> README.md &&
		echo s > staged.txt && printf 'ONE\ntwo\nthree\n' > shared.txt && git add staged.txt shared.txt`)
	// The supervisor's exit snapshot first: taken during the update, it
	// would come between the update's own two.
	e.MustSandbox("wait", "t1")
	e.WriteFile("base.txt", "base\n")
	e.WriteFile("shared.txt", "one\ntwo\nTHREE\n")
	e.Git("add", "base.txt", "shared.txt")
	e.Git("commit", "-qm", "base change")

	r := e.MustSandbox("update", "t1")
	// What the agent staged stays staged, except where the base changed
	// the path too (said so).
	if !strings.Contains(r.Stderr, "staged changes to shared.txt, which the base changed too") {
		t.Errorf("update does not name the staged change it unstaged: %s", r)
	}
	if got := e.MustSandbox("exec", "t1", "--", "git", "diff", "--cached", "--name-only").Stdout; got != "staged.txt\n" {
		t.Errorf("the agent's staged paths after update = %q, want staged.txt", got)
	}
	wt := e.Worktree("t1")
	for path, want := range map[string]string{
		"carried.txt": "carried\n", "committed.txt": "c\n", "uncommitted.txt": "u\n",
		"README.md": "hello\nmore\n", "base.txt": "base\n", "staged.txt": "s\n", "shared.txt": "ONE\ntwo\nTHREE\n",
	} {
		if got := readFile(filepath.Join(wt, path)); got != want {
			t.Errorf("%s after update = %q, want %q", path, got, want)
		}
	}
	// Newest first: the update's own snapshot, then the one it took
	// before changing anything (a tree already snapshotted when the
	// agent exited is not written twice).
	snaps := e.Snapshots("t1")
	if len(snaps) < 2 || snaps[0].Reason != "update" {
		t.Fatalf("want a snapshot after the update and one before it, got %+v", snaps)
	}
	before, after := snaps[1], snaps[0]
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", before.ID+":base.txt"); r.Code == 0 {
		t.Errorf("the snapshot before the update already has base.txt")
	}
	for _, p := range []string{"uncommitted.txt", "committed.txt", "carried.txt"} {
		if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", before.ID+":"+p); r.Code != 0 {
			t.Errorf("the snapshot before the update lacks %s", p)
		}
		if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", after.ID+":"+p); r.Code != 0 {
			t.Errorf("the snapshot after the update lacks %s", p)
		}
	}
	e.MustSandbox("land", "t1", "-m", "work")
	if got := e.changedPaths("main"); !slices.Equal(got, []string{"README.md", "committed.txt", "shared.txt", "staged.txt", "uncommitted.txt"}) {
		t.Errorf("the landed commit changes %q, want the agent's five paths only", got)
	}
}

// exec after the agent exited runs in a fresh container: output and exit
// code pass through, what it writes is in the next snapshot, and no
// container is left behind.
func TestExecAfterAgentExited(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo hi > a.txt`)
	r := e.Sandbox("exec", "t1", "--", "sh", "-c", `echo out; echo err >&2; cat a.txt; echo made > made.txt; exit 7`)
	if r.Code != 7 || !strings.Contains(r.Stdout, "out\nhi\n") || !strings.Contains(r.Stderr, "err") {
		t.Errorf("exec: want exit 7 with its output, got %s", r)
	}
	if e.snapshotWith("t1", "made.txt", "made\n") == "" {
		t.Errorf("no snapshot holds made.txt after exec")
	}
	if st := e.PsOf("t1").State; st != "exited" {
		t.Errorf("state after exec = %s, want exited (the agent is not started)", st)
	}
	out := e.Run(e.Repo, nil, "docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=exec")
	if strings.TrimSpace(out.Stdout) != "" {
		t.Errorf("exec left containers behind: %s", out.Stdout)
	}
}
