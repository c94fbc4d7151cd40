package fleet

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestSandboxesCheckTheRepository(t *testing.T) {
	fe := newFleetEnv(t)
	fe.git("branch", "a/b")
	fe.git("branch", "c")
	fe.start("box")
	sb := fe.fl.SB
	for name, want := range map[string]bool{"a/b": true, "a": true, "c": true, "c/d": true, "a/b/c": true, "free": false, "ab": false} {
		got, err := sb.BranchExists(name)
		if err != nil || got != want {
			t.Errorf("BranchExists(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if err := sb.ValidBranch("fix-1"); err != nil {
		t.Errorf("ValidBranch(fix-1) = %v", err)
	}
	if err := sb.ValidBranch("a..b"); err == nil {
		t.Error("ValidBranch(a..b) accepted")
	}
	if !sb.SandboxExists("box") || sb.SandboxExists("c") {
		t.Error("SandboxExists does not tell a sandbox from a branch")
	}
	for ref, want := range map[string]bool{"main": true, "c": true, "main~0": true, "nope": false, "-main": false} {
		if got := sb.BaseExists(ref); got != want {
			t.Errorf("BaseExists(%q) = %v, want %v", ref, got, want)
		}
	}
	if sb.Agent("shell") != nil || sb.Agent("robot") == nil {
		t.Error("Agent does not know its agents")
	}
	if sb.Allow("api.example.com") != nil || sb.Allow("a b") == nil {
		t.Error("Allow does not check entries as --allow does")
	}
}

func TestResolveFillsBaseAndAgent(t *testing.T) {
	fe := newFleetEnv(t)
	fe.fake.AddImage(config.DefaultImage(), "claude")
	f := &File{Tasks: []Task{
		{Branch: "x", Agent: "claude", Prompt: "p", Line: 2},
		{Branch: "y", Agent: "claude", Prompt: "p", Base: "elsewhere", Line: 6},
	}}
	if err := fe.fl.SB.Resolve(context.Background(), "t.toml", f); err != nil {
		t.Fatal(err)
	}
	if f.Tasks[0].Base != "main" || f.Tasks[1].Base != "elsewhere" {
		t.Errorf("bases %q, %q; want main (the current branch) and the one given", f.Tasks[0].Base, f.Tasks[1].Base)
	}
	// No agent named: the config's now; the config's shell cannot take a
	// prompt, which is said with the task's line.
	f = &File{Tasks: []Task{{Branch: "z", Prompt: "p", Line: 9}}}
	err := fe.fl.SB.Resolve(context.Background(), "t.toml", f)
	if f.Tasks[0].Agent != "shell" || err == nil || !strings.Contains(err.Error(), "t.toml:9: [[task]] 1: your config's agent is shell") {
		t.Errorf("agent %q, err %v", f.Tasks[0].Agent, err)
	}
	fe.git("checkout", "-q", "--detach")
	f = &File{Tasks: []Task{{Branch: "w", Agent: "claude", Prompt: "p"}}}
	if err := fe.fl.SB.Resolve(context.Background(), "t.toml", f); err == nil || !strings.Contains(err.Error(), "HEAD is detached") {
		t.Errorf("Resolve on a detached HEAD = %v", err)
	}
}

// TestResolveChecksTheImageHasEachAgentsCLI: a task whose agent's CLI the
// image lacks is named with its line before anything starts, each agent
// asked once; an image not on the engine yet (built by the first start) is
// left to the start.
func TestResolveChecksTheImageHasEachAgentsCLI(t *testing.T) {
	fe := newFleetEnv(t)
	fe.fake.AddImage(config.DefaultImage(), "claude")
	f := &File{Tasks: []Task{
		{Branch: "a", Agent: "claude", Prompt: "p", Line: 2},
		{Branch: "b", Agent: "codex", Prompt: "p", Line: 6},
		{Branch: "c", Agent: "shell", Command: []string{"true"}, Line: 10},
		{Branch: "d", Agent: "codex", Prompt: "p", Line: 14},
	}}
	err := fe.fl.SB.Resolve(context.Background(), "t.toml", f)
	probs, ok := err.(*Problems)
	if !ok || len(probs.List) != 2 || probs.List[0].Line != 6 || probs.List[1].Line != 14 ||
		!strings.Contains(probs.List[0].Msg, "[[task]] 2: image "+config.DefaultImage()+" has no codex CLI (agent CLIs it has: claude) (rebuild it") {
		t.Fatalf("Resolve = %v", err)
	}
	if n := fe.fake.Count("ImageAgents"); n > 4 {
		t.Errorf("the image was asked %d times for two agents", n)
	}
	// An image the engine does not have yet: the first start builds it.
	if err := fe.fake.Images().Remove(context.Background(), config.DefaultImage()); err != nil {
		t.Fatal(err)
	}
	if err := fe.fl.SB.Resolve(context.Background(), "t.toml", f); err != nil {
		t.Errorf("Resolve with the image not built yet = %v", err)
	}
}

func TestLoadChecksAgainstTheRepository(t *testing.T) {
	fe := newFleetEnv(t)
	fe.git("branch", "taken")
	path := fe.repo + "/tasks.toml"
	if err := os.WriteFile(path, []byte("[[task]]\nbranch = \"new\"\ncommand = [\"true\"]\n\n[[task]]\nbranch = \"taken\"\ncommand = [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, fe.fl.SB)
	if err == nil || !strings.Contains(err.Error(), "branch taken, or one git cannot hold beside it, exists already") {
		t.Errorf("Load = %v", err)
	}
	if err := os.WriteFile(path, []byte("[[task]]\nbranch = \"new\"\ncommand = [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path, fe.fl.SB)
	if err != nil || len(f.Tasks) != 1 || f.Tasks[0].Agent != "shell" {
		t.Errorf("Load = %+v, %v", f, err)
	}
	if _, err := Load(path+".missing", fe.fl.SB); err == nil || !strings.Contains(err.Error(), "read the tasks file") {
		t.Errorf("Load of a missing file = %v", err)
	}
}

// TestReportStopLandOrderRemove follows a fleet whose runner has gone:
// the report takes the sandboxes' states, stop cancels what is queued and
// stops what runs, and rm removes the sandboxes and then the fleet.
func TestReportStopLandOrderRemove(t *testing.T) {
	fe := newFleetEnv(t)
	ctx := context.Background()
	fe.start("t1")
	fe.start("gone")
	fe.create("f", task("t1", Running), task("gone", Exited), task("t3", Starting), task("t4", Queued))
	if _, err := fe.env.Find("gone"); err != nil {
		t.Fatal(err)
	}
	sb, _ := fe.env.Find("gone")
	if _, err := sb.Remove(ctx, sandbox.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}

	rep, err := fe.fl.Report(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, r := range rep.Tasks {
		statuses[r.Branch] = r.Status
	}
	want := map[string]string{"t1": sandbox.StateRunning, "gone": Removed, "t3": Starting, "t4": Queued}
	if !maps(statuses, want) || rep.Runner || rep.Name != "f" || rep.MaxParallel != 2 {
		t.Errorf("report %+v: statuses %v, want %v", rep, statuses, want)
	}
	if order, err := fe.fl.LandOrder("f"); err != nil || !slices.Equal(order, []string{"t1"}) {
		t.Errorf("LandOrder = %v, %v; want [t1]", order, err)
	}

	stopped, err := fe.fl.Stop(ctx, "f", time.Second)
	if err != nil || !slices.Equal(stopped, []string{"t1"}) {
		t.Fatalf("Stop = %v, %v; want [t1]", stopped, err)
	}
	st, _ := fe.store.Load("f")
	if !st.Stopping || st.Tasks[3].Status != Cancelled {
		t.Errorf("after stop: stopping %v, t4 %s", st.Stopping, st.Tasks[3].Status)
	}
	if sb, _ := fe.env.Find("t1"); func() bool { r, _ := sb.Running(ctx); return r }() {
		t.Error("t1's agent still runs")
	}

	removed, err := fe.fl.Remove(ctx, "f", false)
	if err != nil || !slices.Equal(removed, []string{"t1"}) {
		t.Fatalf("Remove = %v, %v; want [t1]", removed, err)
	}
	if fe.fl.SB.SandboxExists("t1") {
		t.Error("t1's sandbox is left")
	}
	if names, _ := fe.store.Names(); len(names) != 0 {
		t.Errorf("fleets left: %v", names)
	}
	if _, err := fe.fl.LandOrder("f"); !errors.Is(err, ErrNoFleet) {
		t.Errorf("LandOrder of a removed fleet = %v", err)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRemoveKeepsTheFleetWhileWorkIsUnlanded: a sandbox with work that was
// not landed is refused without -f, and the fleet stays.
func TestRemoveKeepsTheFleetWhileWorkIsUnlanded(t *testing.T) {
	fe := newFleetEnv(t)
	ctx := context.Background()
	fe.start("w1")
	fe.create("f", task("w1", Running))
	if err := os.WriteFile(fe.env.Layout.Worktree("w1")+"/new.txt", []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fe.fl.Remove(ctx, "f", false); usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "w1") {
		t.Fatalf("Remove with unlanded work = %v", err)
	}
	if names, _ := fe.store.Names(); !slices.Equal(names, []string{"f"}) || !fe.fl.SB.SandboxExists("w1") {
		t.Errorf("after a refusal: fleets %v, sandbox kept %v", names, fe.fl.SB.SandboxExists("w1"))
	}
	if _, err := fe.fl.Remove(ctx, "f", true); err != nil {
		t.Fatalf("Remove -f = %v", err)
	}
	if fe.fl.SB.SandboxExists("w1") {
		t.Error("Remove -f left the sandbox")
	}
}

func TestRemoveRefusesARunningFleet(t *testing.T) {
	fe := newFleetEnv(t)
	fe.create("f", task("q1", Queued))
	unlock, err := fe.store.LockRunner("f")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := fe.fl.Remove(context.Background(), "f", false); usererr.Code(err) != usererr.ExitRefused {
		t.Errorf("Remove of a fleet whose runner runs = %v", err)
	}
	if err := fe.fl.Resume("f"); err == nil || !strings.Contains(err.Error(), "is running") {
		t.Errorf("Resume of a fleet whose runner runs = %v", err)
	}
}

// TestResume: a task the dead runner was starting counts as running when
// its sandbox was made, and is queued again when not.
func TestResume(t *testing.T) {
	fe := newFleetEnv(t)
	fe.start("made")
	fe.create("f", task("made", Starting), task("lost", Starting), task("next", Queued), task("done", Exited))
	if _, err := fe.store.Update("f", func(st *State) error { st.RunnerPID = 4242; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := fe.fl.Resume("f"); err != nil {
		t.Fatal(err)
	}
	st, _ := fe.store.Load("f")
	got := []string{st.Tasks[0].Status, st.Tasks[1].Status, st.Tasks[2].Status, st.Tasks[3].Status}
	if !slices.Equal(got, []string{Running, Queued, Queued, Exited}) || st.RunnerPID != 0 {
		t.Errorf("after resume: %v, runner pid %d", got, st.RunnerPID)
	}
	// After fleet stop: the cancelled tasks are queued again, the fleet
	// no longer stopping.
	fe.create("stopped", task("s1", Exited), task("s2", Cancelled), task("s3", Cancelled))
	if _, err := fe.store.Update("stopped", func(st *State) error { st.Stopping = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := fe.fl.Resume("stopped"); err != nil {
		t.Fatal(err)
	}
	st, _ = fe.store.Load("stopped")
	if got := []string{st.Tasks[0].Status, st.Tasks[1].Status, st.Tasks[2].Status}; !slices.Equal(got, []string{Exited, Queued, Queued}) || st.Stopping {
		t.Errorf("resume after stop: %v, stopping %v", got, st.Stopping)
	}
	fe.create("finished", task("x", Exited))
	if err := fe.fl.Resume("finished"); err == nil || !strings.Contains(err.Error(), "nothing to resume") {
		t.Errorf("Resume with nothing queued = %v", err)
	}
}

func TestWait(t *testing.T) {
	fe := newFleetEnv(t)
	ctx := context.Background()
	fe.start("r1")
	fe.create("done", task("x", Exited), task("y", Cancelled))
	fe.create("dead", task("q", Queued))
	fe.create("busy", task("r1", Running))

	if rep, err := fe.fl.Wait(ctx, "done", 0); err != nil || len(rep.Tasks) != 2 {
		t.Errorf("Wait of a finished fleet = %+v, %v", rep, err)
	}
	if _, err := fe.fl.Wait(ctx, "dead", 0); err == nil || !strings.Contains(err.Error(), "ended with tasks still queued") {
		t.Errorf("Wait of a fleet whose runner died = %v", err)
	}
	if _, err := fe.fl.Wait(ctx, "busy", time.Millisecond); usererr.Code(err) != usererr.ExitTimeout {
		t.Errorf("Wait past its timeout = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fe.fl.Wait(cctx, "busy", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended context = %v", err)
	}
	if _, err := fe.fl.Wait(ctx, "none", 0); !errors.Is(err, ErrNoFleet) {
		t.Errorf("Wait of no fleet = %v", err)
	}
}

// TestSpawnRunnerReturnsOnceTheRunnerIsInCharge runs this test binary as
// the runner (TestMain stands in for it).
func TestSpawnRunnerReturnsOnceTheRunnerIsInCharge(t *testing.T) {
	fe := newFleetEnv(t)
	fe.create("f", task("q", Queued))
	if err := SpawnRunner(fe.env, fe.store, "f"); err != nil {
		t.Fatal(err)
	}
	st, _ := fe.store.Load("f")
	if st.RunnerPID == 0 || st.RunnerPID == os.Getpid() {
		t.Errorf("runner pid %d", st.RunnerPID)
	}
	if b, _ := os.ReadFile(fe.store.Log("f")); !strings.Contains(string(b), "stand-in runner in charge of f") {
		t.Errorf("runner log %q", b)
	}
	if err := SpawnRunner(fe.env, fe.store, "none"); err == nil {
		t.Error("SpawnRunner of no fleet gave no error")
	}
}

func TestPerTaskMemory(t *testing.T) {
	tests := []struct {
		def   string
		tasks []string
		want  int64
	}{
		{"1g", []string{"", ""}, 1 << 30},
		{"1g", []string{"", "2g"}, 2 << 30},
		{"1g", []string{"512m"}, 512 << 20},
		{"", []string{"1g", ""}, 0}, // a task without a limit
		{"0", []string{"1g"}, 1 << 30},
	}
	for _, tt := range tests {
		cfg := &config.Loaded{Config: config.Defaults()}
		cfg.Limits.Memory = tt.def
		f := &File{}
		for _, m := range tt.tasks {
			var tk Task
			tk.Limits.Memory = m
			f.Tasks = append(f.Tasks, tk)
		}
		if got := PerTaskMemory(f, cfg); got != tt.want {
			t.Errorf("default %q, tasks %q: %d, want %d", tt.def, tt.tasks, got, tt.want)
		}
	}
	if MemAvailable() <= 0 {
		t.Error("MemAvailable found no memory in /proc/meminfo")
	}
}
