package fleet

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestStoreNamesAndResolve(t *testing.T) {
	s := NewStore(filepath.Join(t.TempDir(), "fleets"))
	// No store directory yet: no fleets, and no error.
	if names, err := s.Names(); err != nil || len(names) != 0 {
		t.Fatalf("Names of a missing store = %v, %v", names, err)
	}
	if _, err := s.Resolve(""); !errors.Is(err, ErrNoFleet) {
		t.Errorf("Resolve with no fleet = %v", err)
	}
	if err := s.Create(&State{Name: "b2"}); err != nil {
		t.Fatal(err)
	}
	if name, err := s.Resolve(""); err != nil || name != "b2" {
		t.Errorf("Resolve of the only fleet = %q, %v", name, err)
	}
	if err := s.Create(&State{Name: "a1"}); err != nil {
		t.Fatal(err)
	}
	// Neither a directory without a state file nor one of an invalid
	// name is a fleet.
	if err := os.MkdirAll(filepath.Join(s.Dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, ".hidden"), 0o700); err != nil {
		t.Fatal(err)
	}
	if names, err := s.Names(); err != nil || !slices.Equal(names, []string{"a1", "b2"}) {
		t.Errorf("Names = %v, %v; want [a1 b2]", names, err)
	}
	if _, err := s.Resolve(""); err == nil || !strings.Contains(err.Error(), "has 2 fleets") {
		t.Errorf("Resolve with two fleets = %v", err)
	}
	if name, err := s.Resolve("a1"); err != nil || name != "a1" {
		t.Errorf("Resolve(a1) = %q, %v", name, err)
	}
	if _, err := s.Resolve("c3"); !errors.Is(err, ErrNoFleet) {
		t.Errorf("Resolve(c3) = %v", err)
	}
	if _, err := s.Resolve("../a1"); err == nil || !strings.Contains(err.Error(), "invalid fleet name") {
		t.Errorf("Resolve(../a1) = %v", err)
	}
	if err := s.Remove("a1"); err != nil {
		t.Fatal(err)
	}
	if names, _ := s.Names(); !slices.Equal(names, []string{"b2"}) {
		t.Errorf("Names after Remove = %v", names)
	}
}

func TestStoreCreateLoadUpdate(t *testing.T) {
	s := NewStore(t.TempDir())
	st := &State{Name: "f", MaxParallel: 3, Tasks: []TaskState{{Task: Task{Branch: "a"}, Status: Queued}}}
	if err := s.Create(st); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(st); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a second Create = %v", err)
	}
	got, err := s.Update("f", func(st *State) error {
		st.Tasks[0].Status = Running
		return nil
	})
	if err != nil || got.Tasks[0].Status != Running {
		t.Fatalf("Update = %+v, %v", got, err)
	}
	if again, _ := s.Load("f"); again.Tasks[0].Status != Running || again.MaxParallel != 3 {
		t.Errorf("the update was not saved: %+v", again)
	}
	if _, err := s.Update("f", func(*State) error { return errors.New("no") }); err == nil {
		t.Error("a failing update gave no error")
	}
	if again, _ := s.Load("f"); again.Tasks[0].Status != Running {
		t.Errorf("a failed update changed the state: %+v", again)
	}
	if _, err := s.Update("none", func(*State) error { return nil }); err == nil {
		t.Error("Update of no fleet gave no error")
	}
	if err := os.WriteFile(s.file("f"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("f"); err == nil || !strings.Contains(err.Error(), s.file("f")) {
		t.Errorf("Load of a damaged state = %v", err)
	}
	if entries, _ := filepath.Glob(filepath.Join(s.dir("f"), "fleet-*.json")); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestRunnerLock(t *testing.T) {
	s := NewStore(t.TempDir())
	if err := s.Create(&State{Name: "f"}); err != nil {
		t.Fatal(err)
	}
	if s.RunnerAlive("f") {
		t.Fatal("a runner is alive before any took the lock")
	}
	unlock, err := s.LockRunner("f")
	if err != nil {
		t.Fatal(err)
	}
	if !s.RunnerAlive("f") {
		t.Error("the runner holding the lock is not seen")
	}
	if _, err := s.LockRunner("f"); err == nil {
		t.Error("a second runner took the lock")
	}
	unlock()
	if s.RunnerAlive("f") {
		t.Error("a runner is seen after it let go")
	}
}

func TestNamesStatesAndCounts(t *testing.T) {
	for name, ok := range map[string]bool{"batch1": true, "a.b_c-d": true, "": false, "-x": false, ".x": false, "a/b": false, strings.Repeat("x", 65): false} {
		err := CheckName(name)
		if (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
		if ue, isUser := usererr.As(err); err != nil && (!isUser || len(ue.Hints) == 0) {
			t.Errorf("CheckName(%q): no hint", name)
		}
	}
	st := &State{Tasks: []TaskState{{Status: Queued}, {Status: Running}, {Status: Running}, {Status: Failed}}}
	if c := st.Counts(); c[Queued] != 1 || c[Running] != 2 || c[Failed] != 1 || c[Exited] != 0 {
		t.Errorf("Counts = %v", c)
	}
	for status, active := range map[string]bool{Queued: true, Starting: true, Running: true, Exited: false, Failed: false, Cancelled: false} {
		if (TaskState{Status: status}).Active() != active {
			t.Errorf("task %s: Active %v", status, !active)
		}
	}
	for status, active := range map[string]bool{Queued: true, Starting: true, "running": true, "paused": true, "created": true, "exited": false, Removed: false, Failed: false} {
		if (Row{Status: status}).Active() != active {
			t.Errorf("row %s: Active %v", status, !active)
		}
	}
}

// A fleet is found by its name, or by the tasks file it was started from
// (as users type it after fleet start tasks.toml), or as the only one.
func TestResolveTakesTheTasksFile(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(filepath.Join(dir, "fleets"))
	tasks := filepath.Join(dir, "tasks.toml")
	other := filepath.Join(dir, "other.toml")
	for _, f := range []string{tasks, other} {
		if err := os.WriteFile(f, []byte("[[task]]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Create(&State{Name: "batch1", File: tasks}); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, arg := range []string{"batch1", "tasks.toml", tasks, "./tasks.toml", ""} {
		if got, err := s.Resolve(arg); got != "batch1" || err != nil {
			t.Errorf("Resolve(%q) = %q, %v", arg, got, err)
		}
	}
	if _, err := s.Resolve("other.toml"); !errors.Is(err, ErrNoFleet) {
		t.Errorf("a tasks file no fleet was started from: %v", err)
	}
	if _, err := s.Resolve("../x"); err == nil || !strings.Contains(err.Error(), "invalid fleet name") {
		t.Errorf("a bad name: %v", err)
	}
}
