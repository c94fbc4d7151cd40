package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allReposEntry is one object of ps --all-repos --json.
type allReposEntry struct {
	Repo        string `json:"repo"`
	RepoPath    string `json:"repo_path"`
	RepoMissing bool   `json:"repo_missing"`
	PsEntry
}

// TestPsAllRepos: ps --all-repos, run outside any repository, lists the
// sandboxes of two real repositories with their containers' state from
// Docker; one moved away is listed from its records (its container still
// running), marked missing, and is itself again once moved back.
func TestPsAllRepos(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	other := filepath.Join(e.Root, "other")
	must(t, os.MkdirAll(other, 0o755))
	e.CleanupRepoAt(other)
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		if r := e.Run(other, nil, "git", args...); r.Code != 0 {
			t.Fatalf("git %v: %s", args, r)
		}
	}
	e.MustSandbox("start", "mine", "--agent", "shell", "--network", "none", "--", "sh", "-c", "echo done > DONE")
	if r := e.Run(other, nil, "git", "sandbox", "start", "theirs", "--agent", "shell", "--network", "none", "-d", "--", "sleep", "600"); r.Code != 0 {
		t.Fatalf("start in the other repository: %s", r)
	}
	outside := filepath.Join(e.Root, "elsewhere")
	must(t, os.MkdirAll(outside, 0o755))
	all := func() (map[string]allReposEntry, Result) {
		t.Helper()
		r := e.Run(outside, nil, "git", "sandbox", "ps", "--all-repos", "--json")
		if r.Code != 0 {
			t.Fatalf("ps --all-repos --json: %s", r)
		}
		var list []allReposEntry
		if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
			t.Fatalf("ps --all-repos --json: %v\n%s", err, r.Stdout)
		}
		byBranch := map[string]allReposEntry{}
		for _, x := range list {
			byBranch[x.Branch] = x
		}
		return byBranch, r
	}
	got, r := all()
	if m := got["mine"]; m.Repo != "repo" || m.RepoPath != e.Repo || m.State != "exited" || m.Changes != 1 || m.RepoMissing {
		t.Errorf("ps --all-repos on this repository's sandbox: %+v\n%s", m, r)
	}
	if o := got["theirs"]; o.Repo != "other" || o.RepoPath != other || o.State != "running" || o.RepoMissing {
		t.Errorf("ps --all-repos on the other repository's sandbox: %+v\n%s", o, r)
	}
	table := e.Run(outside, nil, "git", "sandbox", "ps", "--all-repos")
	for _, want := range []string{"REPO ", "\nrepo ", "\nother "} {
		if !strings.Contains(table.Stdout, want) {
			t.Errorf("ps --all-repos has no %q:\n%s", want, table)
		}
	}

	moved := other + "-moved"
	must(t, os.Rename(other, moved))
	got, r = all()
	if o := got["theirs"]; o.Repo != "other (missing)" || !o.RepoMissing || o.State != "running" {
		t.Errorf("ps --all-repos on a moved repository's sandbox: %+v\n%s", o, r)
	}
	if !strings.Contains(r.Stderr, "repository other is not at "+other+" any more (moved or deleted)") {
		t.Errorf("ps --all-repos does not name the moved repository:\n%s", r)
	}
	if m := got["mine"]; m.State != "exited" || m.RepoMissing {
		t.Errorf("the moved repository changed this one's row: %+v", m)
	}

	must(t, os.Rename(moved, other))
	got, r = all()
	if o := got["theirs"]; o.Repo != "other" || o.RepoMissing || o.State != "running" {
		t.Errorf("ps --all-repos once the repository is back: %+v\n%s", o, r)
	}
	if r := e.Run(other, nil, "git", "sandbox", "rm", "--force", "theirs"); r.Code != 0 {
		t.Fatalf("rm: %s", r)
	}
	got, _ = all()
	if _, ok := got["theirs"]; ok || len(got) != 1 {
		t.Errorf("ps --all-repos after rm: %+v", got)
	}
}
