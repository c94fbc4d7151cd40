package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/worktree"
)

func planInput(t *testing.T) PlanInput {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	t.Setenv("HOME", home)
	mk := func(p string) string {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	state := filepath.Join(home, ".local", "state", "git-sandbox", "repo-1", "t1")
	gitfile := filepath.Join(state, "gitfile")
	mk(state)
	if err := os.WriteFile(gitfile, []byte("gitdir: x\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "src", "repo", ".git")
	return PlanInput{
		Name: "git-sandbox-repo-t1-0000", Image: "git-sandbox:latest", Branch: "t1", RepoID: "repo-1",
		Base: "main", Agent: "shell", Argv: []string{"make", "test"},
		Worktree: mk(filepath.Join(state, "worktree")), Gitfile: gitfile,
		PrivateGitDir: mk(filepath.Join(state, "git")), VisibleObjects: mk(filepath.Join(state, "..", ".visible", "objects")),
		GivenObjects: mk(filepath.Join(state, "given")),
		HostHooks:    mk(filepath.Join(repo, "hooks")), AgentHome: mk(filepath.Join(home, ".local", "state", "git-sandbox", "agents", "shell")),
		Network: "none", Memory: "1g", CPUs: 1, Pids: 100, UID: 1000, GID: 1000,
	}
}

func TestBuildSpecMountsAndHardening(t *testing.T) {
	in := planInput(t)
	spec, err := BuildSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{ // target -> read-only
		container.Workspace:           false,
		container.Workspace + "/.git": true,
		in.PrivateGitDir:              false,
		in.VisibleObjects:             true,
		in.GivenObjects:               true,
		in.HostHooks:                  true,
		container.Home:                false,
	}
	if len(spec.Mounts) != len(want) {
		t.Errorf("mounts = %+v", spec.Mounts)
	}
	for _, m := range spec.Mounts {
		if worktree.Within(m.Source, filepath.Dir(in.HostHooks)) && m.Source != in.HostHooks {
			t.Errorf("the user's repository is mounted (%s): the agent would read every object of it", m.Source)
		}
	}
	for _, m := range spec.Mounts {
		ro, ok := want[m.Target]
		if !ok || ro != m.ReadOnly {
			t.Errorf("mount %s -> %s readonly=%v unexpected", m.Source, m.Target, m.ReadOnly)
		}
	}
	if !slices.Equal(spec.CapDrop, []string{"ALL"}) || !slices.Contains(spec.Security, "no-new-privileges") || !spec.Init {
		t.Errorf("hardening missing: %+v", spec)
	}
	if spec.User != "1000:1000" || spec.Limits.MemoryBytes != 1<<30 || spec.Limits.Pids != 100 || spec.Network != "none" {
		t.Errorf("spec = %+v", spec)
	}
	if spec.Labels[container.LabelRepo] != "repo-1" || spec.Labels[container.LabelBranch] != "t1" || spec.Labels[container.LabelBase] != "main" {
		t.Errorf("labels = %v", spec.Labels)
	}
	if _, ok := spec.Labels[container.LabelPrompt]; ok {
		t.Error("an empty prompt was stamped")
	}
	if !slices.Equal(spec.Argv, []string{"make", "test"}) {
		t.Errorf("argv = %q", spec.Argv)
	}
	for _, e := range spec.Env {
		if strings.HasPrefix(e, "TERM=") {
			t.Errorf("TERM set without a terminal: %q", e)
		}
	}
}

func TestBuildSpecSetupWrapsTheAgent(t *testing.T) {
	in := planInput(t)
	in.Setup = "npm ci"
	spec, err := BuildSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Argv[0] != "/bin/sh" || spec.Argv[2] != setupScript || !slices.Equal(spec.Argv[4:], []string{"make", "test"}) {
		t.Errorf("argv = %q", spec.Argv)
	}
	if !slices.Contains(spec.Env, "GIT_SANDBOX_SETUP=npm ci") {
		t.Errorf("env = %q", spec.Env)
	}
}

func TestBuildSpecRefusesUnsafeMounts(t *testing.T) {
	for _, src := range []string{"/", "HOME", "HOMEPARENT"} {
		in := planInput(t)
		home := os.Getenv("HOME")
		switch src {
		case "HOME":
			src = home
		case "HOMEPARENT":
			src = filepath.Dir(home)
		}
		in.ExtraMounts = []config.Mount{{Source: src, Target: "/data"}}
		if _, err := BuildSpec(in); err == nil {
			t.Errorf("mount of %s accepted", src)
		}
	}
	in := planInput(t)
	link := filepath.Join(t.TempDir(), "wt")
	if err := os.Symlink(os.Getenv("HOME"), link); err != nil {
		t.Fatal(err)
	}
	in.Worktree = link
	if _, err := BuildSpec(in); err == nil {
		t.Error("a worktree that resolves to the home directory was accepted")
	}
}

func TestBuildSpecSkipsMissingHooksAndTTY(t *testing.T) {
	in := planInput(t)
	in.HostHooks = filepath.Join(t.TempDir(), "no-hooks")
	in.TTY, in.OpenStdin = true, true
	t.Setenv("TERM", "screen")
	spec, err := BuildSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range spec.Mounts {
		if m.Target == in.HostHooks {
			t.Error("a missing hooks directory was mounted")
		}
	}
	if !slices.Contains(spec.Env, "TERM=screen") || !spec.TTY || spec.StdinOnce {
		t.Errorf("tty spec = %+v", spec)
	}
}

func TestResolveEnv(t *testing.T) {
	t.Setenv("GS_TEST_TOKEN", "secret")
	got, err := resolveEnv([]string{"GS_TEST_TOKEN", "FOO=bar", "GS_TEST_UNSET_VAR"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"GS_TEST_TOKEN=secret", "FOO=bar"}) {
		t.Errorf("resolveEnv = %q", got)
	}
	if _, err := resolveEnv([]string{"=x"}); err == nil {
		t.Error("an empty name was accepted")
	}
}
