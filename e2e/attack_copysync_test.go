package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stateBytes is the size of the files under the sync directories of a
// sandbox's state (where copy mode indexes the pack of the agent's commits
// before it checks them).
func stateBytes(dir string) int64 {
	var n int64
	syncs, _ := filepath.Glob(filepath.Join(dir, "sync-*"))
	for _, d := range syncs {
		_ = filepath.Walk(d, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

// TestAttackCopySyncPackIsCutAtTheBudget: in copy mode the agent's commits
// come back from the engine as a pack, which the host indexed whole (into
// the sandbox's state) before sync's budgets were checked: an agent that
// commits a 48 MiB file of random bytes made the host write 48 MiB (any
// amount) past a budget.sync of 8m. The pack is now checked as it streams:
// sync refuses, naming the setting, and what the host wrote of it stays
// far below the budget; nothing of it is left. With the budget raised the
// same commit comes back. The engine is the main daemon in copy mode
// (as in TestCopyModeAllowlist).
func TestAttackCopySyncPackIsCutAtTheBudget(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	mainHost := mainDockerHost()
	config := "base_image = %q\n[rescue]\ninterval = \"1h\"\n[budget]\nsync = %q\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"here\"\nhost = %q\nmode = \"copy\"\n"
	e.WriteConfig(config, baseImage, "8m", mainHost)
	agent := `set -e
head -c 48m /dev/urandom >big.bin
git add big.bin
git commit -q -m "a big file"
echo "commit:$(git rev-parse HEAD)"`
	r := e.MustSandbox("start", "big", "--engine", "here", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	_, commit, _ := strings.Cut(r.Stdout, "commit:")
	commit = strings.TrimSpace(commit)
	if len(commit) != 40 {
		t.Fatalf("agent output:\n%s", r)
	}
	state := filepath.Join(e.State, e.RepoID(), "big")
	if _, err := os.Stat(state); err != nil {
		t.Fatal(err)
	}
	// Watch what the host writes while it syncs.
	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := stateBytes(state); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	s := e.Sandbox("sync", "big")
	close(stop)
	<-watched
	if s.Code != 4 || !strings.Contains(s.Stderr, "over the budget of one sync (budget.sync)") || !strings.Contains(s.Stderr, "raise budget.sync") {
		t.Errorf("sync of a 48 MiB commit with budget.sync = 8m: want exit 4 naming budget.sync, got %s", s)
	}
	if p := peak.Load(); p > 4<<20 {
		t.Errorf("the host wrote %d bytes of the pack before refusing it (budget 8m, the file 48 MiB)", p)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "sync-*")); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", commit); r.Code == 0 {
		t.Errorf("the refused commit %s is in the user's store", commit)
	}
	if r := e.Run(e.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/sandbox/big/agent"); r.Code == 0 {
		t.Errorf("refs/sandbox/big/agent was set to %s", r.Stdout)
	}

	// Raised, the budget lets the same work come back.
	e.WriteConfig(config, baseImage, "100m", mainHost)
	e.MustSandbox("sync", "big")
	if got := strings.TrimSpace(e.Git("rev-parse", "refs/sandbox/big/agent")); got != commit {
		t.Errorf("refs/sandbox/big/agent = %q, want %s", got, commit)
	}
	e.MustSandbox("rm", "--force", "big")
}
