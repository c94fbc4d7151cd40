package sandbox

import (
	"context"
	"testing"
	"time"
)

func TestChangesReportsABurstAndConfirmsIt(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	ctx, cancel := context.WithCancel(context.Background())
	changes, errc := te.env.Changes(ctx)
	// An exit is several events; they are reported once, then once more
	// a second later (the daemon's list lags its events).
	te.fake.Exit(sb.Container, 0)
	for i, want := range []time.Duration{100 * time.Millisecond, time.Second} {
		select {
		case <-changes:
		case <-time.After(want + 5*time.Second):
			t.Fatalf("report %d did not come", i+1)
		}
	}
	select {
	case <-changes:
		t.Fatal("a third report for one burst")
	case <-time.After(2 * time.Second):
	}
	cancel()
	if _, ok := <-changes; ok {
		t.Error("the channel stays open after ctx ended")
	}
	if err := <-errc; err != nil {
		t.Errorf("error after ctx ended: %v", err)
	}
}
