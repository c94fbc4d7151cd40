package fake

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
)

func spec(name string) *container.Spec {
	s := &container.Spec{
		Name: name, Image: "img", User: "1:1", Network: container.NetworkNone,
		Labels: map[string]string{container.LabelManaged: "1", container.LabelRepo: "r"},
		Limits: container.Limits{Pids: 8},
	}
	s.Harden()
	return s
}

// The fake keeps the contract the real engine keeps (e2e/engine_test.go
// checks the same points against the daemon).
func TestContainerLifecycle(t *testing.T) {
	ctx := context.Background()
	f := New("img")
	evctx, stop := context.WithCancel(ctx)
	events, _ := f.Events(evctx, container.LabelRepo+"=r")

	if _, err := f.Create(ctx, &container.Spec{Name: "bad", Image: "img"}); err == nil {
		t.Error("an unhardened spec was created")
	}
	if _, err := f.Create(ctx, func() *container.Spec { s := spec("x"); s.Image = "nope"; return s }()); !container.IsNotFound(err) {
		t.Errorf("missing image: %v", err)
	}
	id, err := f.Create(ctx, spec("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Create(ctx, spec("c1")); !container.IsConflict(err) {
		t.Errorf("duplicate name: %v", err)
	}
	if err := f.Pause(ctx, id); !container.IsConflict(err) {
		t.Errorf("pause of a created container: %v", err)
	}
	next := f.WaitExit(ctx, id, container.WaitNextExit)
	if err := f.Start(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := f.Pause(ctx, id); !container.IsConflict(err) {
		t.Errorf("second pause: %v", err)
	}
	if st, _ := f.Inspect(ctx, id); !st.Paused || !st.Running || st.Status != StatusPaused {
		t.Errorf("inspect paused = %+v", st)
	}
	if list, _ := f.List(ctx); len(list) != 1 || list[0].Running {
		t.Errorf("list shows a paused container as running: %+v", list)
	}
	if err := f.Unpause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := f.Kill(ctx, id, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	if r := <-next; r.Code != 143 || r.Err != nil {
		t.Errorf("next exit = %+v", r)
	}
	if r := <-f.WaitExit(ctx, id, container.WaitNotRunning); r.Code != 143 {
		t.Errorf("not-running wait = %+v", r)
	}
	if list, _ := f.List(ctx, container.LabelRepo+"=r"); len(list) != 1 || list[0].ListExitCode == nil || *list[0].ListExitCode != 143 {
		t.Errorf("list = %+v", list)
	}
	if err := f.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Inspect(ctx, id); !container.IsNotFound(err) {
		t.Errorf("inspect after remove: %v", err)
	}
	if err := f.Remove(ctx, id); err != nil {
		t.Errorf("removing a missing container: %v", err)
	}
	stop()
	var got []container.EventAction
	for ev := range events {
		got = append(got, ev.Action)
	}
	want := []container.EventAction{container.EventCreate, container.EventStart, container.EventPause, container.EventUnpause, container.EventDie, container.EventDestroy}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

func TestFailuresAndCalls(t *testing.T) {
	ctx := context.Background()
	f := New("img")
	boom := errors.New("boom")
	f.FailOnce("Create", boom)
	if _, err := f.Create(ctx, spec("c")); !errors.Is(err, boom) {
		t.Errorf("first create: %v", err)
	}
	if _, err := f.Create(ctx, spec("c")); err != nil {
		t.Errorf("second create: %v", err)
	}
	f.Fail("Start", boom)
	for range 2 {
		if err := f.Start(ctx, "c"); !errors.Is(err, boom) {
			t.Errorf("start: %v", err)
		}
	}
	f.Fail("Start", nil)
	if err := f.Start(ctx, "c"); err != nil {
		t.Errorf("start after clearing: %v", err)
	}
	if f.Count("Create") != 2 || f.Count("Start") != 3 || f.Calls()[0].String() != "Create c" {
		t.Errorf("calls = %v", f.Calls())
	}
}

func TestVolumesAndNetworks(t *testing.T) {
	ctx := context.Background()
	f := New("img")
	if _, err := f.CreateVolume(ctx, container.VolumeSpec{Name: "v", Labels: map[string]string{"k": "1"}}); err != nil {
		t.Fatal(err)
	}
	if vs, _ := f.ListVolumes(ctx, "k=1"); len(vs) != 1 || vs[0].Labels[container.LabelManaged] == "" {
		t.Errorf("volumes = %+v", vs)
	}
	n, err := f.CreateNetwork(ctx, container.NetworkSpec{Name: "n", Internal: true})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := f.Create(ctx, spec("c"))
	if err := f.ConnectNetwork(ctx, "n", id, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveNetwork(ctx, n.ID); !container.IsConflict(err) {
		t.Errorf("removing a network in use: %v", err)
	}
	_ = f.Remove(ctx, id)
	if err := f.RemoveNetwork(ctx, n.ID); err != nil {
		t.Error(err)
	}
	if ns, _ := f.ListNetworks(ctx); len(ns) != 0 {
		t.Errorf("networks = %+v", ns)
	}
	if err := f.RemoveVolume(ctx, "v"); err != nil {
		t.Error(err)
	}
}

// With MovesImages the fake saves an image as an archive whose manifest
// names it, and loads every tag such an archive names; without, both are
// ErrNotSupported.
func TestMovesImages(t *testing.T) {
	ctx := context.Background()
	from, to := New("img:1"), New()
	if _, err := from.Images().Save(ctx, "img:1"); !container.IsNotSupported(err) {
		t.Errorf("save without MovesImages = %v", err)
	}
	from.MovesImages, to.MovesImages = true, true
	if !from.Abilities().MoveImages {
		t.Error("Abilities does not say MoveImages")
	}
	r, err := from.Images().Save(ctx, "img:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Images().Load(ctx, r); err != nil {
		t.Fatal(err)
	}
	if ok, _ := to.Images().Exists(ctx, "img:1"); !ok || to.Count("LoadImage") != 1 {
		t.Errorf("loaded: %v, %d loads", ok, to.Count("LoadImage"))
	}
}
