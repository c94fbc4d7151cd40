package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
)

const testRepo = "repo-0123456789ab"

// fakeFleet is a fleet whose tasks start as containers of the fake engine,
// labelled as sandbox start labels them.
type fakeFleet struct {
	t      *testing.T
	store  *Store
	fake   *enginefake.Engine
	mu     sync.Mutex
	most   int
	starts []string
	fail   map[string]bool
}

func newFakeFleet(t *testing.T, maxParallel int, branches ...string) *fakeFleet {
	ff := &fakeFleet{t: t, store: NewStore(t.TempDir()), fake: enginefake.New("img"), fail: map[string]bool{}}
	st := &State{Name: "f", MaxParallel: maxParallel}
	for _, b := range branches {
		st.Tasks = append(st.Tasks, TaskState{Task: Task{Branch: b, Agent: "shell"}, Status: Queued})
	}
	if err := ff.store.Create(st); err != nil {
		t.Fatal(err)
	}
	return ff
}

func (ff *fakeFleet) running() int {
	list, _ := ff.fake.List(context.Background(), container.LabelRepo+"="+testRepo, container.LabelRole+"="+container.RoleAgent)
	n := 0
	for _, c := range list {
		if c.Running {
			n++
		}
	}
	return n
}

func (ff *fakeFleet) start(ctx context.Context, t Task) error {
	ff.mu.Lock()
	ff.starts = append(ff.starts, t.Branch)
	fail := ff.fail[t.Branch]
	ff.mu.Unlock()
	if fail {
		return errors.New("image missing")
	}
	id, err := ff.fake.Create(ctx, &container.Spec{Name: "sb-" + t.Branch, Image: "img", Network: container.NetworkNone, User: "1000:1000",
		CapDrop: []string{"ALL"}, Security: []string{"no-new-privileges"}, Limits: container.Limits{Pids: 64}, Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: testRepo, container.LabelBranch: t.Branch, container.LabelRole: container.RoleAgent,
		}})
	if err != nil {
		return err
	}
	if err := ff.fake.Start(ctx, id); err != nil {
		return err
	}
	ff.mu.Lock()
	ff.most = max(ff.most, ff.running())
	ff.mu.Unlock()
	return nil
}

func (ff *fakeFleet) runner() *Runner {
	return &Runner{Store: ff.store, Name: "f", Engine: ff.fake, RepoID: testRepo, Start: ff.start, Poll: 20 * time.Millisecond}
}

func (ff *fakeFleet) waitRunning(n int) {
	ff.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ff.running() != n {
		if time.Now().After(deadline) {
			ff.t.Fatalf("timed out waiting for %d running agents (have %d)", n, ff.running())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (ff *fakeFleet) status() map[string]TaskState {
	st, err := ff.store.Load("f")
	if err != nil {
		ff.t.Fatal(err)
	}
	m := map[string]TaskState{}
	for _, t := range st.Tasks {
		m[t.Branch] = t
	}
	return m
}

func TestRunnerKeepsAtMostMaxParallelRunning(t *testing.T) {
	branches := []string{"t1", "t2", "t3", "t4", "t5", "t6"}
	ff := newFakeFleet(t, 2, branches...)
	ff.fail["t4"] = true
	done := make(chan error, 1)
	go func() { done <- ff.runner().Run(context.Background()) }()
	exited := map[string]bool{}
	for range 4 {
		ff.waitRunning(2)
		// Exit the oldest running agent; the runner starts the next.
		for _, b := range branches {
			if c, ok := ff.fake.Get("sb-" + b); ok && c.Status == enginefake.StatusRunning && !exited[b] {
				ff.fake.Exit("sb-"+b, len(exited))
				exited[b] = true
				break
			}
		}
	}
	// t4 failed to start: t5 and t6 are the last two.
	ff.waitRunning(1)
	for _, b := range []string{"t5", "t6"} {
		ff.fake.Exit("sb-"+b, 0)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not end after every task ended")
	}
	if ff.most > 2 {
		t.Errorf("%d agents ran at once, max_parallel 2", ff.most)
	}
	if !slices.Equal(ff.starts, branches) {
		t.Errorf("started %v, want file order %v", ff.starts, branches)
	}
	st := ff.status()
	if st["t4"].Status != Failed || st["t4"].Error != "image missing" {
		t.Errorf("t4 = %+v, want failed with the start's error", st["t4"])
	}
	for _, b := range []string{"t1", "t2", "t3", "t5", "t6"} {
		if st[b].Status != Exited || st[b].ExitCode == nil {
			t.Errorf("%s = %+v, want exited with a code", b, st[b])
		}
	}
	if code := st["t2"].ExitCode; code == nil || *code != 1 {
		t.Errorf("t2's exit code = %v, want 1", code)
	}
}

func TestRunnerStopsStartingWhenTheFleetIsStopped(t *testing.T) {
	ff := newFakeFleet(t, 1, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ff.runner().Run(ctx) }()
	ff.waitRunning(1)
	if _, err := ff.store.Update("f", func(st *State) error { st.Stopping = true; return nil }); err != nil {
		t.Fatal(err)
	}
	ff.fake.Exit("sb-a", 143)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not end")
	}
	st := ff.status()
	if st["b"].Status != Cancelled || st["c"].Status != Cancelled {
		t.Errorf("queued tasks after stop: %+v", st)
	}
	if len(ff.starts) != 1 {
		t.Errorf("started %v after the stop", ff.starts)
	}
}

// plan counts a task whose container vanished (landed, rm) as ended.
func TestPlanTreatsAVanishedContainerAsExited(t *testing.T) {
	st := &State{MaxParallel: 1, Tasks: []TaskState{
		{Task: Task{Branch: "gone"}, Status: Running},
		{Task: Task{Branch: "next"}, Status: Queued},
	}}
	start, done := plan(st, map[string]container.State{}, time.Now())
	if len(start) != 1 || start[0].Branch != "next" || done {
		t.Errorf("start %v done %v", start, done)
	}
	if st.Tasks[0].Status != Exited || st.Tasks[1].Status != Starting {
		t.Errorf("tasks = %+v", st.Tasks)
	}
}

type fakeLander struct {
	landed []string
	fail   map[string]error
	moved  map[string]int
}

func (l *fakeLander) Land(ctx context.Context, b string) (string, error) {
	if l.moved[b] > 0 {
		l.moved[b]--
		return "", fmt.Errorf("main moved: %w", ErrMoved)
	}
	if err := l.fail[b]; err != nil {
		return "", err
	}
	l.landed = append(l.landed, b)
	return "c0ffee-" + b, nil
}

func TestQueueStopsAndContinues(t *testing.T) {
	l := &fakeLander{fail: map[string]error{"b": errors.New("verify failed on the merged tree")}, moved: map[string]int{"a": 2}}
	q := &Queue{Store: NewStore(t.TempDir()), Lander: l}
	ctx := context.Background()
	st, err := q.Run(ctx, []string{"a", "b", "c"}, false)
	var stop *StopError
	if !errors.As(err, &stop) || !errors.Is(err, ErrStopped) {
		t.Fatalf("err = %v, want a stop", err)
	}
	if !slices.Equal(l.landed, []string{"a"}) || st.Stopped != "b" || !slices.Equal(st.Rest(), []string{"b", "c"}) || st.Reason != "verify failed on the merged tree" {
		t.Errorf("landed %v, state %+v", l.landed, st)
	}
	// A new queue is refused while one is stopped; --continue with
	// branches too.
	if _, err := q.Run(ctx, []string{"c"}, false); err == nil {
		t.Error("a second queue ran while one is stopped")
	}
	if _, err := q.Run(ctx, []string{"c"}, true); err == nil {
		t.Error("--continue took branches")
	}
	delete(l.fail, "b")
	st, err = q.Run(ctx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.landed, []string{"a", "b", "c"}) || len(st.Landed) != 3 {
		t.Errorf("landed %v, state %+v", l.landed, st)
	}
	if prev, _ := q.Stopped(); prev != nil {
		t.Errorf("a finished queue was kept: %+v", prev)
	}
	if _, err := q.Run(ctx, nil, true); err == nil {
		t.Error("--continue with nothing stopped")
	}
}

func TestQueueGivesUpOnABaseThatKeepsMoving(t *testing.T) {
	l := &fakeLander{moved: map[string]int{"a": 10}}
	q := &Queue{Store: NewStore(t.TempDir()), Lander: l, Retries: 2}
	_, err := q.Run(context.Background(), []string{"a"}, false)
	if !errors.Is(err, ErrMoved) || !errors.Is(err, ErrStopped) {
		t.Errorf("err = %v", err)
	}
	if l.moved["a"] != 7 {
		t.Errorf("tried %d times, want 3", 10-l.moved["a"])
	}
}
