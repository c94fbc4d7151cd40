package e2e

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentCLICheckedBeforeCreate: the test image was built without agent
// CLIs and says so in its label; start --agent claude on it refuses before
// any branch, worktree or container exists, with a hint, and doctor lists
// per agent whether the image has its CLI.
func TestAgentCLICheckedBeforeCreate(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	labels, err := exec.Command("docker", "image", "inspect", "--format", `{{index .Config.Labels "git-sandbox.agents"}}|{{index .Config.Labels "git-sandbox.image"}}`, testImage).Output()
	if err != nil || strings.TrimSpace(string(labels)) != "|1" {
		t.Fatalf("the test image's labels: %q %v, want an empty agent list", labels, err)
	}
	r := e.Sandbox("start", "nocli", "--agent", "claude", "-p", "fix it", "-d")
	if r.Code == 0 || !strings.Contains(r.Stderr, "has no claude CLI") || !strings.Contains(r.Stderr, "hint: rebuild it with network access") ||
		!strings.Contains(r.Stderr, "--agent (shell)") {
		t.Fatalf("start --agent claude on an image without it: %s", r)
	}
	if out := e.Run(e.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/heads/nocli"); out.Code == 0 {
		t.Errorf("the branch was created: %s", out)
	}
	_ = filepath.WalkDir(e.State, func(p string, _ fs.DirEntry, _ error) error {
		if strings.Contains(p, "nocli") {
			t.Errorf("%s was created", p)
		}
		return nil
	})
	if wl := e.Git("worktree", "list", "--porcelain"); strings.Contains(wl, "nocli") {
		t.Errorf("a linked worktree was registered:\n%s", wl)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers were created: %s", out)
	}
	if e.hasSandbox("nocli") {
		t.Errorf("ps lists the refused sandbox")
	}

	d := e.Sandbox("doctor")
	for _, want := range []string{"warn claude CLI: not in " + testImage + " (start --agent claude refuses, the default agent)", "warn codex CLI: not in " + testImage} {
		if !strings.Contains(d.Stdout, want) {
			t.Errorf("doctor lacks %q:\n%s", want, d)
		}
	}
}
