package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warmTag returns the warm image a start's messages name after prefix.
func warmTag(t *testing.T, stderr, prefix string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, prefix)
	if !ok {
		t.Fatalf("no %q in:\n%s", prefix, stderr)
	}
	tag := strings.TrimRight(strings.Fields(rest)[0], ":,")
	if !strings.HasPrefix(tag, "git-sandbox-warm:repo-") {
		t.Fatalf("unexpected warm image %q", tag)
	}
	return tag
}

// warmImages lists the ids of a repository's warm images.
func warmImages(t *testing.T, repoID string) []string {
	t.Helper()
	out, err := exec.Command("docker", "images", "-q", "--no-trunc", "--filter", "label=git-sandbox.warm.repo="+repoID).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// TestWarmStart: after setup succeeds its result outside /workspace is kept
// as an image of the repository's; a second sandbox with unchanged
// setup_inputs starts from it and skips setup (setup's marker is not
// written again, its tool is there, what it wrote into /workspace is
// written again and is not the agent's work); a changed go.sum runs setup
// again. Nothing of the user's environment, the prompt or the agent's
// login is in the image. image prune keeps the newest warm image.
func TestWarmStart(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("go.sum", "example.com/a v1.0.0 h1:one\n")
	e.WriteFile(".sandbox.toml", `setup = "echo setup-ran; echo run >> $HOME/setup-runs; echo installed > /var/tmp/tool; echo generated > generated.txt"
setup_inputs = ["go.sum", "missing.lock"]
verify = "cat /var/tmp/tool"
`)
	e.Git("add", ".")
	e.Git("commit", "-qm", "setup with inputs")
	// Setup leaves a marker in the sandbox's home (a mount, kept in the
	// image apart and copied into a warm sandbox's home).
	runs := func(branch string) string {
		return readFile(filepath.Join(filepath.Dir(e.Worktree(branch)), "home", "setup-runs"))
	}

	agent := "cat /var/tmp/tool generated.txt; echo agent > agent.txt"
	began := time.Now()
	r := e.MustSandbox("start", "w1", "--agent", "shell", "-e", "SANDBOX_TOKEN=env-s3cret", "-p", "prompt-s3cret", "--", "sh", "-c", agent)
	cold := time.Since(began)
	if !strings.Contains(r.Stdout+r.Stderr, "setup-ran") || r.Stdout != "installed\ngenerated\n" {
		t.Fatalf("first start: %s", r)
	}
	tag := warmTag(t, r.Stderr, "kept ")
	if names := e.MustSandbox("diff", "w1", "--name-only").Stdout; strings.TrimSpace(names) != "agent.txt" {
		t.Errorf("the first start's diff (setup's file is the baseline's): %q", names)
	}
	if !strings.Contains(r.Stderr, "keeping what setup installed as image "+tag) {
		t.Errorf("no progress line for the commit: %s", r.Stderr)
	}

	// Nothing secret in the image: configuration, or files.
	cfg, err := exec.Command("docker", "image", "inspect", "--format", "{{json .Config}}", tag).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"env-s3cret", "prompt-s3cret", "SANDBOX_TOKEN", "GIT_SANDBOX_SETUP", "GIT_SANDBOX_PROMPT", "setup-ran"} {
		if strings.Contains(string(cfg), secret) {
			t.Errorf("the warm image's configuration holds %q: %s", secret, cfg)
		}
	}
	var c struct{ Labels map[string]string }
	must(t, json.Unmarshal(cfg, &c))
	if c.Labels["git-sandbox.warm.repo"] != e.RepoID() || c.Labels["git-sandbox.prompt"] != "" || c.Labels["git-sandbox.branch"] != "" {
		t.Errorf("warm image labels: %v", c.Labels)
	}
	files, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", tag, "-c",
		"ls -A /home/sandbox; grep -rl s3cret / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; cat /var/tmp/tool").CombinedOutput()
	if err != nil || string(files) != "installed\n" {
		t.Errorf("the warm image's files (want only setup's tool, an empty home, no secret): %q %v", files, err)
	}

	// Second sandbox, same inputs: setup is skipped.
	began = time.Now()
	r = e.MustSandbox("start", "w2", "--agent", "shell", "--", "sh", "-c", agent)
	warm := time.Since(began)
	t.Logf("start with setup: %v; warm start: %v", cold.Round(time.Millisecond), warm.Round(time.Millisecond))
	if strings.Contains(r.Stdout+r.Stderr, "setup-ran") || r.Stdout != "installed\ngenerated\n" {
		t.Fatalf("warm start ran setup or lacks its result: %s", r)
	}
	if got := warmTag(t, r.Stderr, "setup skipped: image "); got != tag {
		t.Errorf("warm start used %s, want %s", got, tag)
	}
	if got := runs("w1"); got != "run\n" {
		t.Errorf("setup's marker in the first sandbox: %q", got)
	}
	// What setup wrote in the home comes from the image: once, not
	// written again.
	if got := runs("w2"); got != "run\n" {
		t.Errorf("setup's marker in the warm sandbox's home: %q, want the image's", got)
	}
	if names := e.MustSandbox("diff", "w2", "--name-only").Stdout; strings.TrimSpace(names) != "agent.txt" {
		t.Errorf("the warm start's diff (setup's file is the baseline's): %q", names)
	}
	// Verify runs in the warm image: setup's tool is there (cat fails
	// without it).
	if r := e.Sandbox("verify", "w2"); r.Code != 0 || !strings.Contains(r.Stderr, "verify passed on w2") {
		t.Errorf("verify in a warm sandbox: %s", r)
	}
	// A follow-up task in a new container of the warm image: no setup.
	if r := e.MustSandbox("start", "w2", "-p", "follow up", "--", "cat", "/var/tmp/tool"); strings.Contains(r.Stdout+r.Stderr, "setup-ran") || !strings.Contains(r.Stdout, "installed") {
		t.Errorf("follow-up in a warm sandbox: %s", r)
	}

	// A changed input: setup runs again, into a new image.
	e.WriteFile("go.sum", "example.com/a v1.0.1 h1:two\n")
	e.Git("commit", "-qam", "bump")
	r = e.MustSandbox("start", "w3", "--agent", "shell", "--", "sh", "-c", agent)
	if !strings.Contains(r.Stdout+r.Stderr, "setup-ran") {
		t.Fatalf("a changed go.sum did not run setup again: %s", r)
	}
	if tag3 := warmTag(t, r.Stderr, "kept "); tag3 == tag {
		t.Errorf("a changed go.sum kept the same image %s", tag3)
	}
	if got := runs("w3"); got != "run\n" {
		t.Errorf("setup's marker after a changed input: %q", got)
	}
	if n := len(warmImages(t, e.RepoID())); n != 2 {
		t.Fatalf("%d warm images, want 2", n)
	}

	if d := e.Sandbox("doctor"); strings.Count(d.Stdout, "info warm image git-sandbox-warm:repo-") != 2 {
		t.Errorf("doctor does not list both warm images: %s", d)
	}
	// Prune keeps the newest, and any a sandbox uses.
	if r := e.MustSandbox("image", "prune"); !strings.Contains(r.Stderr, "kept "+tag+": a sandbox uses it") {
		t.Errorf("prune while w1 and w2 use the old image: %s", r)
	}
	for _, b := range []string{"w1", "w2", "w3"} {
		e.MustSandbox("rm", "-f", b)
	}
	if r := e.MustSandbox("image", "prune"); !strings.Contains(r.Stderr, "removed image "+tag) {
		t.Errorf("prune: %s", r)
	}
	if n := len(warmImages(t, e.RepoID())); n != 1 {
		t.Errorf("%d warm images after prune, want the newest only", n)
	}
}

// TestRepoCaches: a cache a repository's .sandbox.toml names is a volume
// of that repository's: what one sandbox writes there the next sandbox of
// the repository reads; a sandbox of another repository with the same
// file does not see it. A target over an agent's login directory is
// refused before anything is created.
func TestRepoCaches(t *testing.T) {
	t.Parallel()
	const target = "/home/sandbox/.cache/build"
	repoFile := "[[repo_cache]]\nname = \"build\"\ntarget = \"" + target + "\"\n"
	e := nonRootEnv(t)
	t.Cleanup(func() { removeCacheVolumes(e.RepoID()) })
	e.WriteFile(".sandbox.toml", repoFile)
	e.Git("add", ".sandbox.toml")
	e.Git("commit", "-qm", "cache")
	other := NewEnv(t)
	t.Cleanup(func() { removeCacheVolumes(other.RepoID()) })
	other.WriteFile(".sandbox.toml", repoFile)
	other.Git("add", ".sandbox.toml")
	other.Git("commit", "-qm", "cache")

	r := e.MustSandbox("start", "c1", "--agent", "shell", "--", "sh", "-c", "echo from-c1 > "+target+"/marker && echo wrote")
	if !strings.Contains(r.Stdout, "wrote") || !strings.Contains(r.Stderr, "cache "+target+": new volume git-sandbox-rcache-") {
		t.Fatalf("first sandbox: %s", r)
	}
	r = e.MustSandbox("start", "c2", "--agent", "shell", "--", "sh", "-c", "cat "+target+"/marker")
	if r.Stdout != "from-c1\n" || strings.Contains(r.Stderr, "new volume") {
		t.Errorf("second sandbox of the repository: %s", r)
	}
	r = other.MustSandbox("start", "c1", "--agent", "shell", "--", "sh", "-c", "cat "+target+"/marker 2>/dev/null || echo absent")
	if r.Stdout != "absent\n" {
		t.Errorf("another repository's sandbox: %s", r)
	}
	if d := e.Sandbox("doctor"); !strings.Contains(d.Stdout, "ok   cache "+target+" (build, from .sandbox.toml): volume git-sandbox-rcache-") {
		t.Errorf("doctor: %s", d)
	}

	// A target over a login directory: refused, nothing made.
	e.WriteFile(".sandbox.toml", "[[repo_cache]]\nname = \"steal\"\ntarget = \"/home/sandbox/.claude\"\n")
	before := e.HostState()
	r = e.Sandbox("start", "c3", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "login") || !strings.Contains(r.Stderr, "hint:") {
		t.Fatalf("a cache over ~/.claude: %s", r)
	}
	e.AssertSameHostState(before)
	if out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=git-sandbox.cache.name=steal").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("a volume was made: %s", out)
	}
}

// TestSetupHomeReachesTheAgent: what setup writes under the home (a tool
// in ~/.local/bin, a marker) is there for the agent, whether setup ran for
// this sandbox (cold) or its result came from the warm image (warm). Setup
// ran with the sandbox's home mounted and the warm image leaves mounts
// out, so a warm start's agent found none of it.
func TestSetupHomeReachesTheAgent(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".sandbox.toml", `setup = "echo setup-ran; touch ~/marker; mkdir -p ~/.local/bin; printf '#!/bin/sh\\necho tool-ran\\n' > ~/.local/bin/mytool; chmod +x ~/.local/bin/mytool"
`)
	e.Git("add", ".")
	e.Git("commit", "-qm", "setup installs into the home")
	agent := `ls ~/marker && ~/.local/bin/mytool`
	for _, b := range []string{"cold", "warm"} {
		r := e.Sandbox("start", b, "--agent", "shell", "--", "sh", "-c", agent)
		if ran := strings.Contains(r.Stdout+r.Stderr, "setup-ran"); ran != (b == "cold") {
			t.Errorf("%s start: setup ran %v:\n%s", b, ran, r)
		}
		if r.Code != 0 || !strings.Contains(r.Stdout, "tool-ran") {
			t.Errorf("%s start: the agent does not find what setup wrote in the home:\n%s", b, r)
		}
	}
}
