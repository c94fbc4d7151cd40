package e2e

import (
	"io/fs"
	"os"
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

// devTag returns the devcontainer image start said it built, and removes
// it (after the test's containers) when the test ends.
func devTag(t *testing.T, e *Env, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "building image ")
	if !ok {
		t.Fatalf("start built no image:\n%s", stderr)
	}
	tag := strings.Fields(rest)[0]
	if !strings.HasPrefix(tag, "git-sandbox-dev:repo-") {
		t.Fatalf("unexpected devcontainer tag %q", tag)
	}
	t.Cleanup(func() {
		removeContainers(e.RepoID())
		removeImage(tag)
	})
	return tag
}

// TestDevcontainerStart: start builds the sandbox image from the
// repository's devcontainer (a Dockerfile on the offline base that adds the
// project's tool, standing in for python3), runs postCreateCommand as setup,
// applies containerEnv and remoteEnv but not a credential, ignores
// privileged and a host mount with a message each; the agent runs the tool,
// and a pre-commit hook of the user's that needs the tool passes on the
// agent's commit. A second sandbox reuses the image; --image skips the
// devcontainer entirely.
func TestDevcontainerStart(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".devcontainer/devcontainer.json", `{
	"build": {"dockerfile": "Dockerfile", "context": ".."},
	"postCreateCommand": "projtool --setup > /var/tmp/setup-marker",
	"containerEnv": {"PROJ_MODE": "dev", "GITHUB_TOKEN": "from-the-repo"},
	"remoteEnv": {"PATH": "${containerEnv:PATH}:/opt/proj/bin"},
	"privileged": true,
	"mounts": ["source=/,target=/host,type=bind"],
}
`)
	e.WriteFile(".devcontainer/Dockerfile", "FROM "+baseImage+"\nCOPY tools/projtool /usr/local/bin/projtool\n")
	e.WriteFile("tools/projtool", "#!/bin/sh\necho \"projtool ran: $*\"\n")
	must(t, os.Chmod(filepath.Join(e.Repo, "tools", "projtool"), 0o755))
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "devcontainer")
	// The user's own pre-commit hook needs the project's tool.
	e.WriteFile(".git/hooks/pre-commit", "#!/bin/sh\nprojtool --hook >&2 || exit 1\n")
	must(t, os.Chmod(filepath.Join(e.Repo, ".git", "hooks", "pre-commit"), 0o755))

	script := `projtool --from-agent; cat /var/tmp/setup-marker
echo "PROJ_MODE=$PROJ_MODE TOKEN=${GITHUB_TOKEN:-unset}"
case ":$PATH:" in *:/opt/proj/bin:*) echo "PATH extended";; esac
test -e /host/etc || echo "no host mount"
echo change > f.txt && git add f.txt && git commit -qm "agent change" && echo committed`
	r := e.MustSandbox("start", "dc1", "--agent", "shell", "--", "sh", "-c", script)
	tag := devTag(t, e, r.Stderr)
	for _, want := range []string{
		"warning: .devcontainer/devcontainer.json: privileged ignored: a sandbox is never privileged",
		"warning: .devcontainer/devcontainer.json: mounts ignored: mounts come only from your own config",
		"warning: .devcontainer/devcontainer.json: containerEnv.GITHUB_TOKEN ignored",
		"built " + tag + "; agent CLIs: none",
		"projtool ran: --hook", // the hook's output, on stderr
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("start's stderr lacks %q:\n%s", want, r)
		}
	}
	for _, want := range []string{"projtool ran: --from-agent", "projtool ran: --setup", "PROJ_MODE=dev TOKEN=unset", "PATH extended", "no host mount", "committed"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, r)
		}
	}
	if p := e.PsOf("dc1"); p.State != "exited" {
		t.Errorf("ps: %+v", p)
	}

	// Unchanged inputs: the same image, nothing built, setup run again.
	r = e.MustSandbox("start", "dc2", "--agent", "shell", "--", "sh", "-c", "cat /var/tmp/setup-marker")
	if strings.Contains(r.Stderr, "building image") || !strings.Contains(r.Stderr, "image "+tag+" (from .devcontainer/devcontainer.json, unchanged)") ||
		!strings.Contains(r.Stdout, "projtool ran: --setup") {
		t.Errorf("second start: %s", r)
	}

	// --image wins, and the devcontainer is not used at all.
	r = e.MustSandbox("start", "dc3", "--image", testImage, "--agent", "shell", "--", "sh", "-c", "command -v projtool || echo no projtool; test -e /var/tmp/setup-marker || echo no setup")
	if strings.Contains(r.Stderr, "devcontainer") || !strings.Contains(r.Stdout, "no projtool") || !strings.Contains(r.Stdout, "no setup") {
		t.Errorf("start --image: %s", r)
	}
}
