package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fleetConfig is the test user's config for fleets: no network, so no
// proxy per sandbox (the fleet, not egress, is under test here).
func (e *Env) fleetConfig() {
	e.WriteConfig("base_image = %q\nnetwork = \"none\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"256m\"\npids = 256\n", baseImage)
}

// writeTasks writes a tasks file outside the repository and returns its path.
func (e *Env) writeTasks(name, content string) string {
	p := filepath.Join(e.Root, name)
	must(e.t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// runningAgents counts this repository's running agent containers, as
// docker ps sees them.
func (e *Env) runningAgents(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=agent").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return len(strings.Fields(string(out)))
}

type fleetReport struct {
	Name        string `json:"name"`
	MaxParallel int    `json:"max_parallel"`
	Runner      bool   `json:"runner"`
	Tasks       []struct {
		Branch   string `json:"branch"`
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Changes  int    `json:"changes"`
	} `json:"tasks"`
}

func (e *Env) fleetPs(t *testing.T) []fleetReport {
	t.Helper()
	r := e.MustSandbox("fleet", "ps", "--json")
	var reps []fleetReport
	if err := json.Unmarshal([]byte(r.Stdout), &reps); err != nil {
		t.Fatalf("fleet ps --json: %v\n%s", err, r.Stdout)
	}
	return reps
}

// A six-task fleet with max_parallel = 2 never runs more than two agents
// at once (sampled from docker ps while it runs), runs two at once at
// some point, and runs every task to its end.
func TestFleetRunsAtMostMaxParallel(t *testing.T) {
	e := NewEnv(t)
	e.fleetConfig()
	var b strings.Builder
	b.WriteString("max_parallel = 2\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "\n[[task]]\nbranch = \"f%d\"\ncommand = [\"sh\", \"-c\", \"sleep 2; echo %d > out%d.txt\"]\n", i, i, i)
	}
	tasks := e.writeTasks("tasks.toml", b.String())

	r := e.MustSandbox("fleet", "start", tasks)
	if !strings.Contains(r.Stderr, "6 task(s)") || !strings.Contains(r.Stderr, "max_parallel 2 (from the file)") {
		t.Errorf("fleet start does not say what it started:\n%s", r.Stderr)
	}
	var mu sync.Mutex
	most, samples := 0, 0
	done := make(chan Result, 1)
	go func() { done <- e.Sandbox("fleet", "wait", "--timeout", "4m") }()
	var waited Result
sample:
	for {
		select {
		case waited = <-done:
			break sample
		case <-time.After(150 * time.Millisecond):
			n := e.runningAgents(t)
			mu.Lock()
			most = max(most, n)
			samples++
			mu.Unlock()
		}
	}
	if waited.Code != 0 {
		t.Fatalf("fleet wait: %s", waited)
	}
	if most > 2 {
		t.Errorf("%d agents ran at once; max_parallel is 2", most)
	}
	if most < 2 {
		t.Errorf("at most %d agent ran at once in %d samples: the fleet did not run tasks in parallel", most, samples)
	}
	reps := e.fleetPs(t)
	if len(reps) != 1 || len(reps[0].Tasks) != 6 || reps[0].MaxParallel != 2 {
		t.Fatalf("fleet ps = %+v", reps)
	}
	for _, task := range reps[0].Tasks {
		if task.Status != "exited" || task.ExitCode == nil || *task.ExitCode != 0 || task.Changes != 1 {
			t.Errorf("task %s: %s (exit %v, %d changes), want exited 0 with one change", task.Branch, task.Status, task.ExitCode, task.Changes)
		}
	}
	if reps[0].Runner {
		t.Error("the runner is still running after every task ended")
	}
	table := e.MustSandbox("fleet", "ps")
	if !strings.Contains(table.Stdout, "FLEET") || !strings.Contains(table.Stdout, "f6") || strings.Count(table.Stdout, "exited (0)") != 6 ||
		!strings.Contains(table.Stderr, "fleet tasks: max_parallel 2, runner ended") {
		t.Errorf("fleet ps:\n%s", table)
	}
	for i := 1; i <= 6; i++ {
		got := readFile(filepath.Join(e.Worktree(fmt.Sprintf("f%d", i)), fmt.Sprintf("out%d.txt", i)))
		if got != fmt.Sprintf("%d\n", i) {
			t.Errorf("f%d wrote %q", i, got)
		}
	}
	// fleet rm removes every sandbox of the fleet (their work is not
	// landed: -f) and the fleet.
	e.MustSandbox("fleet", "rm", "-f")
	if ps := e.Ps(); len(ps) != 0 {
		t.Errorf("sandboxes left after fleet rm: %+v", ps)
	}
	if reps := e.fleetPs(t); len(reps) != 0 {
		t.Errorf("fleets left after fleet rm: %+v", reps)
	}
}

// A malformed tasks file is refused whole, each problem with its line,
// and nothing starts: no branch, worktree, container or fleet.
func TestFleetMalformedFileStartsNothing(t *testing.T) {
	e := NewEnv(t)
	e.fleetConfig()
	e.Git("branch", "taken")
	tasks := e.writeTasks("bad.toml", `max_parallel = 2

[[task]]
branch = "ok-1"
command = ["true"]

[[task]]
branch = "ok-2"
command = ["true"]
colour = "blue"

[[task]]
branch = "ok-1"
command = ["true"]

[[task]]
branch = "taken"
command = ["true"]

[[task]]
branch = "ok-3"
command = ["true"]
limits = { memory = "1k" }
`)
	worktrees := e.Git("worktree", "list", "--porcelain")
	r := e.Sandbox("fleet", "start", tasks)
	if r.Code == 0 {
		t.Fatalf("a malformed tasks file was accepted: %s", r)
	}
	for _, want := range []string{
		"nothing was started",
		"bad.toml:10: unknown key colour",
		"bad.toml:13: branch ok-1 is also the branch of the task at line 3",
		"bad.toml:16: [[task]] 4: branch taken, or one git cannot hold beside it, exists already",
		"bad.toml:23: [[task]] 5: limits.memory",
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.Stderr)
		}
	}
	for _, b := range []string{"ok-1", "ok-2", "ok-3"} {
		if out := e.Git("branch", "--list", b); out != "" {
			t.Errorf("branch %s was created", b)
		}
	}
	if got := e.Git("worktree", "list", "--porcelain"); got != worktrees {
		t.Errorf("worktrees changed:\n%s", got)
	}
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output()
	must(t, err)
	if ids := strings.Fields(string(out)); len(ids) != 0 {
		t.Errorf("containers were created: %v", ids)
	}
	if reps := e.fleetPs(t); len(reps) != 0 {
		t.Errorf("a fleet was recorded: %+v", reps)
	}
	// A file that does not even parse names its line too.
	bad := e.writeTasks("syntax.toml", "[[task]]\nbranch = \"x\"\ncommand = [\"true\"\n")
	r = e.Sandbox("fleet", "start", bad)
	if r.Code == 0 || !strings.Contains(r.Stderr, "syntax.toml:") {
		t.Errorf("a file that does not parse: %s", r)
	}
}

// The landing queue verifies the merged tree: three sandboxes that each
// pass verify alone, where the second's work merged onto the first's
// fails it. The first lands, the queue stops at the second saying why,
// the third is untouched; after the user fixes the second, --continue
// lands the rest.
func TestFleetLandVerifiesTheMergedTree(t *testing.T) {
	e := NewEnv(t)
	e.fleetConfig()
	tasks := e.writeTasks("trio.toml", `max_parallel = 3

[[task]]
branch = "q1"
verify = "test ! -e a.txt || test ! -e b.txt"
command = ["sh", "-c", "echo a > a.txt"]
prompt = "add a"

[[task]]
branch = "q2"
verify = "test ! -e a.txt || test ! -e b.txt"
command = ["sh", "-c", "echo b > b.txt"]
prompt = "add b"

[[task]]
branch = "q3"
verify = "test ! -e a.txt || test ! -e b.txt"
command = ["sh", "-c", "echo c > c.txt"]
prompt = "add c"
`)
	e.MustSandbox("fleet", "start", tasks)
	e.MustSandbox("fleet", "wait", "--timeout", "4m")
	if v := e.Sandbox("verify", "q2"); v.Code != 0 {
		t.Fatalf("q2 alone fails verify: %s", v)
	}
	start := e.Git("rev-parse", "main")

	r := e.Sandbox("fleet", "land")
	if r.Code != 4 {
		t.Fatalf("fleet land: want exit 4 (refused at q2), got %s", r)
	}
	for _, want := range []string{"landed q1 as", "stopped at q2; not landed: q2, q3", "verify failed (exit code 1) on the merged tree", "git sandbox fleet land --continue"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("fleet land does not say %q:\n%s", want, r.Stderr)
		}
	}
	if n := e.Git("rev-list", "--count", start+"..main"); n != "1" {
		t.Errorf("%s commits landed, want only q1's", n)
	}
	if got := e.Git("show", "main:a.txt"); got != "a" {
		t.Errorf("main:a.txt = %q", got)
	}
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", "main:b.txt"); r.Code == 0 {
		t.Error("q2's b.txt landed although the merged tree failed verify")
	}
	for _, b := range []string{"q2", "q3"} {
		if !e.hasSandbox(b) {
			t.Errorf("sandbox %s is gone", b)
		}
	}
	if got := readFile(filepath.Join(e.Worktree("q3"), "c.txt")); got != "c\n" {
		t.Errorf("q3 was touched: c.txt = %q", got)
	}
	// A new queue is refused while one is stopped.
	if r := e.Sandbox("fleet", "land", "q3"); r.Code == 0 || !strings.Contains(r.Stderr, "stopped at q2") {
		t.Errorf("a second queue while one is stopped: %s", r)
	}

	// The fix: bring main into q2, then drop a.txt there.
	e.MustSandbox("update", "q2")
	must(t, os.Remove(filepath.Join(e.Worktree("q2"), "a.txt")))
	r = e.Sandbox("fleet", "land", "--continue")
	if r.Code != 0 {
		t.Fatalf("fleet land --continue: %s", r)
	}
	for _, want := range []string{"landed q2 as", "landed q3 as", "landed 2 sandbox(es)"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("fleet land --continue does not say %q:\n%s", want, r.Stderr)
		}
	}
	if n := e.Git("rev-list", "--count", start+"..main"); n != "3" {
		t.Errorf("%s commits on main, want 3", n)
	}
	files := e.Git("ls-tree", "--name-only", "main")
	if strings.Contains(files, "a.txt") || !strings.Contains(files, "b.txt") || !strings.Contains(files, "c.txt") {
		t.Errorf("main holds %q, want b.txt and c.txt without a.txt", files)
	}
	if r := e.Sandbox("fleet", "land", "--continue"); r.Code == 0 {
		t.Errorf("--continue with nothing stopped: %s", r)
	}
}

// The runner is its own process: killed, it leaves the fleet as it was
// (fleet wait says so), fleet resume starts a new one, and fleet stop
// cancels the queued tasks and stops the running agent, keeping its work.
func TestFleetRunnerKilledResumedAndStopped(t *testing.T) {
	e := NewEnv(t)
	e.fleetConfig()
	tasks := e.writeTasks("slow.toml", `max_parallel = 1

[[task]]
branch = "s1"
command = ["sh", "-c", "echo kept > kept.txt; sleep 300"]

[[task]]
branch = "s2"
command = ["true"]

[[task]]
branch = "s3"
command = ["true"]
`)
	e.MustSandbox("fleet", "start", tasks)
	Eventually(t, time.Minute, "s1 to run", func() bool { return e.runningAgents(t) == 1 })
	state := filepath.Join(e.State, e.RepoID(), ".fleet", "slow", "fleet.json")
	var st struct {
		RunnerPID int `json:"runner_pid"`
	}
	must(t, json.Unmarshal([]byte(readFile(state)), &st))
	if st.RunnerPID <= 0 {
		t.Fatalf("no runner pid in %s", state)
	}
	// The runner leads a session of its own: the terminal that started
	// the fleet closing (SIGHUP to its session) does not reach it.
	if sid := sessionOf(t, st.RunnerPID); sid != st.RunnerPID {
		t.Errorf("the runner %d is in session %d, want a session of its own", st.RunnerPID, sid)
	}
	must(t, syscall.Kill(st.RunnerPID, syscall.SIGKILL))
	Eventually(t, 10*time.Second, "the runner to be gone", func() bool { return !e.fleetPs(t)[0].Runner })
	r := e.Sandbox("fleet", "wait", "slow", "--timeout", "30s")
	if r.Code == 0 || !strings.Contains(r.Stderr, "ended with tasks still queued") || !strings.Contains(r.Stderr, "git sandbox fleet resume slow") {
		t.Errorf("fleet wait after the runner was killed: %s", r)
	}
	e.MustSandbox("fleet", "resume")
	if rep := e.fleetPs(t)[0]; !rep.Runner {
		t.Errorf("no runner after fleet resume: %+v", rep)
	}
	if r := e.Sandbox("fleet", "wait", "--timeout", "2s"); r.Code != 124 {
		t.Errorf("fleet wait --timeout with s1 running: want exit 124, got %s", r)
	}
	r = e.MustSandbox("fleet", "stop")
	if !strings.Contains(r.Stderr, "stopped s1") {
		t.Errorf("fleet stop does not name s1:\n%s", r.Stderr)
	}
	Eventually(t, 30*time.Second, "the runner to end", func() bool { return !e.fleetPs(t)[0].Runner })
	states := map[string]string{}
	for _, task := range e.fleetPs(t)[0].Tasks {
		states[task.Branch] = task.Status
	}
	if states["s1"] != "stopped" || states["s2"] != "cancelled" || states["s3"] != "cancelled" {
		t.Errorf("after fleet stop: %v", states)
	}
	if e.runningAgents(t) != 0 {
		t.Error("an agent still runs after fleet stop")
	}
	if got := readFile(filepath.Join(e.Worktree("s1"), "kept.txt")); got != "kept\n" {
		t.Errorf("s1's work: %q", got)
	}
	if r := e.Sandbox("fleet", "rm"); r.Code != 4 || !strings.Contains(r.Stderr, "the fleet is kept") {
		t.Errorf("fleet rm of unlanded work without -f: %s", r)
	}
	e.MustSandbox("fleet", "rm", "-f")
	if ps := e.Ps(); len(ps) != 0 {
		t.Errorf("sandboxes left: %+v", ps)
	}
}

// The queue stops at a conflict too (exit 3), in the order given, leaving
// the conflicting sandbox as it was.
func TestFleetLandStopsAtAConflict(t *testing.T) {
	e := NewEnv(t)
	e.fleetConfig()
	tasks := e.writeTasks("pair.toml", `[[task]]
branch = "c1"
command = ["sh", "-c", "echo one > README.md"]

[[task]]
branch = "c2"
command = ["sh", "-c", "echo two > README.md"]
`)
	r := e.MustSandbox("fleet", "start", tasks)
	if !strings.Contains(r.Stderr, "from free memory and the memory limit") {
		t.Errorf("the default max_parallel is not explained:\n%s", r.Stderr)
	}
	e.MustSandbox("fleet", "wait", "--timeout", "4m")
	r = e.Sandbox("fleet", "land", "c2", "c1")
	if r.Code != 3 || !strings.Contains(r.Stderr, "landed c2 as") || !strings.Contains(r.Stderr, "stopped at c1; not landed: c1") || !strings.Contains(r.Stderr, "conflicts with the base branch in 1 path(s): README.md") {
		t.Fatalf("fleet land c2 c1: want c2 landed and a conflict at c1 (exit 3), got %s", r)
	}
	if got := e.Git("show", "main:README.md"); got != "two" {
		t.Errorf("main:README.md = %q", got)
	}
	if got := readFile(filepath.Join(e.Worktree("c1"), "README.md")); got != "one\n" {
		t.Errorf("c1 was touched: %q", got)
	}
}

// sessionOf reads a process's session id from /proc/PID/stat (the sixth
// field; the second, the command name, may hold spaces but ends at ')').
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	stat := readFile(fmt.Sprintf("/proc/%d/stat", pid))
	fields := strings.Fields(stat[strings.LastIndex(stat, ")")+1:])
	if len(fields) < 4 {
		t.Fatalf("/proc/%d/stat = %q", pid, stat)
	}
	sid, err := strconv.Atoi(fields[3])
	must(t, err)
	return sid
}
