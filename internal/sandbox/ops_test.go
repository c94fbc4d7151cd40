package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// agentCommit makes a commit in the agent's private repository, as the
// agent's git inside the container would.
func (te *testEnv) agentCommit(sb *Sandbox, file, content, msg string) string {
	te.t.Helper()
	te.writeIn(sb.Worktree, file, content)
	gd := "--git-dir=" + sb.PrivateGitDir
	wt := "--work-tree=" + sb.Worktree
	te.gitIn(sb.Worktree, gd, wt, "add", "-A")
	te.gitIn(sb.Worktree, gd, wt, "commit", "-q", "-m", msg)
	return te.gitIn(sb.Worktree, gd, "rev-parse", "HEAD")
}

// lockHeld reports whether someone holds the sandbox's snapshot lock.
func (te *testEnv) lockHeld(branch string) bool {
	te.t.Helper()
	f, err := os.OpenFile(te.env.Layout.Lock(branch), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		te.t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func TestStopStopsBeforeTheSnapshot(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	// What the agent writes while it is being stopped must be in the
	// snapshot stop takes: so the snapshot comes after the stop.
	te.fake.OnCall = func(c enginefake.Call) {
		if c.Method == "Stop" {
			te.writeIn(sb.Worktree, "last-words.txt", "bye\n")
		}
	}
	taken, err := sb.Stop(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	te.fake.OnCall = nil
	if taken.Reason != rescue.ReasonStop || taken.Changes != 1 {
		t.Errorf("stop snapshot = %+v, want the agent's last file", taken.Snapshot)
	}
	if c, _ := te.fake.Get(sb.Container); c.Status != enginefake.StatusExited {
		t.Errorf("container %s after stop", c.Status)
	}
	if !te.find("t1").Stopped {
		t.Error("stopped flag not recorded")
	}
	methods := te.fake.Methods()
	stop := slices.Index(methods, "Stop")
	if stop < 0 || slices.Index(methods[stop:], "Pause") < 0 {
		t.Errorf("calls %v: want Stop, then the snapshot's Pause attempt", methods)
	}
	// The container does not run: the snapshot did not pause or thaw it.
	if te.fake.Count("Unpause") != 0 {
		t.Errorf("a stopped container was thawed: %v", methods)
	}
	// ps says stopped, not exited.
	st, _ := te.env.Statuses(context.Background())
	if len(st) != 1 || st[0].State != StateStopped || st[0].Changes != 1 {
		t.Errorf("statuses = %+v", st)
	}
	// Stopping again is harmless.
	if _, err := te.find("t1").Stop(context.Background(), time.Second); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

func TestRemoveRefusesUnlandedWork(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "work.txt", "precious\n")
	// Running: refused without --force.
	if _, err := sb.Remove(context.Background(), RemoveOptions{}); usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("rm of a running sandbox: %v", err)
	}
	te.fake.Exit(sb.Container, 0)
	_, err := te.find("t1").Remove(context.Background(), RemoveOptions{})
	if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "1 changed files") {
		t.Fatalf("rm with unlanded work: %v", err)
	}
	// Nothing was removed.
	if _, err := os.Stat(sb.Worktree + "/work.txt"); err != nil {
		t.Errorf("worktree touched: %v", err)
	}
	if _, ok := te.fake.Get(sb.Container); !ok {
		t.Error("container removed")
	}
	if !te.refExists("refs/heads/t1") {
		t.Error("branch removed")
	}
}

func TestRemoveSyncsThenTearsDown(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	// A verify container of the same sandbox, left over.
	verifySpec := &container.Spec{
		Name: sb.Container + "-verify", Image: sb.Image, User: "1:1", Network: container.NetworkNone,
		Labels: map[string]string{container.LabelManaged: "1", container.LabelRepo: sb.RepoID, container.LabelBranch: "t1", container.LabelRole: container.RoleVerify},
		Limits: container.Limits{Pids: 10},
	}
	verifySpec.Harden()
	if _, err := te.fake.Create(context.Background(), verifySpec); err != nil {
		t.Fatal(err)
	}
	// Another sandbox's container stays.
	other := te.start("t2")
	head := te.agentCommit(sb, "agent.txt", "committed\n", "agent work")

	last, err := sb.Remove(context.Background(), RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	// Synced before the last snapshot: the agent's commit is its second parent.
	parents := strings.Fields(te.git("rev-list", "--parents", "-n1", last.ID))
	if len(parents) != 3 || parents[2] != head {
		t.Errorf("last snapshot's parents %v, want the agent's head %s second", parents[1:], head)
	}
	if last.Reason != rescue.ReasonRemove || last.Changes != 1 {
		t.Errorf("last snapshot = %+v", last.Snapshot)
	}
	// Stopped (it was running) before it was snapshotted and removed.
	methods := te.fake.Methods()
	if i, j := slices.Index(methods, "Stop"), slices.Index(methods, "Remove"); i < 0 || j < i {
		t.Errorf("calls %v: want Stop before Remove", methods)
	}
	te.assertNothingLeft("t1", true)
	refs := rescue.Refs{Branch: "t1"}
	if got := te.git("rev-parse", refs.Rescue()); got != last.ID {
		t.Errorf("rescue ref %s, want the last snapshot %s", got, last.ID)
	}
	if !te.refExists(refs.Baseline()) {
		t.Error("baseline ref removed")
	}
	if _, ok := te.fake.Get(other.Container); !ok {
		t.Error("another sandbox's container was removed")
	}
	// The rescued work is still there.
	if got := te.git("show", last.ID+":agent.txt"); got != "committed" {
		t.Errorf("agent.txt in the last snapshot = %q", got)
	}
}

func TestRemoveWithoutWorktreeStillCleansUp(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.fake.Exit(sb.Container, 0)
	if err := os.RemoveAll(sb.Worktree); err != nil {
		t.Fatal(err)
	}
	last, err := sb.Remove(context.Background(), RemoveOptions{})
	if err != nil || last != nil {
		t.Fatalf("rm = %v, %v", last, err)
	}
	te.assertNothingLeft("t1", true)
}

func TestStatuses(t *testing.T) {
	te := newTestEnv(t)
	running := te.start("running")
	paused := te.start("paused")
	exited := te.start("exited")
	missing := te.start("missing")
	te.fake.SetStatus(paused.Container, enginefake.StatusPaused, 0)
	te.fake.Exit(exited.Container, 5)
	_ = te.fake.Remove(context.Background(), missing.Container)
	te.writeIn(running.Worktree, "x", "1")
	if _, err := running.Snapshotter().Take(context.Background(), rescue.ReasonManual); err != nil {
		t.Fatal(err)
	}
	st, err := te.env.Statuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Status{}
	for _, s := range st {
		got[s.Branch] = s
	}
	if got["running"].State != StateRunning || got["running"].Changes != 1 {
		t.Errorf("running: %+v", got["running"])
	}
	if got["paused"].State != StatePaused {
		t.Errorf("paused: %+v", got["paused"])
	}
	if got["exited"].State != StateExited || got["exited"].ExitCode == nil || *got["exited"].ExitCode != 5 {
		t.Errorf("exited: %+v", got["exited"])
	}
	if got["missing"].State != StateMissing {
		t.Errorf("missing: %+v", got["missing"])
	}
	// One list call for all of them.
	if n := te.fake.Count("List"); n != 1 {
		t.Errorf("%d list calls", n)
	}
}

func TestWait(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	_, err := sb.Wait(context.Background(), 20*time.Millisecond)
	if usererr.Code(err) != usererr.ExitTimeout {
		t.Fatalf("wait with a timeout: %v", err)
	}
	done := make(chan int, 1)
	go func() {
		code, err := sb.Wait(context.Background(), 0)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	waitFor(t, "the waiter", func() bool { return te.fake.Count("WaitExit") >= 2 })
	te.writeIn(sb.Worktree, "last.txt", "last words\n")
	te.fake.Exit(sb.Container, 9)
	if code := <-done; code != 9 {
		t.Errorf("wait = %d, want 9", code)
	}
	// Wait returns after the exit snapshot: ps counts the last files.
	if _, err := te.gitErr("cat-file", "-e", sb.Refs().Rescue()+":last.txt"); err != nil {
		t.Errorf("wait returned before the exit snapshot: %v", err)
	}
	// An exited agent's code comes at once.
	if code, err := sb.Wait(context.Background(), 0); err != nil || code != 9 {
		t.Errorf("wait on an exited sandbox = %d, %v", code, err)
	}
	_ = te.fake.Remove(context.Background(), sb.Container)
	if _, err := sb.Wait(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "no container") {
		t.Errorf("wait without a container: %v", err)
	}
}

func TestLogsAttachExec(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.fake.Output = "hello from the agent\n"
	var out bytes.Buffer
	if err := sb.Logs(context.Background(), false, "all", &out, &out); err != nil || out.String() != te.fake.Output {
		t.Errorf("logs = %q, %v", out.String(), err)
	}

	// The exec starts under the snapshot lock (no snapshot can pause the
	// container while it starts) and runs without it.
	te.fake.OnCall = func(c enginefake.Call) {
		if c.Method == "Exec" && !te.lockHeld("t1") {
			t.Error("exec started without the snapshot lock")
		}
	}
	var execArgv []string
	te.fake.OnExec = func(c enginefake.Container, o container.ExecOptions) int {
		if te.lockHeld("t1") {
			t.Error("the snapshot lock is held while the exec runs")
		}
		execArgv = o.Argv
		if o.WorkDir != container.Workspace {
			t.Errorf("exec in %s", o.WorkDir)
		}
		return 7
	}
	code, err := sb.Exec(context.Background(), []string{"make", "test"}, IO{Stdout: &out, Stderr: &out})
	if err != nil || code != 7 || !slices.Equal(execArgv, []string{"make", "test"}) {
		t.Errorf("exec = %d, %v (argv %v)", code, err, execArgv)
	}
	if _, err := sb.Exec(context.Background(), nil, IO{Stdout: &out, Stderr: &out}); err == nil || !strings.Contains(err.Error(), "needs a terminal") {
		t.Errorf("shell without a terminal: %v", err)
	}

	out.Reset()
	attached := make(chan error, 1)
	go func() {
		detached, err := sb.Attach(context.Background(), IO{Stdout: &out, Stderr: &out})
		if detached {
			err = errors.New("detached without the keys")
		}
		attached <- err
	}()
	waitFor(t, "attach", func() bool { return te.fake.Count("Attach") >= 1 })
	te.fake.Exit(sb.Container, 0)
	if err := <-attached; err != nil || !strings.Contains(out.String(), "hello") {
		t.Errorf("attach = %q, %v", out.String(), err)
	}
	// Not running: attach and exec refuse.
	if _, err := sb.Attach(context.Background(), IO{Stdout: &out, Stderr: &out}); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("attach to a stopped sandbox: %v", err)
	}
}

// exec in a sandbox whose agent exited runs in a fresh container made from
// the recorded spec, under the sandbox's lock, removed afterwards, with a
// snapshot of what it wrote; the agent is not started.
func TestExecInAnExitedSandbox(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.fake.Exit(sb.Container, 0)
	sb = te.find("t1")
	var seen enginefake.Container
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		seen = c
		if !te.lockHeld("t1") {
			t.Error("the exec container runs without the sandbox's lock")
		}
		te.writeIn(sb.Worktree, "made.txt", "made\n")
		return 3, true
	}
	var out bytes.Buffer
	code, err := sb.Exec(context.Background(), []string{"make", "test"}, IO{Stdout: &out, Stderr: &out})
	if err != nil || code != 3 {
		t.Fatalf("exec = %d, %v", code, err)
	}
	if !slices.Equal(seen.Spec.Argv, []string{"make", "test"}) || seen.Name == sb.Container {
		t.Errorf("exec ran %q in %s", seen.Spec.Argv, seen.Name)
	}
	if seen.Spec.Labels[container.LabelRole] != container.RoleExec || seen.Spec.Image != sb.Spec.Image ||
		!slices.Equal(seen.Spec.CapDrop, sb.Spec.CapDrop) || seen.Spec.Limits != sb.Spec.ToSpec().Limits || len(seen.Spec.Mounts) != len(sb.Spec.Mounts) {
		t.Errorf("the exec container differs from the agent's: %+v", seen.Spec)
	}
	if _, ok := te.fake.Get(seen.ID); ok {
		t.Error("the exec container was left behind")
	}
	if c, _ := te.fake.Get(sb.Container); c.Starts != 1 {
		t.Errorf("the agent was started %d times, want once", c.Starts)
	}
	if !te.indexHas("t1", "made.txt") {
		t.Error("no snapshot after the command")
	}
}

func TestSuperviseSnapshotsUntilExitThenVerifies(t *testing.T) {
	te := newTestEnv(t)
	te.env.Config.Verify = "make check"
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "work.txt", "1\n")
	verified := make(chan struct{}, 1)
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		if c.Spec.Labels[container.LabelRole] == container.RoleVerify {
			verified <- struct{}{}
			return 0, true
		}
		return 0, false
	}
	done := make(chan error, 1)
	go func() { done <- te.env.Supervise(context.Background(), "t1", 10*time.Millisecond) }()
	waitFor(t, "an interval snapshot", func() bool {
		snaps, _ := rescue.List(context.Background(), te.env.Git(), "t1")
		return len(snaps) > 0 && snaps[0].Reason == rescue.ReasonInterval
	})
	te.fake.Exit(sb.Container, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-verified:
	default:
		t.Error("verify did not run after the agent exited")
	}
	// The exit snapshot (or the interval one of the same tree) is verified.
	snaps, _ := rescue.List(context.Background(), te.env.Git(), "t1")
	rec := te.find("t1")
	if v, ok := rec.Verdict(snaps[0].Tree); !ok || !v.OK {
		t.Errorf("verdict for the exit tree = %+v, %v", v, ok)
	}
	// The agent was paused for the interval snapshots and thawed after.
	if te.fake.Count("Pause") == 0 || te.fake.Count("Unpause") == 0 {
		t.Errorf("calls %v: want pauses and thaws", te.fake.Methods())
	}
	// A supervisor of a sandbox that is not running takes one snapshot and ends.
	if err := te.env.Supervise(context.Background(), "t1", time.Hour); err != nil {
		t.Errorf("supervise a stopped sandbox: %v", err)
	}
}

func TestSuperviseRecordsUsageForLand(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	// The adapter reads the end of the agent's output; claude's headless
	// JSON result carries tokens and cost.
	if err := sb.Update(func(r *record.Record) error { r.Agent = "claude"; return nil }); err != nil {
		t.Fatal(err)
	}
	te.fake.Output = "working\n" + `{"type":"result","total_cost_usd":0.25,"usage":{"input_tokens":100,"output_tokens":20}}` + "\n"
	done := make(chan error, 1)
	go func() { done <- te.env.Supervise(context.Background(), "t1", time.Hour) }()
	te.fake.Exit(sb.Container, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec := te.find("t1")
	want := agent.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.25}
	if got := rec.TotalUsage(); got != want {
		t.Fatalf("recorded usage %+v, want %+v", got, want)
	}
	list, err := te.env.Statuses(context.Background())
	if err != nil || len(list) != 1 || list[0].Usage == nil || *list[0].Usage != want {
		t.Errorf("ps usage: %+v %v", list, err)
	}
	res, err := land.Land(context.Background(), rec, land.Request{Message: "subject", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if msg := res.Plan.Message; !strings.Contains(msg, "\nSandbox-Usage: input_tokens=100 output_tokens=20 cost_usd=0.2500\n") {
		t.Errorf("land message has no usage trailer:\n%s", msg)
	}
	// A second supervisor of the same exit counts the run once.
	if err := te.env.Supervise(context.Background(), "t1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := te.find("t1").TotalUsage(); got != want {
		t.Errorf("usage after a second supervisor %+v, want %+v", got, want)
	}
}

func TestSuperviseNotifiesOncePerEvent(t *testing.T) {
	te := newTestEnv(t)
	log := filepath.Join(t.TempDir(), "notify.log")
	te.env.Config.Notify = `echo "$SANDBOX $EVENT $EXIT_CODE" >> ` + log
	te.env.Config.Verify = "make check"
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "work.txt", "1\n")
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		if c.Spec.Labels[container.LabelRole] == container.RoleVerify {
			return 2, true
		}
		return 0, false
	}
	done := make(chan error, 1)
	go func() { done <- te.env.Supervise(context.Background(), "t1", time.Hour) }()
	te.fake.Exit(sb.Container, 7)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A second supervisor finds the same exit.
	if err := te.env.Supervise(context.Background(), "t1", time.Hour); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "t1 exited 7\nt1 verify-failed 2\n"; got != want {
		t.Errorf("notify log %q, want %q", got, want)
	}
}

// An agent the engine ended for memory is said to be out of memory, with
// its limit; one killed otherwise, or exiting, is not.
func TestOutOfMemory(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("oom")
	ctx := context.Background()
	if got := sb.OutOfMemory(ctx, 137); got != "" {
		t.Errorf("a running agent: %q", got)
	}
	te.fake.OutOfMemory(sb.Container)
	if got := sb.OutOfMemory(ctx, 0); got != "" {
		t.Errorf("exit code 0: %q", got)
	}
	want := "out of memory (limit " + container.MemorySize(sb.Spec.Limits.MemoryBytes) + ")"
	if got := sb.OutOfMemory(ctx, 137); got != want || sb.Spec.Limits.MemoryBytes == 0 {
		t.Errorf("OutOfMemory = %q; want %q", got, want)
	}
}
