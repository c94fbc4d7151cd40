package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// indexHas reports whether the sandbox's snapshot index lists path.
func (te *testEnv) indexHas(branch, path string) bool {
	te.t.Helper()
	l := te.env.Layout
	cmd := exec.Command("git", "ls-files", "--", path)
	cmd.Env = append(os.Environ(), "GIT_DIR="+l.ScratchGitDir(branch), "GIT_INDEX_FILE="+l.RescueIndex(branch))
	out, err := cmd.CombinedOutput()
	if err != nil {
		te.t.Fatalf("ls-files: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out)) == path
}

func TestSnapshotPausesTheAgentDuringAdd(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "new.txt", "x\n")
	var events []string
	te.fake.OnCall = func(c enginefake.Call) {
		switch c.Method {
		case "Pause":
			if te.indexHas("t1", "new.txt") {
				t.Error("the worktree was read before the agent was paused")
			}
			events = append(events, "pause")
		case "Unpause":
			if !te.indexHas("t1", "new.txt") {
				t.Error("the agent was thawed before git add finished")
			}
			if st, _ := te.fake.Get(sb.Container); st.Status != enginefake.StatusPaused {
				t.Errorf("container %s while the worktree was read", st.Status)
			}
			events = append(events, "unpause")
		}
	}
	taken, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(events, ",") != "pause,unpause" {
		t.Errorf("events = %v", events)
	}
	if !taken.New || taken.Changes != 1 {
		t.Errorf("taken = %+v", taken.Snapshot)
	}
	if st, _ := te.fake.Get(sb.Container); st.Status != enginefake.StatusRunning {
		t.Errorf("container %s after the snapshot", st.Status)
	}
}

func TestSnapshotThawsOnCancel(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "new.txt", "x\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ctrl-C arrives while the agent is paused: git add is cut short.
	te.fake.OnCall = func(c enginefake.Call) {
		if c.Method == "Pause" {
			cancel()
		}
	}
	if _, err := sb.Snapshotter().Take(ctx, rescue.ReasonManual); err == nil {
		t.Fatal("a cancelled snapshot succeeded")
	}
	if st, _ := te.fake.Get(sb.Container); st.Status != enginefake.StatusRunning {
		t.Errorf("container %s after a cancelled snapshot, want thawed", st.Status)
	}
	if te.fake.Count("Unpause") != 1 {
		t.Errorf("calls = %v", te.fake.Methods())
	}
}

func TestSnapshotThawsAfterAFailedAdd(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	// A corrupt snapshot index makes git add fail while the agent is paused.
	te.fake.OnCall = func(c enginefake.Call) {
		if c.Method == "Pause" {
			if err := os.WriteFile(te.env.Layout.RescueIndex("t1"), []byte("garbage"), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual); err == nil {
		t.Fatal("snapshot with a corrupt index succeeded")
	}
	if st, _ := te.fake.Get(sb.Container); st.Status != enginefake.StatusRunning {
		t.Errorf("container %s after a failed snapshot, want thawed", st.Status)
	}
}

func TestSnapshotThawsALeftOverPause(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	// A snapshotter died while the agent was paused.
	te.fake.SetStatus(sb.Container, enginefake.StatusPaused, 0)
	if _, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual); err != nil {
		t.Fatal(err)
	}
	if st, _ := te.fake.Get(sb.Container); st.Status != enginefake.StatusRunning {
		t.Errorf("container %s, want the left-over pause thawed", st.Status)
	}
}

func TestSnapshotDoesNotPauseAStoppedAgent(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.fake.Exit(sb.Container, 0)
	te.writeIn(sb.Worktree, "new.txt", "x\n")
	taken, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual)
	if err != nil || !taken.New {
		t.Fatalf("snapshot = %+v, %v", taken, err)
	}
	if st, _ := te.fake.Get(sb.Container); st.Status != enginefake.StatusExited {
		t.Errorf("container %s, want it left exited", st.Status)
	}
	if te.fake.Count("Unpause") != 0 {
		t.Errorf("calls = %v", te.fake.Methods())
	}
	// Nor one whose container is gone.
	_ = te.fake.Remove(context.Background(), sb.Container)
	te.writeIn(sb.Worktree, "more.txt", "y\n")
	if taken, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual); err != nil || !taken.New {
		t.Errorf("snapshot without a container = %+v, %v", taken, err)
	}
}

func TestSnapshotFailsWhenThePauseFails(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	before := te.git("rev-parse", sb.Refs().Rescue())
	te.writeIn(sb.Worktree, "new.txt", "x\n")
	te.fake.Fail("Pause", errors.New("freezer broken"))
	_, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual)
	if err == nil || !strings.Contains(err.Error(), "cannot pause the agent") {
		t.Fatalf("snapshot with a failing pause: %v", err)
	}
	if after := te.git("rev-parse", sb.Refs().Rescue()); after != before {
		t.Error("a snapshot was written without the agent paused")
	}
	if te.indexHas("t1", "new.txt") {
		t.Error("the worktree was read without the agent paused")
	}
}
