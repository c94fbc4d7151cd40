package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/recovery"
)

// A start killed after it made its branch is undone by the next: the
// branch goes while it is where the start made it, and stays (with a
// warning) once someone committed on it since: the name may be the
// user's now.
func TestRecoverStartKeepsABranchThatMoved(t *testing.T) {
	te := newTestEnv(t)
	ctx := context.Background()
	start := te.git("rev-parse", "main")
	killed := func(branch string) {
		t.Helper()
		dir := te.env.Layout.Dir(branch)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		mark, err := recovery.Begin(filepath.Join(dir, recovery.MarkName), &record.Record{Branch: branch, Start: start})
		if err != nil {
			t.Fatal(err)
		}
		mark.Release() // the lock goes with the process
		te.git("branch", branch, start)
	}
	killed("untouched")
	killed("taken")
	te.git("checkout", "-q", "taken")
	te.write("mine.txt", "mine\n")
	te.git("add", "mine.txt")
	te.git("commit", "-q", "-m", "mine")
	mine := te.git("rev-parse", "taken")
	te.git("checkout", "-q", "main")
	for _, b := range []string{"untouched", "taken"} {
		if ok, err := te.env.RecoverStart(ctx, b); !ok || err != nil {
			t.Fatalf("recover %s: %v %v", b, ok, err)
		}
	}
	if te.refExists("refs/heads/untouched") {
		t.Error("the branch the killed start made is left")
	}
	if got := te.git("rev-parse", "taken"); got != mine {
		t.Errorf("the branch committed on since = %s, want %s", got, mine)
	}
	if _, err := os.Stat(te.env.Layout.Dir("taken")); !os.IsNotExist(err) {
		t.Errorf("the interrupted start's state is left: %v", err)
	}
}
