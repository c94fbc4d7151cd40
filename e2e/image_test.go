package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartBuildsTheMissingDefaultImage removes the default image and
// starts a sandbox: start builds it first (offline, from the configured
// local base) and goes on. Not parallel: every other test needs the image,
// and Go runs parallel tests only after the sequential ones.
func TestStartBuildsTheMissingDefaultImage(t *testing.T) {
	const backup = "git-sandbox-e2e-backup:latest"
	if out, err := exec.Command("docker", "tag", testImage, backup).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	defer func() {
		if exec.Command("docker", "image", "inspect", testImage).Run() != nil {
			_ = exec.Command("docker", "tag", backup, testImage).Run()
		}
		_ = exec.Command("docker", "rmi", backup).Run()
	}()
	if out, err := exec.Command("docker", "rmi", testImage).CombinedOutput(); err != nil {
		t.Fatalf("docker rmi: %v\n%s", err, out)
	}
	e := NewEnv(t)
	r := e.Sandbox("start", "auto", "--agent", "shell", "--", "sh", "-c", "git --version")
	if r.Code != 0 || !strings.Contains(r.Stderr, "is missing; building it from "+baseImage) || !strings.Contains(r.Stdout, "git version") {
		t.Fatalf("start without the default image: %s", r)
	}
	if err := exec.Command("docker", "image", "inspect", testImage).Run(); err != nil {
		t.Errorf("the default image was not built: %v", err)
	}
}

func TestDoctorConfigVersion(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Sandbox("doctor")
	if r.Code != 0 || !strings.Contains(r.Stdout, "ok   docker: engine") || !strings.Contains(r.Stdout, "ok   image") || !strings.Contains(r.Stdout, "ok   repository") {
		t.Errorf("doctor: %s", r)
	}
	r = e.Run(e.Repo, []string{"DOCKER_HOST=unix:///nonexistent.sock"}, "git", "sandbox", "doctor")
	if r.Code == 0 || !strings.Contains(r.Stdout, "FAIL docker") || !strings.Contains(r.Stdout, "hint:") {
		t.Errorf("doctor without Docker: %s", r)
	}
	e.WriteFile(".sandbox.toml", "agent = \"shell\"\n[limits]\npids = 64\n")
	r = e.MustSandbox("config", "show")
	for _, want := range []string{`agent = "shell"`, "pids = 64", "repository config", ".sandbox.toml"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("config show lacks %q:\n%s", want, r.Stdout)
		}
	}
	if r := e.MustSandbox("version"); !strings.HasPrefix(r.Stdout, "git sandbox ") {
		t.Errorf("version: %s", r)
	}
	if r := e.Sandbox("no-such-command"); r.Code != 2 || !strings.Contains(r.Stderr, "hint:") {
		t.Errorf("unknown command: %s", r)
	}
	// git turns `git sandbox --help` into `git help sandbox` (the man page);
	// the binary's own help is what that page is generated from.
	if r := e.Run(e.Repo, nil, filepath.Join(binDir, "git-sandbox"), "--help"); r.Code != 0 || !strings.Contains(r.Stdout, "EXIT STATUS") {
		t.Errorf("help lacks the exit statuses: %s", r)
	}
}

// TestManPage: make install's page renders, so `git help sandbox` works.
func TestManPage(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Run(e.Repo, nil, filepath.Join(binDir, "git-sandbox"), "__man")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, ".TH GIT-SANDBOX 1") || !strings.Contains(r.Stdout, "git sandbox land") {
		t.Fatalf("__man: %s", r)
	}
	if _, err := exec.LookPath("man"); err != nil {
		return // rendering needs man(1); the page itself was checked above
	}
	cmd := exec.Command("man", "-l", "-")
	cmd.Stdin = strings.NewReader(r.Stdout)
	cmd.Env = append(cmd.Environ(), "MANPAGER=cat", "MANWIDTH=100")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "EXIT STATUS") || strings.Contains(string(out), "warning") {
		t.Errorf("man -l: %v\n%s", err, out)
	}
}

// TestImageBuildSaysWhetherAgentsWereInstalled: without --no-agents the
// build tries to install the claude and codex CLIs and says plainly
// whether it could (offline, it cannot).
func TestImageBuildSaysWhetherAgentsWereInstalled(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	const tag = "git-sandbox-e2e-agents:latest"
	defer exec.Command("docker", "rmi", tag).Run()
	r := e.Sandbox("image", "build", "--base", baseImage, "--tag", tag)
	if r.Code != 0 {
		t.Fatalf("image build: %s", r)
	}
	// Said after the build by reading the image, so also true when every
	// step came from the cache.
	if !strings.Contains(r.Stderr, "has no agent CLIs") && !strings.Contains(r.Stderr, "agent CLIs in "+tag+": claude, codex") {
		t.Errorf("the build does not say whether the agent CLIs were installed:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "built "+tag) || !strings.Contains(r.Stderr, "Step ") {
		t.Errorf("no progress or result shown:\n%s", r.Stderr)
	}
}
