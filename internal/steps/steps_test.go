package steps

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// A flow that fails at step k undoes what k and every step before it
// registered, newest first, and names step k.
func TestRunUndoesInReverseAndNamesTheStep(t *testing.T) {
	for fail := range 3 {
		var log []string
		step := func(name string) Step {
			return Step{Name: name, Do: func(_ context.Context, u *Undo) error {
				log = append(log, "do "+name)
				u.Add(func() { log = append(log, "undo "+name+"/1") })
				if name == []string{"a", "b", "c"}[fail] {
					return errors.New("broken")
				}
				u.Add(func() { log = append(log, "undo "+name+"/2") })
				return nil
			}}
		}
		var u Undo
		err := Run(context.Background(), &u, Options{}, step("a"), step("b"), step("c"))
		name := []string{"a", "b", "c"}[fail]
		if FailedStep(err) != name || !strings.HasPrefix(err.Error(), name+": broken") {
			t.Fatalf("fail at %s: err = %v", name, err)
		}
		var want []string
		for _, n := range []string{"a", "b", "c"}[:fail+1] {
			want = append(want, "do "+n)
		}
		want = append(want, "undo "+name+"/1")
		for i := fail - 1; i >= 0; i-- {
			n := []string{"a", "b", "c"}[i]
			want = append(want, "undo "+n+"/2", "undo "+n+"/1")
		}
		if !slices.Equal(log, want) {
			t.Errorf("fail at %s:\n got %q\nwant %q", name, log, want)
		}
	}
}

func TestRunSucceedsAndKeepsTheUndo(t *testing.T) {
	var undone int
	var u Undo
	err := Run(context.Background(), &u, Options{}, Step{Name: "a", Do: func(_ context.Context, u *Undo) error {
		u.Add(func() { undone++ })
		return nil
	}})
	if err != nil || undone != 0 {
		t.Fatalf("err %v, undone %d", err, undone)
	}
	u.Run()
	u.Run()
	if undone != 1 {
		t.Errorf("undone %d times, want once", undone)
	}
}

func TestInjectFailsAfterTheStep(t *testing.T) {
	var ran []string
	var u Undo
	err := Run(context.Background(), &u, Options{Inject: func(s string) error {
		if s == "b" {
			return errors.New("injected")
		}
		return nil
	}}, Step{Name: "a", Do: func(context.Context, *Undo) error { ran = append(ran, "a"); return nil }},
		Step{Name: "b", Do: func(context.Context, *Undo) error { ran = append(ran, "b"); return nil }},
		Step{Name: "c", Do: func(context.Context, *Undo) error { ran = append(ran, "c"); return nil }})
	if FailedStep(err) != "b" || !slices.Equal(ran, []string{"a", "b"}) {
		t.Errorf("err %v, ran %q", err, ran)
	}
}

// A message for the user is kept as it is, hints and exit status too.
func TestUserErrorsKeepTheirMessage(t *testing.T) {
	ue := usererr.New("no room").Hint("make some").WithCode(usererr.ExitRefused)
	var u Undo
	err := Run(context.Background(), &u, Options{}, Step{Name: "volumes", Do: func(context.Context, *Undo) error { return ue }})
	if err.Error() != "no room" || usererr.Code(err) != usererr.ExitRefused {
		t.Errorf("err %q code %d", err, usererr.Code(err))
	}
	if got, ok := usererr.As(err); !ok || got != ue {
		t.Errorf("user error lost: %v", err)
	}
}
