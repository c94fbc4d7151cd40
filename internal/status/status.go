// Package status is what ps (and dash, fleet ps, the MCP server's
// sandbox_list) says of a sandbox: its row, the states it can be in, how
// an engine's answer and verify's verdicts map onto them. internal/sandbox
// fills the rows; this package holds what they mean.
package status

import (
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// States a sandbox can be in, as ps shows them.
const (
	Running = "running"
	Paused  = "paused"
	Exited  = "exited"
	Stopped = "stopped"
	Created = "created"
	Missing = "container missing"
	Unknown = "unknown"
	// Unreachable is a sandbox on a configured engine that does not
	// answer.
	Unreachable = "unreachable"
	// Lost is a sandbox whose engine lost its container while it
	// ran (a Kubernetes Pod deleted or evicted, its node gone): the
	// snapshots on this machine keep its work.
	Lost = "lost"
)

// Row is one row of ps.
type Row struct {
	Branch    string    `json:"branch"`
	State     string    `json:"state"`
	ExitCode  *int      `json:"exit_code"`
	Agent     string    `json:"agent"`
	Base      string    `json:"base"`
	Created   time.Time `json:"created"`
	Worktree  string    `json:"worktree"`
	Baseline  string    `json:"baseline"`
	Container string    `json:"container"`
	// Engine is the configured engine the sandbox is on ("" for the
	// environment's); EngineError why it did not answer.
	Engine      string `json:"engine,omitempty"`
	EngineError string `json:"engine_error,omitempty"`
	Changes     int    `json:"changes"`
	// Network is the network mode; Denied counts the egress proxy's
	// refusals (allowlist mode).
	Network string `json:"network,omitempty"`
	Denied  int    `json:"denied"`
	// TooLarge counts the untracked files the newest snapshot left out
	// for being larger than rescue.max_file_size.
	TooLarge int `json:"too_large,omitempty"`
	// Nested are the nested git repositories the newest snapshot met in
	// the worktree (see rescue.Snapshot.Nested).
	Nested []string `json:"nested,omitempty"`
	// SnapshotBytes is what the sandbox's snapshots wrote into the object
	// store; SnapshotBudgetSpent says budget.snapshots is used up, so
	// interval snapshots have stopped.
	SnapshotBytes       int64  `json:"snapshot_bytes,omitempty"`
	SnapshotBudgetSpent bool   `json:"snapshot_budget_spent,omitempty"`
	Snapshot            string `json:"snapshot"`
	// SnapshotTree is the newest snapshot's tree: what land would take
	// now (land --expect accepts it).
	SnapshotTree string `json:"snapshot_tree,omitempty"`
	// Verdict is verify's verdict on that tree: "passed", "failed",
	// "stale" (verify ran on an older tree only), "none", or "" without a
	// verify command.
	Verdict string `json:"verdict,omitempty"`
	// SnapshotTime is when the newest snapshot (where Changes comes from)
	// was taken.
	SnapshotTime time.Time `json:"snapshot_time"`
	// Forecast is the conflict forecast: the paths that would conflict
	// with the base's tip and with other sandboxes if both landed (nil
	// when it could not be made).
	Forecast *forecast.Result `json:"forecast"`
	// Usage is what the agent reported spending (tokens, cost), summed
	// over its runs; absent when it reported nothing.
	Usage *agent.Usage `json:"usage,omitempty"`
	// Spend is what the credential broker metered (see network.SpendOf).
	Spend  *meter.Status `json:"spend"`
	Prompt string        `json:"prompt,omitempty"`
	Verify string        `json:"verify,omitempty"`
	// Ports are the published ports (on the host's loopback interface).
	Ports []container.Port `json:"ports,omitempty"`
	// Conflicts are the paths the last git sandbox update left conflicted
	// that still hold conflict markers in the worktree.
	Conflicts []string `json:"conflicts,omitempty"`
}

// SetState is the row's state from what the sandbox's engine answered: c,
// its container, when found (ok); err, when the engine did not answer
// (named: on an engine the config names, which is then unreachable);
// stopped, when the user stopped the sandbox.
func (st *Row) SetState(c container.State, ok bool, err error, named, stopped bool) {
	switch {
	case err != nil && named:
		st.State = Unreachable
		st.EngineError = err.Error()
	case err != nil:
		st.State = Unknown
	case !ok:
		st.State = Missing
	case c.Status == container.StatusLost:
		st.State = Lost
	case c.Running:
		st.State = Running
	case c.Status == "paused":
		// A snapshot is reading its files this instant (or one died doing
		// so; the next snapshot thaws it).
		st.State = Paused
	case c.Status == "created":
		st.State = Created
	default:
		if c.ListExitCode != nil {
			code := *c.ListExitCode
			st.ExitCode = &code
		}
		st.State = Exited
		if stopped {
			st.State = Stopped
		}
	}
}

// Verdict names verify's verdict on tree for ps: "passed", "failed",
// "stale" (verify ran on an older tree only), "none", or "" without a
// verify command.
func Verdict(verify string, verdicts map[string]record.Verdict, tree string) string {
	if verify == "" {
		return ""
	}
	if v, ok := verdicts[tree]; ok && tree != "" {
		if v.OK {
			return "passed"
		}
		return "failed"
	}
	if len(verdicts) > 0 {
		return "stale"
	}
	return "none"
}
