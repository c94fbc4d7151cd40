package worktree

import (
	"strings"
	"testing"
)

func TestEscapeBranchIsOneDistinctElement(t *testing.T) {
	seen := map[string]string{}
	for _, b := range []string{"fix-login", "agent/fix", "agent%2Ffix", "a%2Fb", "a/b", "x/y/z", "100%"} {
		e := EscapeBranch(b)
		if strings.Contains(e, "/") {
			t.Errorf("EscapeBranch(%q) = %q contains a slash", b, e)
		}
		if other, ok := seen[e]; ok {
			t.Errorf("%q and %q map to one directory %q", b, other, e)
		}
		seen[e] = b
	}
}

func TestLayout(t *testing.T) {
	l := Layout{Root: "/s", RepoID: "proj-0123"}
	if got, want := l.Worktree("agent/x"), "/s/proj-0123/agent%2Fx/worktree"; got != want {
		t.Errorf("Worktree = %q, want %q", got, want)
	}
	if got, want := l.PrivateGitDir("a"), "/s/proj-0123/a/git"; got != want {
		t.Errorf("PrivateGitDir = %q, want %q", got, want)
	}
	if got, want := l.AgentHome("claude"), "/s/agents/claude"; got != want {
		t.Errorf("AgentHome = %q, want %q", got, want)
	}
	l.WorktreesDir = "/w"
	if got, want := l.Worktree("a"), "/w/proj-0123/a/worktree"; got != want {
		t.Errorf("Worktree with WorktreesDir = %q, want %q", got, want)
	}
}

func TestRepoIDStableAndDistinct(t *testing.T) {
	a := repoID("proj", "/home/u/a/proj/.git")
	if a != repoID("proj", "/home/u/a/proj/.git") {
		t.Error("repo id not stable")
	}
	if a == repoID("proj", "/home/u/b/proj/.git") {
		t.Error("two clones with one name share an id")
	}
	if id := repoID("-we ird name", "/x/.git"); strings.ContainsAny(id, " /") || strings.HasPrefix(id, "-") {
		t.Errorf("unsafe id %q", id)
	}
}

func TestParseList(t *testing.T) {
	out := "worktree /r\x00HEAD 1111\x00branch refs/heads/main\x00\x00" +
		"worktree /s/wt\x00HEAD 2222\x00branch refs/heads/t1\x00locked git sandbox\x00\x00" +
		"worktree /d\x00HEAD 3333\x00detached\x00prunable gone\x00\x00"
	got := parseList([]byte(out))
	if len(got) != 3 {
		t.Fatalf("got %d entries: %+v", len(got), got)
	}
	if got[0].Path != "/r" || got[0].Branch != "refs/heads/main" || got[0].Head != "1111" {
		t.Errorf("entry 0 = %+v", got[0])
	}
	if !got[1].Locked || got[1].Branch != "refs/heads/t1" {
		t.Errorf("entry 1 = %+v", got[1])
	}
	if !got[2].Detached || !got[2].Prunable || got[2].Branch != "" {
		t.Errorf("entry 2 = %+v", got[2])
	}
}
