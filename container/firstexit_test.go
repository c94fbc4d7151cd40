package container_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// FirstExit: an ended container counts at once, the first listed
// winning; a running one is waited for; a missing or never-started one
// is an error naming its index; the timeout is DeadlineExceeded.
func TestFirstExit(t *testing.T) {
	ctx := context.Background()
	f := echo()
	mk := func(name string, start bool) string {
		t.Helper()
		s := oneShot()
		s.Name, s.Argv, s.OpenStdin = name, []string{"wait"}, false
		id, err := f.Create(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if start {
			if err := f.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	running := mk("running", true)
	created := mk("created", false)
	if i, _, err := container.FirstExit(ctx, f, []string{running, created}, 0); i != 1 || !errors.Is(err, container.ErrNotStarted) {
		t.Errorf("with a created container: %d, %v", i, err)
	}
	if i, _, err := container.FirstExit(ctx, f, []string{"missing"}, 0); i != 0 || !container.IsNotFound(err) {
		t.Errorf("with a missing container: %d, %v", i, err)
	}
	if _, _, err := container.FirstExit(ctx, f, []string{running}, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: %v", err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = f.Kill(ctx, running, "SIGKILL")
	}()
	if i, code, err := container.FirstExit(ctx, f, []string{running}, 10*time.Second); i != 0 || err != nil || code == 0 {
		t.Errorf("a killed container: %d, %d, %v", i, code, err)
	}
}
