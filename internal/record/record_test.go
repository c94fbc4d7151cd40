package record

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"time"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestSaveLoadUpdateList(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "record.json")
	r := &Record{Branch: "a", Baseline: "b1", Created: time.Unix(1, 0).UTC()}
	if err := Save(p, r); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil || got.Branch != "a" || got.Baseline != "b1" || got.Version != Version {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if _, err := Load(filepath.Join(dir, "none", "record.json")); err != ErrNotExist {
		t.Errorf("missing record: %v", err)
	}
	// Concurrent updates under the lock do not lose writes.
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := Update(p, p+".lock", func(r *Record) error {
				if r.Verdicts == nil {
					r.Verdicts = map[string]Verdict{}
				}
				r.Verdicts[string(rune('a'+i))] = Verdict{ExitCode: i}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	got, _ = Load(p)
	if len(got.Verdicts) != 20 {
		t.Errorf("lost updates: %d verdicts", len(got.Verdicts))
	}
	if err := Save(filepath.Join(dir, "b", "record.json"), &Record{Branch: "b"}); err != nil {
		t.Fatal(err)
	}
	recs, errs := List(dir, "record.json")
	if len(errs) != 0 || len(recs) != 2 || recs[0].Branch != "a" || recs[1].Branch != "b" {
		t.Errorf("List = %+v %v", recs, errs)
	}
}

func TestLockWaitsThenGivesUp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	unlock, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := LockFor(p, 300*time.Millisecond); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("second lock: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %s", d)
	}
	go func() { time.Sleep(200 * time.Millisecond); unlock() }()
	again, err := LockFor(p, 5*time.Second)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

// TryLock never waits: it takes a free lock, and gives way at once to a
// holder and to a waiter.
func TestTryLockYieldsToHoldersAndWaiters(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	unlock, err := TryLock(p)
	if err != nil {
		t.Fatalf("try a free lock: %v", err)
	}
	if _, err := TryLock(p); !errors.Is(err, ErrBusy) {
		t.Errorf("try a held lock: %v, want ErrBusy", err)
	}
	unlock()

	// A waiter announced (as LockFor does while it polls) keeps a free
	// lock from TryLock until it is gone.
	w, err := announceWait(p)
	if err != nil || w == nil {
		t.Fatalf("announce a wait: %v %v", w, err)
	}
	if _, err := TryLock(p); !errors.Is(err, ErrBusy) {
		t.Errorf("try a lock someone waits for: %v, want ErrBusy", err)
	}
	w.Close()
	again, err := TryLock(p)
	if err != nil {
		t.Fatalf("try the lock once the waiter is gone: %v", err)
	}
	again()
}

// A LockFor that waits announces itself until it has the lock: background
// work trying the lock meanwhile gives way, however often it tries, and
// the waiter gets the lock as soon as its holder lets go.
func TestLockForWaiterIsNotStarvedByTryLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	held, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	type taken struct {
		unlock func()
		err    error
	}
	got := make(chan taken, 1)
	go func() {
		// The waiter keeps the lock until the test has looked.
		unlock, err := LockFor(p, 30*time.Second)
		got <- taken{unlock, err}
	}()
	// Wait until the waiter has announced itself: the waiters file is
	// shared-locked.
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, err := openLock(WaitersPath(p))
		if err != nil {
			t.Fatal(err)
		}
		ferr := syscall.Flock(int(w.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		w.Close()
		if ferr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never announced itself")
		}
		time.Sleep(5 * time.Millisecond)
	}
	held()
	// A background job retrying in a tight loop never takes the lock from
	// the waiter.
	for {
		select {
		case w := <-got:
			if w.err != nil {
				t.Fatalf("the waiter: %v", w.err)
			}
			w.unlock()
			// And with the waiter gone, the lock is free for it again.
			unlock, err := TryLock(p)
			if err != nil {
				t.Fatalf("try after the waiter: %v", err)
			}
			unlock()
			return
		default:
		}
		if unlock, err := TryLock(p); err == nil {
			unlock()
			t.Fatal("TryLock took the lock while LockFor waited for it")
		} else if !errors.Is(err, ErrBusy) {
			t.Fatal(err)
		}
	}
}

// A lock tried for an instant (one runner per fleet) leaves no waiters
// file behind.
func TestLockForAnInstantAnnouncesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	held, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	if _, err := LockFor(p, time.Nanosecond); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("instant lock: %v", err)
	}
	if _, err := os.Lstat(WaitersPath(p)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("waiters file after an instant try: %v", err)
	}
}

// A lock's timeout names what else takes it: LockFor a sandbox's, and
// LockHinted what the caller says.
func TestLockHintedSaysItsHint(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	held, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	_, err = LockHinted(p, time.Nanosecond, "another land onto main is running")
	ue, ok := usererr.As(err)
	if !ok || !errors.Is(err, ErrLockTimeout) || len(ue.Hints) != 1 || ue.Hints[0] != "another land onto main is running" {
		t.Errorf("LockHinted = %#v", err)
	}
}
