package container

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A burst of events is reported once, then once more; a broken stream
// closes the report channel with its error.
func TestChanges(t *testing.T) {
	events, errs := make(chan Event, 8), make(chan error, 1)
	var traced int
	changes, errc := Changes(context.Background(), events, errs, func(Event) { traced++ })
	for _, a := range []EventAction{EventDie, EventDie, EventDestroy} {
		events <- Event{Action: a, Name: "c"}
	}
	for i := range 2 {
		select {
		case <-changes:
		case <-time.After(5 * time.Second):
			t.Fatalf("report %d did not come", i+1)
		}
	}
	select {
	case <-changes:
		t.Fatal("a third report for one burst")
	case <-time.After(changeConfirm + 200*time.Millisecond):
	}
	errs <- errors.New("stream broke")
	close(events)
	if _, ok := <-changes; ok {
		t.Error("the channel stays open after the stream ended")
	}
	if err := <-errc; err == nil || err.Error() != "stream broke" {
		t.Errorf("error %v", err)
	}
	if traced != 3 {
		t.Errorf("traced %d events, want 3", traced)
	}
}
