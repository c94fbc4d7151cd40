package e2e

import (
	"strings"
	"testing"
)

// A nested repository the agent makes in copy mode is found, quarantined
// and refused as in bind mode (TestAttackNestedRepositoryWorkIsNotLost):
// land and rm refuse naming it, diff says its files are in no snapshot,
// its git directory is out of the worktree while the agent is stopped
// (kept in the helper's own volume) and back for exec, which reads its
// files and commit, and land --force goes ahead. The engine is the main
// daemon in copy mode.
func TestCopyModeNestedRepositoryIsRefusedAndKept(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	mainHost := mainDockerHost()
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"here\"\nhost = %q\nmode = \"copy\"\n", baseImage, mainHost)
	checkNestedRefusedAndKept(t, e, "here", func(t *testing.T) func(string) bool {
		helper := strings.Fields(dockerAt(t, mainHost, "ps", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=helper"))
		if len(helper) != 1 {
			t.Fatalf("want the sandbox's one helper running, found %q", helper)
		}
		return func(p string) bool {
			return e.Run(e.Repo, nil, "docker", "exec", helper[0], "test", "-e", "/workspace/"+p).Code == 0
		}
	})
}

// checkNestedRefusedAndKept runs atkNestedWorkAgent in a sandbox on a
// copy-mode engine and checks what land, rm, diff and exec do with the
// nested repository it made; helperSees answers, from the engine, whether
// a path is in the worktree there.
func checkNestedRefusedAndKept(t *testing.T, e *Env, engine string, helperSees func(*testing.T) func(string) bool) {
	t.Helper()
	var said []Result
	r := e.MustSandbox("start", "lost", "--engine", engine, "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", atkNestedWorkAgent)
	if !strings.Contains(r.Stdout, "AGENT-DONE") {
		t.Fatalf("the agent did not finish: %s", r)
	}
	said = append(said, r)
	snaps := e.Snapshots("lost")
	if len(snaps) == 0 {
		t.Fatal("no snapshots")
	}
	if x := e.Run(e.Repo, nil, "git", "cat-file", "-e", snaps[0].ID+":lib/work.txt"); x.Code == 0 {
		t.Fatalf("the snapshot holds lib/work.txt: the test would prove nothing")
	}
	inWorktree := helperSees(t)
	if inWorktree("lib/.git") {
		t.Errorf("lib/.git is in the worktree on the engine while the agent is stopped: not quarantined")
	}
	if !inWorktree("lib/work.txt") {
		t.Fatalf("lib/work.txt is gone from the worktree")
	}

	oldMain := e.Git("rev-parse", "main")
	for _, args := range [][]string{{"land", "lost"}, {"rm", "lost"}} {
		r := e.Sandbox(args...)
		said = append(said, r)
		if r.Code != 4 || !strings.Contains(r.Stderr, "nested git repositor") || !strings.Contains(r.Stderr, "lib") ||
			!strings.Contains(r.Stderr, "--force") || !strings.Contains(r.Stderr, "git sandbox exec lost") {
			t.Errorf("git sandbox %s: no clear refusal naming lib and how to keep it: %s", args[0], r)
		}
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("a refused land moved main")
	}
	d := e.Sandbox("diff", "lost")
	said = append(said, d)
	if !strings.Contains(d.Stderr, "lib is a nested git repository: its files are in no snapshot") {
		t.Errorf("diff does not say lib's files are in no snapshot:\n%s", d)
	}
	// Kept, not lost: exec runs with the repository whole again.
	x := e.Sandbox("exec", "lost", "--", "sh", "-c", "cat lib/work.txt && git -C lib log -1 --format=%s")
	said = append(said, x)
	if x.Code != 0 || x.Stdout != "work only here\nlib\n" {
		t.Errorf("exec does not find lib's work and commit: %s", x)
	}
	if inWorktree("lib/.git") {
		t.Errorf("lib/.git is in the worktree after exec: not quarantined again")
	}

	r = e.Sandbox("land", "lost", "--force")
	said = append(said, r)
	if r.Code != 0 {
		t.Fatalf("land --force: %s", r)
	}
	if got := e.Git("show", "main:top.txt"); got != "landable" {
		t.Errorf("land --force did not land top.txt: %q", got)
	}
	if e.hasSandbox("lost") {
		t.Errorf("land --force left the sandbox")
	}
	for _, r := range said {
		if strings.Contains(r.Stderr, "quarantined") {
			t.Errorf("a command warns of the quarantine: %s", r)
		}
	}
}
