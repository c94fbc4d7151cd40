package workspace

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// stoppedHelper is a copy-mode sandbox whose helper exists but does not
// run (its engine restarted).
func stoppedHelper(t *testing.T) (*Volume, *enginefake.Engine, string) {
	t.Helper()
	f := enginefake.New("img")
	c := VolumeNames("sb")
	agent := &container.Spec{Image: "img", User: "1:1", Labels: map[string]string{container.LabelRepo: "r"}}
	id, err := f.Create(context.Background(), HelperSpec(c, "sb", agent))
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Engine: func(context.Context) (Engine, error) { return f, nil }}
	return &Volume{env: env, rec: &record.Record{Branch: "sb", Copy: &c, Spec: record.ContainerOf(agent)}}, f, id
}

// An engine that keeps a task of the helper it no longer knows refuses
// to start it ("task … already exists"): a new helper of the same name
// and spec replaces it, and runs.
// So does one that kept the old task's runtime state or shim directory.
func TestHelperMadeAgainWhenTheEngineKeepsAStaleTask(t *testing.T) {
	for _, msg := range []string{
		"Error response from daemon: task 0123: already exists",
		"Error response from daemon: id already in use",
		"Error response from daemon: failed to start shim: mkdir /run/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/0123: file exists: unknown",
	} {
		v, f, old := stoppedHelper(t)
		ctx := context.Background()
		f.FailOnce("Start", errors.New(msg))
		if _, err := v.helper(ctx); err != nil {
			t.Fatalf("%s: helper: %v", msg, err)
		}
		st, err := f.Inspect(ctx, v.rec.Copy.Helper)
		if err != nil || !st.Running || st.ID == old {
			t.Fatalf("the helper after %q: %+v (%v), want a new one (not %s), running", msg, st, err, old)
		}
	}
}

// A stale helper that cannot be made again says so, with the start's
// refusal and where the work is.
func TestHelperNotMadeAgainSaysWhy(t *testing.T) {
	v, f, _ := stoppedHelper(t)
	f.FailOnce("Start", errors.New("Error response from daemon: id already in use"))
	f.FailOnce("Remove", errors.New("engine going away"))
	_, err := v.helper(context.Background())
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "id already in use") ||
		!strings.Contains(err.Error(), "making the helper again: engine going away") || len(ue.Hints) == 0 {
		t.Errorf("the error says %v (%+v), want the refusal, the failed remake and a hint", err, ue)
	}
}

// Any other refusal to start is returned, and the helper is left as it
// was.
func TestHelperLeftAloneWhenItCannotStart(t *testing.T) {
	v, f, old := stoppedHelper(t)
	ctx := context.Background()
	f.FailOnce("Start", errors.New("no such volume"))
	_, err := v.helper(ctx)
	if err == nil {
		t.Fatal("helper: no error")
	}
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(err.Error(), "the git helper of sandbox sb did not start") || !strings.Contains(err.Error(), "no such volume") ||
		len(ue.Hints) == 0 || !strings.Contains(ue.Hints[0], "rescue list sb") {
		t.Errorf("the error says %q (%+v), want what failed, why, and where the work is", err, ue)
	}
	if st, err := f.Inspect(ctx, v.rec.Copy.Helper); err != nil || st.ID != old || st.Running {
		t.Errorf("the helper after a failed start: %+v (%v), want %s as it was", st, err, old)
	}
}

// A helper's script that failed says why: what it wrote, or, killed by a
// signal without a word (its engine stopped or restarted under it), that
// it was, with what to do; never a message that ends in a colon.
func TestHelperFailedSaysWhy(t *testing.T) {
	for _, c := range []struct {
		code       int
		stderr     string
		want, hint string
	}{
		{1, "fatal: bad tree", "helper exited with 1: fatal: bad tree", ""},
		{137, "", "the git helper was killed by signal 9 (exit 137)", "try again once the engine answers"},
		{143, "", "the git helper was killed by signal 15 (exit 143)", "try again once the engine answers"},
		{2, "", "helper exited with 2", ""},
	} {
		err := helperFailed(c.code, c.stderr)
		if msg := err.Error(); !strings.HasPrefix(msg, c.want) || strings.HasSuffix(msg, ":") {
			t.Errorf("exit %d, stderr %q: %q, want it to begin %q", c.code, c.stderr, msg, c.want)
		}
		hint := ""
		if ue, ok := usererr.As(err); ok && len(ue.Hints) > 0 {
			hint = ue.Hints[0]
		}
		if (hint == "") != (c.hint == "") || !strings.HasPrefix(hint, c.hint) {
			t.Errorf("exit %d: hint %q, want one that begins %q", c.code, hint, c.hint)
		}
	}
}

// The volumes are made at once; when one cannot be, the others made are
// removed with the rest of the start.
func TestVolumesMadeTogetherAndUndone(t *testing.T) {
	f := enginefake.New("img")
	f.FailOnce("CreateVolume", errors.New("quota exceeded"))
	var u steps.Undo
	err := createVolumes(context.Background(), &u, f, map[string]string{"l": "1"}, "a", "b", "c", "d")
	if err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("want the engine's reason, got %v", err)
	}
	if vs, _ := f.ListVolumes(context.Background()); len(vs) != 3 {
		t.Fatalf("%d volumes made, want the three that could be", len(vs))
	}
	u.Run()
	if vs, _ := f.ListVolumes(context.Background()); len(vs) != 0 {
		t.Fatalf("left after the undo: %v", vs)
	}
}

// An exec that ended with 126 and said nothing is one the runtime could
// not run in a helper its engine calls running: it marks the helper, and
// the next use makes it again (once), as for a stale task.
func TestHelperMadeAgainWhenItCannotRunACommand(t *testing.T) {
	v, f, _ := stoppedHelper(t)
	ctx := context.Background()
	if _, err := v.helper(ctx); err != nil {
		t.Fatal(err)
	}
	running, _ := f.Inspect(ctx, v.rec.Copy.Helper)
	if err := helperFailed(126, ""); !errors.Is(err, errCannotExec) || !strings.HasPrefix(err.Error(), "helper exited with 126") {
		t.Fatalf("exit 126 without a word: %v", err)
	}
	if _, err := v.helper(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Inspect(ctx, v.rec.Copy.Helper); st.ID != running.ID {
		t.Fatalf("a running helper nobody marked was made again: %s, was %s", st.ID, running.ID)
	}
	v.remake.Store(true)
	if _, err := v.helper(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.Inspect(ctx, v.rec.Copy.Helper)
	if err != nil || !st.Running || st.ID == running.ID || v.remake.Load() {
		t.Fatalf("the marked helper: %+v (%v), mark %v; want a new one, running, unmarked", st, err, v.remake.Load())
	}
	if _, err := v.helper(ctx); err != nil {
		t.Fatal(err)
	}
	if again, _ := f.Inspect(ctx, v.rec.Copy.Helper); again.ID != st.ID {
		t.Fatalf("the helper was made again twice")
	}
	if err := helperFailed(126, "sh: 1: ./x: Permission denied"); errors.Is(err, errCannotExec) {
		t.Fatal("a script's own 126, which says why, marks the helper")
	}
}
