package held

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Connections to one destination are one question; a question is gone
// from the file when its last connection leaves; one more than MaxHeld
// is not held; a question past its time is not read.
func TestRoom(t *testing.T) {
	path := filepath.Join(t.TempDir(), File)
	r := New(path, time.Minute, func(err error) { t.Error(err) })
	release := make(chan struct{})
	decide := func() Verdict {
		select {
		case <-release:
			return Allowed
		default:
			return Pending
		}
	}
	var wg sync.WaitGroup
	verdicts := make([]Verdict, MaxHeld)
	for i := range MaxHeld {
		host := "a.test"
		if i%2 == 1 {
			host = "b.test"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			verdicts[i] = r.Wait(context.Background(), host, 443, "connect", host, decide)
		}()
	}
	for i := 0; ; i++ {
		qs, err := Read(path, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) == 2 && qs[0].Count+qs[1].Count == MaxHeld {
			break
		}
		if i > 500 {
			t.Fatalf("questions %+v", qs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := r.Wait(context.Background(), "c.test", 443, "connect", "c.test", decide); v != Full {
		t.Errorf("one more than MaxHeld: %v", v)
	}
	close(release)
	wg.Wait()
	for i, v := range verdicts {
		if v != Allowed {
			t.Fatalf("connection %d: %v", i, v)
		}
	}
	if qs, err := Read(path, time.Now()); err != nil || len(qs) != 0 {
		t.Fatalf("after: %+v %v", qs, err)
	}
	now := time.Now()
	if err := Write(path, []Request{{ID: "old", Host: "x.test", Until: now.Add(-time.Second), Count: 1}, {ID: "new", Host: "y.test", Until: now.Add(time.Second), Count: 1}}); err != nil {
		t.Fatal(err)
	}
	if qs, err := Read(path, now); err != nil || len(qs) != 1 || qs[0].ID != "new" {
		t.Fatalf("read %+v %v", qs, err)
	}
}

// An unanswered question times out; a context that ends does too.
func TestRoomTimesOut(t *testing.T) {
	r := New(filepath.Join(t.TempDir(), File), 50*time.Millisecond, nil)
	never := func() Verdict { return Pending }
	if v := r.Wait(context.Background(), "a.test", 80, "http", "a.test", never); v != TimedOut {
		t.Errorf("unanswered: %v", v)
	}
	r = New(filepath.Join(t.TempDir(), File), time.Hour, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := r.Wait(ctx, "a.test", 80, "http", "a.test", never); v != TimedOut {
		t.Errorf("ended context: %v", v)
	}
	if Entry("a.test", 443, 443) != "a.test" || Entry("a.test", 8443, 443) != "a.test:8443" {
		t.Error("Entry")
	}
}
