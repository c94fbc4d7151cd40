package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// paced stands for the supervisor's clock: each wait the supervisor asks
// for is handed to the test, which lets it end (tick) when it is ready.
type paced struct {
	waits chan time.Duration
	fire  chan time.Time
}

func pace(te *testEnv) *paced {
	p := &paced{waits: make(chan time.Duration), fire: make(chan time.Time)}
	te.env.Clock = clockFunc(func(d time.Duration) <-chan time.Time {
		p.waits <- d
		return p.fire
	})
	return p
}

// wait returns the next wait the supervisor asked for.
func (p *paced) wait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-p.waits:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor asked for no wait")
		return 0
	}
}

// tick ends the wait the supervisor is in.
func (p *paced) tick(t *testing.T) {
	t.Helper()
	select {
	case p.fire <- time.Now():
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor is not waiting")
	}
}

// A supervisor whose interval snapshots fail waits twice as long after
// each failure, up to rescue.FailedSnapshotWait, and goes back to the interval
// once one is taken; when the snapshot lock is held by a command it gives
// way at once (no pause of the agent, no wait for the lock), and the exit
// snapshot is still taken, waiting for the lock as long as it must.
func TestSuperviseBacksOffAndGivesWay(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, "work.txt", "1\n")
	p := pace(te)
	interval := 10 * time.Second
	done := make(chan error, 1)
	go func() { done <- te.env.Supervise(context.Background(), "t1", interval) }()

	if d := p.wait(t); d != interval {
		t.Fatalf("first wait %s, want the interval %s", d, interval)
	}
	te.fake.Fail("Pause", errors.New("engine gone"))
	var backoff []time.Duration
	for range 4 {
		p.tick(t)
		backoff = append(backoff, p.wait(t))
	}
	want := []time.Duration{20 * time.Second, 40 * time.Second, rescue.FailedSnapshotWait, rescue.FailedSnapshotWait}
	if !slices.Equal(backoff, want) {
		t.Errorf("waits after failed snapshots %v, want %v", backoff, want)
	}

	// The engine answers again: a snapshot, and the interval again.
	te.fake.Fail("Pause", nil)
	p.tick(t)
	if d := p.wait(t); d != interval {
		t.Errorf("wait after a snapshot %s, want the interval %s", d, interval)
	}
	snaps, _ := rescue.List(context.Background(), te.env.Git(), "t1")
	if len(snaps) == 0 || snaps[0].Reason != rescue.ReasonInterval {
		t.Fatalf("no interval snapshot once the engine answered: %+v", snaps)
	}
	pauses := te.fake.Count("Pause")

	// A command holds the snapshot lock: the supervisor neither waits for
	// it nor pauses the agent, and tries again soon.
	unlock, err := record.Lock(te.env.Layout.Lock("t1"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p.tick(t)
		if d := p.wait(t); d != rescue.BusySnapshotWait {
			t.Errorf("wait after giving way %s, want %s", d, rescue.BusySnapshotWait)
		}
	}
	if n := te.fake.Count("Pause"); n != pauses {
		t.Errorf("the agent was paused %d times while a command held the lock", n-pauses)
	}

	// The agent exits while the lock is still held: the exit snapshot
	// waits for it.
	te.writeIn(sb.Worktree, "work.txt", "2\n")
	te.fake.Exit(sb.Container, 0)
	select {
	case err := <-done:
		t.Fatalf("the supervisor ended while the lock was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor did not end after the agent exited")
	}
	snaps, _ = rescue.List(context.Background(), te.env.Git(), "t1")
	if len(snaps) == 0 || snaps[0].Reason != rescue.ReasonExit {
		t.Fatalf("no exit snapshot: %+v", snaps)
	}
	if got := te.git("show", snaps[0].ID+":work.txt"); got != "2" {
		t.Errorf("exit snapshot work.txt = %q, want 2", got)
	}
	if !strings.Contains(te.err.String(), "snapshot failed (1 in a row; next try in 20s)") {
		t.Errorf("the supervisor does not say when it tries again:\n%s", te.err.String())
	}
}

// The supervisor's exit snapshot, when it comes late, records the exit
// over a snapshot taken while the agent ran, but not over one a command
// wrote since (here an update's): that would stamp the exit after it.
func TestSupervisedExitStampsOnlyWhatTheAgentLeft(t *testing.T) {
	for _, tc := range []struct {
		tip  rescue.Reason
		want rescue.Reason
	}{
		{rescue.ReasonInterval, rescue.ReasonExit},
		{rescue.ReasonUpdate, rescue.ReasonUpdate},
	} {
		t.Run(string(tc.tip), func(t *testing.T) {
			te := newTestEnv(t)
			sb := te.start("t1")
			te.writeIn(sb.Worktree, "work.txt", "1\n")
			if _, err := sb.Snapshotter().Take(context.Background(), tc.tip); err != nil {
				t.Fatal(err)
			}
			te.fake.Exit(sb.Container, 0)
			if err := te.env.Supervise(context.Background(), "t1", time.Minute); err != nil {
				t.Fatal(err)
			}
			snaps, _ := rescue.List(context.Background(), te.env.Git(), "t1")
			if len(snaps) == 0 || snaps[0].Reason != tc.want {
				t.Fatalf("newest snapshot after the supervisor: %+v, want reason %s", snaps, tc.want)
			}
		})
	}
}
