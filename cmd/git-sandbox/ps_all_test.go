package main

import (
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// TestAllRowsNamesRepos: REPO is the repository's name, its path where two
// share a name, and says "(missing)" of one moved or deleted.
func TestAllRowsNamesRepos(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	one := []sandbox.Status{{Branch: "b"}}
	repos := []repoList{
		{known: worktree.Known{Name: "api", MainWorkTree: "/home/u/src/api"}, list: one},
		{known: worktree.Known{Name: "api", MainWorkTree: "/srv/api"}, list: one},
		{known: worktree.Known{Name: "web", MainWorkTree: "/home/u/web"}, list: one, gone: "moved or deleted"},
		{known: worktree.Known{Name: "empty", MainWorkTree: "/e"}},
	}
	rows := allRows(repos)
	want := []repoStatus{
		{Repo: "~/src/api", RepoPath: "/home/u/src/api"},
		{Repo: "/srv/api", RepoPath: "/srv/api"},
		{Repo: "web (missing)", RepoPath: "/home/u/web", RepoMissing: true},
	}
	if len(rows) != len(want) {
		t.Fatalf("allRows = %+v", rows)
	}
	for i, w := range want {
		if r := rows[i]; r.Repo != w.Repo || r.RepoPath != w.RepoPath || r.RepoMissing != w.RepoMissing || r.Branch != "b" {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
	if rows := allRows(nil); rows == nil || len(rows) != 0 {
		t.Errorf("allRows(nil) = %#v, want an empty list (JSON [])", rows)
	}
}
