package e2e

// Attacks on warm starts and repository caches: the agent runs after its
// sandbox's warm image was made, in a container of its own, so nothing it
// writes — outside /workspace, in its worktree's setup inputs, in its own
// commits — reaches the image a later sandbox starts from, or that image's
// key; and a repository cannot aim a cache of its own at what the sandbox
// mounts read-only or keeps a login in.

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackWarmImageCannotBePoisoned: an agent overwrites setup's tool,
// plants a file outside /workspace, and changes and commits go.sum in its
// worktree. The next sandbox of the repository (from the user's branch)
// still starts from the warm image made before the agent ran: setup is
// skipped, its tool is setup's, the planted file is absent.
func TestAttackWarmImageCannotBePoisoned(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("go.sum", "example.com/a v1.0.0 h1:one\n")
	e.WriteFile(".sandbox.toml", "setup = \"echo setup-ran; echo installed > /var/tmp/tool\"\nsetup_inputs = [\"go.sum\"]\n")
	e.Git("add", ".")
	e.Git("commit", "-qm", "setup")

	attack := `echo poisoned > /var/tmp/tool; echo evil > /var/tmp/planted
echo "example.com/evil v6.6.6 h1:x" > go.sum
git commit -qam "agent bumps go.sum" && echo armed`
	r := e.MustSandbox("start", "a1", "--agent", "shell", "--", "sh", "-c", attack)
	if !strings.Contains(r.Stdout, "armed") || !strings.Contains(r.Stdout+r.Stderr, "setup-ran") {
		t.Fatalf("the attack did not arm: %s", r)
	}
	tag := warmTag(t, r.Stderr, "kept ")

	r = e.MustSandbox("start", "a2", "--agent", "shell", "--", "sh", "-c", "cat /var/tmp/tool; cat /var/tmp/planted 2>/dev/null || echo no-plant; cat go.sum")
	if strings.Contains(r.Stdout+r.Stderr, "setup-ran") || warmTag(t, r.Stderr, "setup skipped: image ") != tag {
		t.Errorf("the agent's go.sum changed the next sandbox's key: %s", r)
	}
	if r.Stdout != "installed\nno-plant\nexample.com/a v1.0.0 h1:one\n" {
		t.Errorf("the next sandbox saw the agent's writes: %q", r.Stdout)
	}
}

// TestAttackRepoCacheCannotShadowAMount: a repository's .sandbox.toml asks
// for caches over what the sandbox mounts read-only or holds a login in —
// the visible object store (a writable volume there would let the agent
// plant objects the next sandbox reads as the host's), the hooks
// directory, the gitfile, an agent's login directory. Each is refused
// before anything is created.
func TestAttackRepoCacheCannotShadowAMount(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	objects := e.VisibleObjects()
	hooks, err := filepath.EvalSymlinks(filepath.Join(e.Repo, ".git", "hooks"))
	must(t, err)
	for _, target := range []string{objects, "/workspace/.git", "/home/sandbox/.codex", filepath.Dir(objects), hooks, filepath.Dir(hooks)} {
		e.WriteFile(".sandbox.toml", "[[repo_cache]]\nname = \"evil\"\ntarget = \""+target+"\"\n")
		before := e.HostState()
		r := e.Sandbox("start", "rc", "--agent", "shell", "--", "true")
		if r.Code == 0 || !strings.Contains(r.Stderr, "repo_cache") || !strings.Contains(r.Stderr, "hint:") {
			t.Errorf("ATTACK SUCCEEDED: a cache on %s was accepted: %s", target, r)
			e.Sandbox("rm", "-f", "rc")
			continue
		}
		e.AssertSameHostState(before)
		if out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=git-sandbox.cache.name=evil", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output(); strings.TrimSpace(string(out)) != "" {
			t.Errorf("a volume was made for %s: %s", target, out)
		}
	}
}
