package record

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
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
