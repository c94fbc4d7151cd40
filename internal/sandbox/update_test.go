package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
)

// privateGit runs git in the agent's repository (as the agent would).
func (te *testEnv) privateGit(sb *Sandbox, args ...string) string {
	te.t.Helper()
	return te.gitIn(sb.Worktree, append([]string{"--git-dir=" + sb.PrivateGitDir, "--work-tree=" + sb.Worktree}, args...)...)
}

func TestUpdateConflictThenResolveAndLand(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.agentCommit(sb, "lib.txt", "one\nTWO sandbox\nthree\n", "agent commit")
	te.writeIn(sb.Worktree, "a.txt", "agent\n")
	te.fake.Exit(sb.Container, 0)
	te.write("lib.txt", "one\nTWO base\nthree\n")
	te.write("base.txt", "base\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "base moves")
	tip := te.git("rev-parse", "main")

	sb = te.find("t1")
	res, err := sb.UpdateBase(context.Background(), UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Conflicts, []string{"lib.txt"}) || !res.Merging {
		t.Fatalf("update: conflicts %q, merging %v", res.Conflicts, res.Merging)
	}
	got, _ := os.ReadFile(filepath.Join(sb.Worktree, "lib.txt"))
	for _, want := range []string{"<<<<<<< sandbox t1\n", "TWO sandbox\n", "TWO base\n", ">>>>>>> main " + tip[:12] + "\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("lib.txt lacks %q:\n%s", want, got)
		}
	}
	for file, want := range map[string]string{"a.txt": "agent\n", "base.txt": "base\n"} {
		if b, _ := os.ReadFile(filepath.Join(sb.Worktree, file)); string(b) != want {
			t.Errorf("%s = %q, want %q", file, b, want)
		}
	}
	sb = te.find("t1")
	if sb.Start != tip || !slices.Equal(sb.UpdateConflicts, []string{"lib.txt"}) {
		t.Errorf("record: start %s, conflicts %q", sb.Start, sb.UpdateConflicts)
	}
	if tree := te.git("rev-parse", sb.Refs().Baseline()+"^{tree}"); tree != te.git("rev-parse", tip+"^{tree}") {
		t.Errorf("the baseline was not moved to the base tip")
	}
	if got := te.privateGit(sb, "rev-parse", "main"); got != tip {
		t.Errorf("the agent's main = %s, want %s", got, tip)
	}
	if got := te.privateGit(sb, "rev-parse", "MERGE_HEAD"); got != tip {
		t.Errorf("the agent's MERGE_HEAD = %s, want %s", got, tip)
	}

	_, err = land.Land(context.Background(), sb, landOpts())
	if usererr.Code(err) != usererr.ExitConflict || !strings.Contains(err.Error(), "lib.txt") {
		t.Fatalf("land with markers left: %v", err)
	}
	te.writeIn(sb.Worktree, "lib.txt", "one\nTWO both\nthree\n")
	lr, err := land.Land(context.Background(), sb, landOpts())
	if err != nil {
		t.Fatal(err)
	}
	if parent := te.git("rev-parse", lr.Commit.String()+"^"); parent != tip {
		t.Errorf("landed on %s, want %s", parent, tip)
	}
	if got := te.git("diff-tree", "-r", "--name-only", "--no-commit-id", tip, lr.Commit.String()); got != "a.txt\nlib.txt" {
		t.Errorf("landed paths %q, want a.txt and lib.txt", got)
	}
}

func TestUpdateCleanFastForwardsTheAgent(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "new.txt", "uncommitted\n")
	te.fake.Exit(sb.Container, 0)
	te.write("base.txt", "base\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "base moves")
	tip := te.git("rev-parse", "main")
	sb = te.find("t1")
	res, err := sb.UpdateBase(context.Background(), UpdateOptions{})
	if err != nil || len(res.Conflicts) != 0 || res.Merging {
		t.Fatalf("update = %+v, %v", res, err)
	}
	if got := te.privateGit(sb, "rev-parse", "HEAD"); got != tip {
		t.Errorf("the agent's HEAD = %s, want the base tip %s", got, tip)
	}
	if st := te.privateGit(sb, "status", "--porcelain"); st != "?? new.txt" {
		t.Errorf("the agent's status after update = %q, want only its uncommitted file", st)
	}
	if res.After == nil || res.After.Changes != 1 {
		t.Errorf("the snapshot after update counts %+v, want 1 change", res.After)
	}
	// Up to date now.
	sb = te.find("t1")
	if res, err := sb.UpdateBase(context.Background(), UpdateOptions{}); err != nil || !res.UpToDate {
		t.Errorf("second update = %+v, %v", res, err)
	}
}

func TestUpdateRefusedWhileRunningUnlessWait(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.write("base.txt", "base\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "base moves")
	if _, err := sb.UpdateBase(context.Background(), UpdateOptions{}); usererr.Code(err) != usererr.ExitRefused {
		t.Fatalf("update of a running sandbox: %v", err)
	}
	done := make(chan error, 1)
	waits := te.fake.Count("WaitExit")
	go func() {
		_, err := sb.UpdateBase(context.Background(), UpdateOptions{Wait: true})
		done <- err
	}()
	waitFor(t, "the waiter", func() bool { return te.fake.Count("WaitExit") > waits })
	te.fake.Exit(sb.Container, 0)
	if err := <-done; err != nil {
		t.Fatalf("update --wait: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(sb.Worktree, "base.txt")); string(b) != "base\n" {
		t.Errorf("base.txt after update --wait = %q", b)
	}
}

func TestStartOnAnExistingSandbox(t *testing.T) {
	te := newTestEnv(t)
	te.fake.OnStart = func(c enginefake.Container) (int, bool) { return 0, true }
	te.start("t1")
	sb := te.find("t1")
	first := sb.Spec.Argv
	quiet := IO{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}

	// No task, no terminal: refused, nothing started.
	_, err := te.env.Start(context.Background(), StartOptions{Branch: "t1", IO: quiet})
	if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(strings.Join(hints(err), "\n"), "--rerun") {
		t.Fatalf("start without a task: %v", err)
	}
	if c, _ := te.fake.Get(sb.Container); c.Starts != 1 {
		t.Errorf("the task ran again: %d starts", c.Starts)
	}
	// Flags that cannot change are named.
	_, err = te.env.Start(context.Background(), StartOptions{Branch: "t1", Prompt: "x", Base: "main", Network: "none", IO: quiet})
	if err == nil || !strings.Contains(err.Error(), "--base, --network") {
		t.Errorf("start --base --network on an existing sandbox: %v", err)
	}
	// --rerun starts the same container again.
	if _, err := te.env.Start(context.Background(), StartOptions{Branch: "t1", Rerun: true, Detach: true, IO: quiet}); err != nil {
		t.Fatal(err)
	}
	if c, _ := te.fake.Get(sb.Container); c.Starts != 2 || !slices.Equal(c.Spec.Argv, first) {
		t.Errorf("--rerun: %d starts of %q", c.Starts, c.Spec.Argv)
	}
	// A follow-up task: a new container like the first, with the new task.
	if _, err := te.env.Start(context.Background(), StartOptions{Branch: "t1", Prompt: "the second part", Args: []string{"sh", "-c", "echo two"}, Verify: "make test", Memory: "512m", Detach: true, IO: quiet}); err != nil {
		t.Fatal(err)
	}
	c, ok := te.fake.Get(sb.Container)
	if !ok || !slices.Equal(c.Spec.Argv, []string{"sh", "-c", "echo two"}) || c.Starts != 1 {
		t.Fatalf("follow-up container: %+v", c)
	}
	if !slices.Contains(c.Spec.Env, "GIT_SANDBOX_PROMPT=the second part") || c.Spec.Limits.MemoryBytes != 512<<20 ||
		c.Spec.Image != sb.Spec.Image || !slices.Equal(c.Spec.CapDrop, sb.Spec.CapDrop) || len(c.Spec.Mounts) != len(sb.Spec.Mounts) {
		t.Errorf("follow-up spec: %+v", c.Spec)
	}
	if c.Spec.Labels[container.LabelPrompt] != "the second part" {
		t.Errorf("follow-up prompt label = %q", c.Spec.Labels[container.LabelPrompt])
	}
	sb = te.find("t1")
	if !slices.Equal(sb.Tasks, []string{"the second part"}) || sb.Verify != "make test" || sb.Spec.Limits.MemoryBytes != 512<<20 {
		t.Errorf("record after the follow-up: tasks %q, verify %q, limits %+v", sb.Tasks, sb.Verify, sb.Spec.Limits)
	}
}

func hints(err error) []string {
	if ue, ok := usererr.As(err); ok {
		return ue.Hints
	}
	return nil
}

// land --update brings the base in first and lands onto the new tip; with
// no -m and no prompt, the agent's last commit names the land.
func TestLandUpdateAndTheAgentsSubject(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.agentCommit(sb, "a.txt", "agent\n", "teach the parser commas")
	te.fake.Exit(sb.Container, 0)
	te.write("base.txt", "base\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "base moves")
	tip := te.git("rev-parse", "main")
	sb = te.find("t1")
	o := landOpts()
	o.Message, o.Update = "", true
	res, err := land.Land(context.Background(), sb, o)
	if err != nil {
		t.Fatal(err)
	}
	if parent := te.git("rev-parse", res.Commit.String()+"^"); parent != tip {
		t.Errorf("landed on %s, want the new tip %s", parent, tip)
	}
	if got := te.git("diff-tree", "-r", "--name-only", "--no-commit-id", tip, res.Commit.String()); got != "a.txt" {
		t.Errorf("landed paths %q, want a.txt only", got)
	}
	if got := te.git("log", "-1", "--format=%s", res.Commit.String()); got != "teach the parser commas" {
		t.Errorf("land subject = %q, want the agent's commit subject", got)
	}
}

// What the agent staged stays staged (additions, changes, removals), except
// on paths the base changed too.
func TestUpdateKeepsWhatTheAgentStaged(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "staged.txt", "new\n")
	te.writeIn(sb.Worktree, "lib.txt", "ONE\ntwo\nthree\n")
	te.privateGit(sb, "add", "staged.txt", "lib.txt")
	te.privateGit(sb, "rm", "-q", "README")
	te.fake.Exit(sb.Container, 0)
	te.write("lib.txt", "one\ntwo\nTHREE\n")
	te.write("base.txt", "base\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "base moves")
	sb = te.find("t1")
	if _, err := sb.UpdateBase(context.Background(), UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := te.privateGit(sb, "diff", "--cached", "--name-status"); got != "D\tREADME\nA\tstaged.txt" {
		t.Errorf("staged after update:\n%s\nwant README removed and staged.txt added", got)
	}
	if got := te.privateGit(sb, "diff", "--name-only"); got != "lib.txt" {
		t.Errorf("unstaged after update: %q, want lib.txt (the base changed it too)", got)
	}
	if b, _ := os.ReadFile(filepath.Join(sb.Worktree, "lib.txt")); string(b) != "ONE\ntwo\nTHREE\n" {
		t.Errorf("lib.txt = %q", b)
	}
}
