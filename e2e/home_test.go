package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeClaudeImage builds an image of the test image plus a "claude" that
// runs its -p prompt as a bash command, labelled as having the claude
// CLI: the claude adapter (and its login paths) without the real CLI.
func fakeClaudeImage(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := ownImage("git-sandbox-e2e-fakeclaude:" + hex.EncodeToString(b))
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "claude"), []byte(`#!/bin/sh
# A stand-in for Claude Code in tests: runs the -p prompt with bash.
while [ $# -gt 0 ]; do
	if [ "$1" = "-p" ]; then exec /bin/bash -c "$2"; fi
	shift
done
echo "fake claude: no -p" >&2; exit 2
`), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+testImage+"\nCOPY claude /usr/local/bin/claude\nLABEL git-sandbox.agents=claude\n"), 0o644))
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("build the fake claude image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })
	return tag
}

// TestAgentHomeHoldsLoginsOnly: what an agent writes in its home (a
// .gitconfig with fsmonitor, a .bashrc, Claude Code settings with hooks)
// is absent in the next sandbox, of another repository, while its login
// file is there; a repository's setup, on the first start and again for a
// follow-up, cannot read the login; with agent_home = "per-repo" another
// repository's sandbox does not get the login.
func TestAgentHomeHoldsLoginsOnly(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	img := fakeClaudeImage(t)
	claude := func(dir, branch, prompt string) Result {
		t.Helper()
		r := e.Run(dir, nil, "git", "sandbox", "start", branch, "--agent", "claude", "--image", img, "--network", "none", "-p", prompt)
		if r.Code != 0 {
			t.Fatalf("start %s: %s", branch, r)
		}
		return r
	}
	const token = "LOGIN-TOKEN-e2e"
	claude(e.Repo, "a1", `mkdir -p ~/.claude && echo `+token+` > ~/.claude/.credentials.json &&
printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' > ~/.gitconfig && echo 'echo planted' >> ~/.bashrc &&
echo '{"hooks":{"planted":1}}' > ~/.claude/settings.json && echo written`)

	// Another repository, the same user.
	other := filepath.Join(e.Root, "other")
	must(t, os.MkdirAll(other, 0o755))
	e.CleanupRepoAt(other)
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		if r := e.Run(other, nil, "git", args...); r.Code != 0 {
			t.Fatalf("git %v: %s", args, r)
		}
	}
	r := claude(other, "b1", `echo "login: $(cat ~/.claude/.credentials.json)"; cat ~/.gitconfig ~/.bashrc ~/.claude/settings.json 2>&1; true`)
	if !strings.Contains(r.Stdout, "login: "+token) {
		t.Errorf("the login did not persist to the next sandbox:\n%s", r)
	}
	for _, planted := range []string{"fsmonitor", "planted"} {
		if strings.Contains(r.Stdout, planted) {
			t.Errorf("%q reached another repository's sandbox:\n%s", planted, r)
		}
	}

	// Setup may read everything it can find: never the login.
	e.WriteFile(".sandbox.toml", `setup = "for f in $(find / -xdev -name .credentials.json 2>/dev/null) $HOME/.claude/.credentials.json; do cat $f; done > /workspace/stolen.txt 2>&1; true"`+"\n")
	r = claude(e.Repo, "a2", `echo "agent login: $(cat ~/.claude/.credentials.json)"`)
	stolen := filepath.Join(e.Worktree("a2"), "stolen.txt")
	if !strings.Contains(r.Stdout, "agent login: "+token) {
		t.Errorf("the agent has no login after setup:\n%s", r)
	}
	if s, err := os.ReadFile(stolen); err != nil || strings.Contains(string(s), token) {
		t.Errorf("setup's stolen.txt (%v):\n%s", err, s)
	}
	must(t, os.Remove(stolen))
	// A follow-up task: a new container of the sandbox's warm image (made
	// by the setup above, before the login came in), so no setup of its
	// own; the agent has the login.
	r = e.MustSandbox("start", "a2", "-p", `echo "follow-up login: $(cat ~/.claude/.credentials.json)"`)
	if !strings.Contains(r.Stdout, "follow-up login: "+token) {
		t.Errorf("the follow-up has no login:\n%s", r)
	}
	if s, err := os.ReadFile(stolen); err == nil && strings.Contains(string(s), token) {
		t.Errorf("the follow-up's setup, stolen.txt:\n%s", s)
	}
	must(t, os.Remove(filepath.Join(e.Repo, ".sandbox.toml")))

	// One login per repository.
	e.WriteConfig("base_image = %q\nagent_home = \"per-repo\"\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage)
	r = claude(other, "b2", `echo "login: $(cat ~/.claude/.credentials.json 2>/dev/null)"`)
	if strings.Contains(r.Stdout, token) {
		t.Errorf("per-repo: the shared login reached the sandbox:\n%s", r)
	}
	logins, err := os.ReadDir(filepath.Join(e.State, "logins"))
	must(t, err)
	var names []string
	for _, l := range logins {
		names = append(names, l.Name())
	}
	if len(names) != 2 || names[0] != "claude" || !strings.HasPrefix(names[1], "claude@") {
		t.Errorf("login stores = %q, want the shared one and one per repository", names)
	}
}

// TestAttackLoginCopyBack: the agent replaces its login's directory with a
// symlink to a host path holding a file of the login's name, and its other
// login file with a FIFO. Copying the login back after it exits follows
// neither: the command returns, the host file does not reach the login
// store or the next sandbox, and the previous login is kept.
func TestAttackLoginCopyBack(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	img := fakeClaudeImage(t)
	hostDir := filepath.Join(e.Root, "host-secrets")
	must(t, os.MkdirAll(hostDir, 0o755))
	must(t, os.WriteFile(filepath.Join(hostDir, ".credentials.json"), []byte("HOST-SECRET"), 0o644))
	start := func(branch, prompt string) Result {
		t.Helper()
		return e.MustSandbox("start", branch, "--agent", "claude", "--image", img, "--network", "none", "-p", prompt)
	}
	start("l1", `mkdir -p ~/.claude && echo GOOD-LOGIN > ~/.claude/.credentials.json`)
	start("l2", `rm -rf ~/.claude ~/.claude.json && ln -s `+hostDir+` ~/.claude && mkfifo ~/.claude.json && echo armed`)
	r := start("l3", `echo "login: $(cat ~/.claude/.credentials.json)"; test -p ~/.claude.json && echo fifo; true`)
	if strings.Contains(r.Stdout, "HOST-SECRET") || !strings.Contains(r.Stdout, "login: GOOD-LOGIN") || strings.Contains(r.Stdout, "fifo") {
		t.Errorf("after the planted symlink and FIFO:\n%s", r)
	}
	if b, _ := os.ReadFile(filepath.Join(e.State, "logins", "claude", ".claude", ".credentials.json")); string(b) != "GOOD-LOGIN\n" {
		t.Errorf("the login store holds %q", b)
	}
}
