package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A one-shot agent that exited is never run again unasked: start without a
// task refuses (no terminal), --rerun runs it again, -p gives a follow-up
// task, and flags that cannot change are refused by name.
func TestFollowUpTasks(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "-p", "count the runs", "--", "sh", "-c",
		`echo "run:$GIT_SANDBOX_PROMPT" >> marker.txt`)
	marker := filepath.Join(e.Worktree("t1"), "marker.txt")
	if got := readFile(marker); got != "run:count the runs\n" {
		t.Fatalf("marker after the first run = %q", got)
	}

	r := e.Sandbox("start", "t1")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--rerun") || !strings.Contains(r.Stderr, "-p") {
		t.Errorf("start without a task and without a terminal: want a refusal naming -p and --rerun, got %s", r)
	}
	if got := readFile(marker); got != "run:count the runs\n" {
		t.Errorf("start without a task ran the task again: marker = %q", got)
	}

	for _, flags := range [][]string{{"--base", "main"}, {"--network", "none"}, {"--image", "x"}, {"--carry"}} {
		r := e.Sandbox(append(append([]string{"start", "t1", "-p", "no"}, flags...), "--", "sh", "-c", "echo no >> marker.txt")...)
		if r.Code == 0 || !strings.Contains(r.Stderr, flags[0]) {
			t.Errorf("start %v on an existing sandbox: want a refusal naming %s, got %s", flags, flags[0], r)
		}
	}

	e.MustSandbox("start", "t1", "--rerun")
	if got := readFile(marker); got != "run:count the runs\nrun:count the runs\n" {
		t.Errorf("marker after --rerun = %q", got)
	}

	e.MustSandbox("start", "t1", "-p", "two", "--memory", "512m", "--", "sh", "-c", `echo "two:$GIT_SANDBOX_PROMPT" >> marker.txt`)
	if got := readFile(marker); !strings.HasSuffix(got, "\ntwo:two\n") || strings.Count(got, "run:") != 2 {
		t.Errorf("marker after the follow-up task = %q", got)
	}
	name := e.PsOf("t1").Container
	doc := Inspect(t, name)
	if mem := doc["HostConfig"].(map[string]any)["Memory"].(float64); mem != 512<<20 {
		t.Errorf("follow-up container memory = %v, want 512m", mem)
	}
	if caps := doc["HostConfig"].(map[string]any)["CapDrop"]; caps == nil {
		t.Errorf("follow-up container lost its hardening: CapDrop = %v", caps)
	}

	// The first task names the land.
	e.MustSandbox("land", "t1")
	if got := e.Git("log", "-1", "--format=%s", "main"); got != "count the runs" {
		t.Errorf("land message = %q, want the task", got)
	}
}

// A sandbox whose container was removed on the engine (docker rm) takes a
// follow-up task: start makes its container again from the record, in the
// same worktree, on the same branch, and its snapshots go on from where
// they were; the work of both tasks lands.
func TestFollowUpAfterContainerRemoved(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "gone", "--agent", "shell", "--network", "none", "--", "sh", "-c", "echo one > one.txt")
	name := e.PsOf("gone").Container
	before := len(e.Snapshots("gone"))
	runOK(t, "", nil, "docker", "rm", "-f", name)
	if st := e.PsOf("gone").State; st != "container missing" {
		t.Fatalf("ps after docker rm: %s", st)
	}
	if r := e.Sandbox("wait", "gone"); r.Code == 0 || !strings.Contains(r.Stderr, "git sandbox start gone -p") {
		t.Errorf("wait on a sandbox without its container does not say how to go on: %s", r)
	}
	r := e.MustSandbox("start", "gone", "-p", "the second part", "--", "sh", "-c", "cat one.txt > two.txt")
	if !strings.Contains(r.Stderr, "no container any more; making it again") {
		t.Errorf("start does not say it made the container again: %s", r)
	}
	if got := readFile(filepath.Join(e.Worktree("gone"), "two.txt")); got != "one\n" {
		t.Errorf("the follow-up did not run in the same worktree: two.txt = %q", got)
	}
	if n := len(e.Snapshots("gone")); n <= before {
		t.Errorf("snapshots: %d before, %d after", before, n)
	}
	if p := e.PsOf("gone"); p.State != "exited" || p.Changes != 2 {
		t.Errorf("ps after the follow-up: %+v", p)
	}
	e.MustSandbox("land", "gone")
	if e.Git("show", "main:two.txt") != "one" || e.Git("show", "main:one.txt") != "one" {
		t.Error("the work of both tasks did not land")
	}
}

// wait returns after the exit snapshot: ps right after counts the changes.
func TestWaitThenPsShowsChanges(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "-d", "--agent", "shell", "--", "sh", "-c", `sleep 1; echo a > a.txt; echo b > b.txt`)
	e.MustSandbox("wait", "t1")
	if got := e.PsOf("t1").Changes; got != 2 {
		t.Errorf("ps right after wait: changes = %d, want 2", got)
	}
}

// attach ends on SIGTERM and SIGHUP, leaving the agent running.
func TestAttachEndsOnSignal(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "-d", "--agent", "shell", "--", "sh", "-c", `while :; do echo tick; sleep 0.2; done`)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		cmd := exec.Command("git", "sandbox", "attach", "t1")
		cmd.Dir = e.Repo
		cmd.Env = e.vars
		out := &lockedBuffer{}
		errOut := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, errOut
		must(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		Eventually(t, 30*time.Second, "attach to print", func() bool {
			select {
			case err := <-done:
				t.Fatalf("attach ended early (%v): %s", err, errOut.String())
			default:
			}
			return strings.Contains(out.String(), "tick")
		})
		must(t, cmd.Process.Signal(sig))
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("attach still runs 10s after %v", sig)
		}
		// Paused is running too: a snapshot reads its files this instant.
		if st := e.PsOf("t1").State; st != "running" && st != "paused" {
			t.Errorf("after attach ended on %v the agent is %s, want running", sig, st)
		}
	}
	e.MustSandbox("stop", "t1")
}

// lockedBuffer is a buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// land returns once the work is landed: the sandbox's files are moved
// aside, so its name can be used again at once, and deleted in the
// background.
func TestLandFreesTheNameAtOnce(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo a > a.txt`)
	wt := e.Worktree("t1")
	e.MustSandbox("land", "t1")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo b > b.txt`)
	if got := readFile(filepath.Join(e.Worktree("t1"), "b.txt")); got != "b\n" {
		t.Errorf("the second t1 did not run: b.txt = %q", got)
	}
	if got := readFile(filepath.Join(wt, "a.txt")); got != "a\n" {
		t.Errorf("the second t1 does not start from the landed work: a.txt = %q", got)
	}
	trash := filepath.Join(e.State, e.RepoID(), ".trash")
	Eventually(t, 30*time.Second, "the trash to be emptied", func() bool {
		entries, err := os.ReadDir(trash)
		return err != nil || len(entries) == 0
	})
}

// Started from a subdirectory of the checkout, the agent's container
// starts in the same directory of its worktree.
func TestStartFromASubdirectory(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("src/app/main.txt", "main\n")
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "a subdirectory")
	r := e.Run(filepath.Join(e.Repo, "src", "app"), nil, "git", "sandbox", "start", "sub", "--agent", "shell", "--network", "none", "--", "sh", "-c", "pwd; ls")
	if r.Code != 0 || !strings.Contains(r.Stdout, "/workspace/src/app\n") || !strings.Contains(r.Stdout, "main.txt") {
		t.Errorf("start from src/app: %s", r)
	}
}
