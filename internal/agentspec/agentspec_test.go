package agentspec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/worktree"
)

func planInput(t *testing.T) Input {
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
	l := worktree.Layout{Root: filepath.Join(home, ".local", "state", "git-sandbox"), RepoID: "repo-1"}
	mk(l.Dir("t1"))
	if err := os.WriteFile(l.Gitfile("t1"), []byte("gitdir: x\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{l.PrivateGitDir("t1"), workspace.VisibleStore(l).Objects(), l.GivenObjects("t1"), l.Home("t1")} {
		mk(d)
	}
	hooks := mk(filepath.Join(root, "src", "repo", ".git", "hooks"))
	wt := mk(filepath.Join(l.Dir("t1"), "worktree"))
	return Input{
		Name: "git-sandbox-repo-t1-0000", Image: "git-sandbox:latest", Branch: "t1", RepoID: "repo-1",
		Base: "main", Agent: "shell", Argv: []string{"make", "test"},
		Worktree: wt, Workspace: workspace.BindMounts(l, "t1", wt, hooks),
		Network: "none", Memory: "1g", CPUs: 1, Pids: 100, UID: 1000, GID: 1000,
	}
}

// mountOf is the source of the workspace mount whose purpose starts with
// why.
func mountOf(t *testing.T, in Input, why string) string {
	t.Helper()
	for _, m := range in.Workspace {
		if strings.HasPrefix(m.Why, why) {
			return m.Source
		}
	}
	t.Fatalf("no workspace mount for %q", why)
	return ""
}

func TestBuildMountsAndHardening(t *testing.T) {
	in := planInput(t)
	spec, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	hooks := mountOf(t, in, "the user's hooks")
	want := map[string]bool{ // target -> read-only
		container.Workspace:                          false,
		container.Workspace + "/.git":                true,
		mountOf(t, in, "the agent's own repository"): false,
		mountOf(t, in, "the objects your branches"):  true,
		mountOf(t, in, "the objects given"):          true,
		hooks:                                        true,
		container.Home:                               false,
	}
	if len(spec.Mounts) != len(want) {
		t.Errorf("mounts = %+v", spec.Mounts)
	}
	for _, m := range spec.Mounts {
		if worktree.Within(m.Source, filepath.Dir(hooks)) && m.Source != hooks {
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

func TestBuildSetupWrapsTheAgent(t *testing.T) {
	in := planInput(t)
	in.Setup = "npm ci"
	spec, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Argv[0] != "/bin/sh" || spec.Argv[2] != toolchain.SetupScript || !slices.Equal(spec.Argv[4:], []string{"make", "test"}) {
		t.Errorf("argv = %q", spec.Argv)
	}
	if !slices.Contains(spec.Env, "GIT_SANDBOX_SETUP=npm ci") {
		t.Errorf("env = %q", spec.Env)
	}
}

func TestBuildRefusesUnsafeMounts(t *testing.T) {
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
		if _, err := Build(in); err == nil {
			t.Errorf("mount of %s accepted", src)
		}
	}
	in := planInput(t)
	link := filepath.Join(t.TempDir(), "wt")
	if err := os.Symlink(os.Getenv("HOME"), link); err != nil {
		t.Fatal(err)
	}
	in.Workspace[0].Source = link
	if _, err := Build(in); err == nil {
		t.Error("a worktree that resolves to the home directory was accepted")
	}
}

func TestBuildSkipsMissingHooksAndTTY(t *testing.T) {
	in := planInput(t)
	noHooks := filepath.Join(t.TempDir(), "no-hooks")
	l := worktree.Layout{Root: filepath.Join(os.Getenv("HOME"), ".local", "state", "git-sandbox"), RepoID: "repo-1"}
	in.Workspace = workspace.BindMounts(l, "t1", in.Worktree, noHooks)
	in.TTY, in.OpenStdin = true, true
	t.Setenv("TERM", "screen")
	spec, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range spec.Mounts {
		if m.Target == noHooks {
			t.Error("a missing hooks directory was mounted")
		}
	}
	if !slices.Contains(spec.Env, "TERM=screen") || !spec.TTY || spec.StdinOnce {
		t.Errorf("tty spec = %+v", spec)
	}
}

// A container with a terminal starts its agent once the terminal has a
// size; follow-ups find the agent's own argv under the wrappers.
func TestTerminalWait(t *testing.T) {
	in := planInput(t)
	in.TTY, in.OpenStdin, in.Setup = true, true, "make deps"
	spec, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Argv[2] != toolchain.SetupScript || spec.Argv[6] != terminalWait || !slices.Equal(spec.Argv[8:], in.Argv) {
		t.Fatalf("argv = %q", spec.Argv)
	}
	if got := AgentArgv(spec.Argv); !slices.Equal(got, in.Argv) {
		t.Errorf("agent argv = %q, want %q", got, in.Argv)
	}
	// From a warm image, the home's copy wraps it instead of setup.
	toolchain.WithoutSetup(spec, "warm")
	if got := AgentArgv(spec.Argv); spec.Argv[2] != toolchain.HomeLayerScript || !slices.Equal(got, in.Argv) {
		t.Errorf("warm: argv %q, agent argv = %q, want %q", spec.Argv, got, in.Argv)
	}
	in.TTY, in.OpenStdin = false, false
	if spec, _ := Build(in); slices.Contains(spec.Argv, terminalWait) {
		t.Errorf("no terminal, yet it waits for one: %q", spec.Argv)
	}
}

func TestRepoCacheMounts(t *testing.T) {
	in := planInput(t)
	in.RepoCaches = []config.RepoCache{{Name: "gomod", Target: "/home/sandbox/go/pkg/mod"}}
	spec, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	m := spec.Mounts[len(spec.Mounts)-1]
	if !m.Volume || m.Source != container.RepoCacheVolume("repo-1", "gomod") || m.Target != "/home/sandbox/go/pkg/mod" {
		t.Errorf("mount = %+v", m)
	}
	if container.RepoCacheVolume("repo-1", "gomod") == container.RepoCacheVolume("repo-2", "gomod") ||
		container.RepoCacheVolume("repo-1", "gomod") == container.CacheVolume("repo-1", "/home/sandbox/go/pkg/mod") {
		t.Errorf("repository caches share volumes")
	}
	visible, given := mountOf(t, in, "the objects your branches"), mountOf(t, in, "the objects given")
	for _, target := range []string{visible, visible + "/pack", given, "/workspace/.git"} {
		in.RepoCaches = []config.RepoCache{{Name: "x", Target: target}}
		if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("a cache on %s: %v", target, err)
		}
	}
}
