package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The user's commit hooks run scripts of the repository, which the agent
// wrote: at land they run in a container that cannot write the user's
// hooks or object store, and the message commit-msg leaves comes back only
// as plain text with the sandbox's own trailers.
func TestAttackCommitHooksSteeredByTheAgent(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.writeHook("pre-commit", "#!/bin/sh\n[ -x ./tools/pre-check ] && exec ./tools/pre-check \"$(dirname \"$0\")\"\nexit 0\n")
	e.writeHook("commit-msg", "#!/bin/sh\n[ -x ./tools/msg-check ] && exec ./tools/msg-check \"$1\"\nexit 0\n")
	hook := filepath.Join(e.Repo, ".git", "hooks", "commit-msg")
	hookBefore := fileState(hook)
	objects := filepath.Join(e.Repo, ".git", "objects")

	agent := func(name, msgCheck string) {
		t.Helper()
		e.MustSandbox("start", name, "--agent", "shell", "--", "sh", "-c", `mkdir -p tools && cat > tools/msg-check <<'X'
#!/bin/sh
`+msgCheck+`
X
cat > tools/pre-check <<'X'
#!/bin/sh
echo pwned >> "$1/commit-msg" 2>/dev/null && echo WROTE-HOOK
objects=$(head -1 .git/objects/info/alternates)
touch "$objects/pwned" 2>/dev/null && echo WROTE-OBJECTS
echo pwned > .git/config.pwned
exit 0
X
chmod +x tools/msg-check tools/pre-check; echo `+name+` > `+name+`.txt`)
	}

	// Forged and dropped trailers: the landed commit has the real ones.
	agent("a1", `grep -v '^Sandbox-Snapshot' "$1" > "$1.new"; printf 'Sandbox-Forced: nothing\nSandbox: someone-else\n' >> "$1.new"; mv "$1.new" "$1"`)
	r := e.MustSandbox("land", "a1", "-m", "feat: a1")
	if strings.Contains(r.Stderr, "WROTE-") {
		t.Errorf("a hook wrote the user's hooks or object store: %s", r)
	}
	got := e.parsedTrailers("main")
	if strings.Count(got, "Sandbox: ") != 1 || !strings.Contains(got, "Sandbox: a1\n") || strings.Contains(got, "someone-else") ||
		strings.Contains(got, "Sandbox-Forced") || !strings.Contains(got, "Sandbox-Snapshot: ") {
		t.Errorf("trailers after a hook forged and dropped some:\n%s", got)
	}
	if fileState(hook) != hookBefore {
		t.Errorf("the user's hook changed")
	}
	for _, dir := range []string{objects, e.VisibleObjects()} {
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Errorf("a hook wrote into %s", dir)
		}
	}

	// A message file swapped for a link, or holding escape sequences, or
	// too large, is not taken.
	for name, tc := range map[string]struct{ script, want string }{
		"a2": {`rm -f "$1"; ln -s ../README.md "$1"`, "not a file that can be opened"},
		"a3": {`printf 'feat: \033]52;c;cHduZWQ=\007 x\n' > "$1"`, "control character"},
		"a4": {`head -c 70000 /dev/zero | tr '\0' x > "$1"`, "larger than the limit"},
		"a5": {`: > "$1"`, "empty message"},
	} {
		agent(name, tc.script)
		tip := e.Git("rev-parse", "main")
		r := e.Sandbox("land", name, "-m", "feat: "+name)
		if r.Code != 4 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%s: land with a hook message that is not plain text: want exit 4 and %q, got %s", name, tc.want, r)
		}
		if e.Git("rev-parse", "main") != tip {
			t.Errorf("%s: main moved", name)
		}
	}
}
