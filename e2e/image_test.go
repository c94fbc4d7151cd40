package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeNPMBase is the test base plus an npm that installs the codex CLI (a
// stub) and fails for every other package, as npm does when its registry
// cannot be reached. Image builds from it try the real install steps and
// report a partial result, offline and in seconds.
var fakeNPMBase = sync.OnceValues(func() (string, error) {
	tag := ownImage(fmt.Sprintf("git-sandbox-test:fakenpm-%d", os.Getpid()))
	const npm = `#!/bin/sh
for a in "$@"; do
  case "$a" in
  @openai/codex) printf '#!/bin/sh\necho codex stub\n' > /usr/local/bin/codex; chmod +x /usr/local/bin/codex; echo "added 1 package"; exit 0 ;;
  @*) echo "npm error code ENOTFOUND ($a)" >&2; exit 1 ;;
  esac
done
exit 2
`
	dockerfile := "FROM " + baseImage + "\nRUN echo " + base64.StdEncoding.EncodeToString([]byte(npm)) +
		" | base64 -d > /usr/local/bin/npm && chmod +x /usr/local/bin/npm\n"
	cmd := exec.Command("docker", "build", "-q", "-t", tag, "-")
	cmd.Stdin = strings.NewReader(dockerfile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", tag, err, out.String())
	}
	return tag, nil
})

// TestStartBuildsTheMissingDefaultImage starts a sandbox while the default
// image is missing: start builds it first (offline, from the configured
// local base) and goes on. The default image here is a tag of this test's
// own, so no other test's image and no user's image is touched.
func TestStartBuildsTheMissingDefaultImage(t *testing.T) {
	t.Parallel()
	base, err := fakeNPMBase()
	must(t, err)
	auto := ownImage(fmt.Sprintf("git-sandbox-test:auto-%d", os.Getpid()))
	defer exec.Command("docker", "rmi", auto).Run()
	if exec.Command("docker", "image", "inspect", auto).Run() == nil {
		t.Fatalf("%s exists before the test", auto)
	}
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[limits]\npids = 256\n", base)
	r := e.Run(e.Repo, []string{"GIT_SANDBOX_DEFAULT_IMAGE=" + auto}, "git", "sandbox", "start", "auto", "--agent", "shell", "--", "sh", "-c", "git --version; command -v codex")
	if r.Code != 0 || !strings.Contains(r.Stderr, "image "+auto+" is missing; building it from "+base) || !strings.Contains(r.Stdout, "git version") {
		t.Fatalf("start without the default image: %s", r)
	}
	// The build tried the agent CLIs too: the one the fake npm could
	// install is there.
	if !strings.Contains(r.Stdout, "/usr/local/bin/codex") {
		t.Errorf("the auto-built image lacks the codex CLI the build could install: %s", r)
	}
	if err := exec.Command("docker", "image", "inspect", auto).Run(); err != nil {
		t.Errorf("the default image was not built: %v", err)
	}
}

func TestDoctorConfigVersion(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Sandbox("doctor")
	if r.Code != 0 || !strings.Contains(r.Stdout, "ok   docker: engine") || !strings.Contains(r.Stdout, "ok   image") || !strings.Contains(r.Stdout, "ok   repository") ||
		!strings.Contains(r.Stdout, "ok   mcp: git sandbox mcp answers initialize (git-sandbox ") {
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

// TestImageBuildSaysWhichAgentsWereInstalled: without --no-agents the
// build tries to install each agent's CLI with npm and says which it could
// and which it could not. Here npm can install codex only.
func TestImageBuildSaysWhichAgentsWereInstalled(t *testing.T) {
	t.Parallel()
	base, err := fakeNPMBase()
	must(t, err)
	e := NewEnv(t)
	tag := ownImage(fmt.Sprintf("git-sandbox-test:agents-%d", os.Getpid()))
	// Each build may leave the tag on another image (the cache can offer
	// another test's identical steps): every image the tag was on goes,
	// unless it has a tag still. Such an image is another test's own (the
	// default image TestStartBuildsTheMissingDefaultImage builds from the
	// same base is the same image), and removing it by id removed it from
	// under that test.
	built := map[string]bool{}
	defer func() {
		_ = exec.Command("docker", "rmi", tag).Run()
		for id := range built {
			if tags, err := exec.Command("docker", "image", "inspect", "--format", "{{len .RepoTags}}", id).Output(); err == nil && strings.TrimSpace(string(tags)) == "0" {
				_ = exec.Command("docker", "rmi", id).Run()
			}
		}
	}()
	// The first build runs every step (another test may have cached the
	// same ones); the second comes from the cache.
	for _, pass := range []string{"first build", "cached build"} {
		args := []string{"image", "build", "--base", base, "--tag", tag}
		if pass == "first build" {
			args = append(args, "--no-cache")
		}
		r := e.Sandbox(args...)
		if id := imageID(tag); id != "" {
			built[id] = true
		}
		if r.Code != 0 {
			t.Fatalf("image build (%s): %s", pass, r)
		}
		// Said after the build by reading the image, so also true when
		// every step came from the cache.
		for _, want := range []string{"built " + tag, "agent CLIs in " + tag + ": codex\n", "not installed: claude\n", "hint: run git sandbox image build --no-cache again where npm can reach its registry to add claude\n"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("%s: the output lacks %q:\n%s", pass, want, r.Stderr)
			}
		}
		if pass == "first build" && (!strings.Contains(r.Stderr, "Step ") || !strings.Contains(r.Stderr, "claude could NOT be installed")) {
			t.Errorf("no progress shown, or the failed install not reported:\n%s", r.Stderr)
		}
	}
	// --no-agents installs none, and says so. (Another tag: retagging
	// would leave the first image behind, untagged.)
	bare := ownImage(fmt.Sprintf("git-sandbox-test:no-agents-%d", os.Getpid()))
	defer exec.Command("docker", "rmi", bare).Run()
	r := e.Sandbox("image", "build", "--base", base, "--tag", bare, "--no-agents")
	if r.Code != 0 || !strings.Contains(r.Stderr, bare+" has no agent CLIs (--no-agents): only the shell agent works") {
		t.Errorf("image build --no-agents: %s", r)
	}
}
