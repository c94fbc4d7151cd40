package e2e

// The adversarial suite, second round: attacks found by attacking the
// build that passed the first. Each test arms its attack inside the
// container first, as attack_test.go does, then asserts that its
// host-side effect is absent.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// atkVerdicts returns the verify verdicts recorded for a sandbox, keyed by
// tree.
func (e *Env) atkVerdicts(name string) map[string]struct {
	OK       bool `json:"ok"`
	ExitCode int  `json:"exit_code"`
} {
	e.t.Helper()
	var rec struct {
		Verdicts map[string]struct {
			OK       bool `json:"ok"`
			ExitCode int  `json:"exit_code"`
		} `json:"verdicts"`
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(e.Worktree(name)), "record.json"))
	if err != nil {
		e.t.Fatalf("read the record of %s: %v", name, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatalf("parse the record of %s: %v", name, err)
	}
	return rec.Verdicts
}

// ---------------------------------------------------------------------------
// 17. An agent that exits before the supervisor first looks at its
// container used to skip the automatic verify: the sandbox then had no
// verdict, and whatever the agent left landed unverified unless the user
// thought to run verify.

func TestAttackQuickExitStillVerified(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// The agent exits at once: its container has stopped long before the
	// supervisor process has started and asked the engine about it.
	e.MustSandbox("start", "quick", "-d", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", "exit 0")
	Eventually(t, 60*time.Second, "the automatic verify's verdict", func() bool {
		return len(e.atkVerdicts("quick")) > 0
	})
	for tree, v := range e.atkVerdicts("quick") {
		if v.OK {
			t.Errorf("verify passed on tree %s without ok.txt", tree)
		}
	}
}
