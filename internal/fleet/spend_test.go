package fleet

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestRunnerStopsStartingOnceTheBudgetIsSpent(t *testing.T) {
	ff := newFakeFleet(t, 1, "a", "b", "c")
	if _, err := ff.store.Update("f", func(st *State) error {
		st.Budget = 10
		st.Tasks[0].Budget = "8.00"
		st.Tasks[1].Budget = "8.00"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	spent := 0.0
	var budgets []string
	r := ff.runner()
	r.Spent = func(*State) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		return spent, nil
	}
	step := func() bool {
		t.Helper()
		start, done, err := r.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range start {
			budgets = append(budgets, task.Budget)
			r.finish(task, ff.start(context.Background(), task))
		}
		return done
	}
	// a starts with its own 8.00 (under the 10 left) and spends 7.
	step()
	mu.Lock()
	spent = 7
	mu.Unlock()
	ff.fake.Stop(context.Background(), "sb-a", 0)
	// b starts with what is left (3), not its 8; then the budget is spent.
	step()
	mu.Lock()
	spent = 10.5
	mu.Unlock()
	ff.fake.Stop(context.Background(), "sb-b", 0)
	if !step() {
		t.Fatal("the fleet is not done")
	}
	st, _ := ff.store.Load("f")
	if c := st.Tasks[2]; c.Status != OverBudget || !strings.Contains(c.Error, "budget of $10.00 is spent ($10.50)") {
		t.Errorf("task c: %s %q", c.Status, c.Error)
	}
	if len(budgets) != 2 || budgets[0] != "8.00" || budgets[1] != "3.0000" {
		t.Errorf("budgets given: %q", budgets)
	}
}

func TestFileBudgets(t *testing.T) {
	f, err := Parse("tasks.toml", []byte("budget = \"20\"\n[[task]]\nbranch = \"a\"\ncommand = [\"true\"]\nbudget = \"5.00\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := f.FleetBudget(); b != 20 || f.Tasks[0].Budget != "5.00" {
		t.Errorf("budgets %v %q", b, f.Tasks[0].Budget)
	}
	_, err = Parse("tasks.toml", []byte("budget = \"lots\"\n[[task]]\nbranch = \"a\"\ncommand = [\"true\"]\nbudget = \"-1\"\n"))
	if err == nil || !strings.Contains(err.Error(), "tasks.toml:1: budget") || !strings.Contains(err.Error(), "tasks.toml:5: [[task]] 1: budget") {
		t.Errorf("bad budgets: %v", err)
	}
}
