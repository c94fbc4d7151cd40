package e2e

import (
	"strings"
	"testing"
	"time"
)

// Fleets. The landing queue verifies with the command recorded when the
// sandbox started — an agent that rewrites .sandbox.toml to verify = "true"
// in its work does not choose what its merged tree is judged by — and it
// never lands a sandbox whose agent still runs (its work could change
// after the verify): the queue stops there and lands nothing after it.
func TestAttackFleetQueueKeepsTheRecordedVerifyAndSkipsNothingRunning(t *testing.T) {
	e := NewEnv(t)
	e.fleetConfig()
	e.WriteFile(".sandbox.toml", "verify = \"test ! -e evil.txt\"\n")
	e.Git("add", ".sandbox.toml")
	e.Git("commit", "-q", "-m", "verify")
	tasks := e.writeTasks("evil.toml", `max_parallel = 2

[[task]]
branch = "evil"
prompt = "innocent"
command = ["sh", "-c", "echo pwned > evil.txt; printf 'verify = \"true\"\\n' > .sandbox.toml; grep -q true .sandbox.toml && echo ARMED"]

[[task]]
branch = "lingers"
command = ["sh", "-c", "echo early > early.txt; sleep 300"]
`)
	e.MustSandbox("fleet", "start", tasks)
	Eventually(t, 2*time.Minute, "evil to exit while lingers runs", func() bool {
		states := map[string]string{}
		for _, task := range e.fleetPs(t)[0].Tasks {
			states[task.Branch] = task.Status
		}
		return states["evil"] == "exited" && states["lingers"] == "running"
	})
	if logs := e.MustSandbox("logs", "evil"); !strings.Contains(logs.Stdout+logs.Stderr, "ARMED") {
		t.Fatalf("the attack did not arm: %s", logs)
	}
	start := e.Git("rev-parse", "main")

	r := e.Sandbox("fleet", "land", "lingers", "evil")
	if r.Code != 4 || !strings.Contains(r.Stderr, "stopped at lingers") || !strings.Contains(r.Stderr, "still running") {
		t.Errorf("ATTACK SUCCEEDED: the queue did not stop at a running sandbox: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != start {
		t.Fatalf("ATTACK SUCCEEDED: main moved to %s with an agent still running", got)
	}
	e.MustSandbox("fleet", "land", "--abort")

	r = e.Sandbox("fleet", "land", "evil")
	if r.Code != 4 || !strings.Contains(r.Stderr, "verify failed (exit code 1) on the merged tree") {
		t.Errorf("ATTACK SUCCEEDED: the rewritten .sandbox.toml chose the verify: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != start {
		t.Errorf("ATTACK SUCCEEDED: main moved to %s", got)
	}
	e.MustSandbox("fleet", "land", "--abort")
	e.MustSandbox("fleet", "rm", "-f")
	if ps := e.Ps(); len(ps) != 0 {
		t.Errorf("sandboxes left after fleet rm -f: %+v", ps)
	}
}
