// Package notify tells the user about a sandbox's events, as the user's own
// config asks (`notify`): on the desktop through notify-send, or by running
// their command with the event in its environment. Which events fire, and
// that each fires once, is the supervisor's business (internal/sandbox);
// this package turns one event into the process that announces it.
package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Event is what happened to a sandbox.
type Event string

// The events, as EVENT names them.
const (
	// Exited: the agent's process ended (EXIT_CODE is its status).
	Exited Event = "exited"
	// VerifyPassed and VerifyFailed: the automatic verify after the agent
	// exited (EXIT_CODE is the verify command's status).
	VerifyPassed Event = "verify-passed"
	VerifyFailed Event = "verify-failed"
	// LandConflict: landing the sandbox's work now would conflict with its
	// base branch.
	LandConflict Event = "land-conflict"
	// EgressDenied: the egress proxy refused the agent a connection.
	EgressDenied Event = "egress-denied"
	// EgressHeld: the egress proxy holds a connection for the user's
	// answer (network_prompt).
	EgressHeld Event = "egress-held"
	// BudgetWarning: the sandbox spent 80% of its model budget;
	// BudgetSpent: all of it (the broker refuses further model calls).
	// The same names as meter.Alert's.
	BudgetWarning Event = "budget-80"
	BudgetSpent   Event = "budget-spent"
)

// Desktop is the setting that notifies through notify-send.
const Desktop = "desktop"

// Notification is one event of one sandbox.
type Notification struct {
	// Sandbox is the sandbox's branch; Repo its repository's main worktree.
	Sandbox string
	Repo    string
	Event   Event
	// ExitCode is the agent's or verify's status, for the events that
	// have one.
	ExitCode *int
}

// Timeout bounds a notify command: a hung one must not hold the supervisor.
const Timeout = 30 * time.Second

// ErrNoDesktop is returned when "desktop" is asked for and notify-send is
// not installed.
var ErrNoDesktop = errors.New("notify = \"desktop\" needs notify-send, which is not on PATH")

// Plan returns the argv and environment that announce n under setting
// ("" for nothing: nil argv). lookPath finds notify-send.
func Plan(setting string, n Notification, environ []string, lookPath func(string) (string, error)) ([]string, []string, error) {
	setting = strings.TrimSpace(setting)
	switch setting {
	case "":
		return nil, nil, nil
	case Desktop:
		p, err := lookPath("notify-send")
		if err != nil {
			return nil, nil, ErrNoDesktop
		}
		return []string{p, "--app-name=git sandbox", "git sandbox: " + termsafe.String(n.Sandbox), Message(n)}, environ, nil
	}
	code := ""
	if n.ExitCode != nil {
		code = strconv.Itoa(*n.ExitCode)
	}
	env := make([]string, 0, len(environ)+4)
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SANDBOX", "EVENT", "EXIT_CODE", "SANDBOX_REPO":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "SANDBOX="+n.Sandbox, "EVENT="+string(n.Event), "EXIT_CODE="+code, "SANDBOX_REPO="+n.Repo)
	return []string{"sh", "-c", setting}, env, nil
}

// Message is the event in words.
func Message(n Notification) string {
	code := ""
	if n.ExitCode != nil {
		code = fmt.Sprintf(" (exit code %d)", *n.ExitCode)
	}
	switch n.Event {
	case Exited:
		return "the agent exited" + code
	case VerifyPassed:
		return "verify passed"
	case VerifyFailed:
		return "verify failed" + code
	case LandConflict:
		return "landing it now would conflict with the base branch"
	case EgressDenied:
		return "the agent was denied a network connection"
	case EgressHeld:
		return "a network connection of the agent waits for your answer (git sandbox net pending, or dash)"
	case BudgetWarning:
		return "80% of its model budget is spent"
	case BudgetSpent:
		return "its model budget is spent: model calls are refused"
	}
	return string(n.Event)
}

// Send announces n under setting, waiting at most Timeout; the command's
// output goes to out (the supervisor's log).
func Send(ctx context.Context, setting string, n Notification, out io.Writer) error {
	argv, env, err := Plan(setting, n, os.Environ(), proc.LookPath)
	if err != nil || argv == nil {
		return err
	}
	if err := proc.Run(ctx, proc.RunOptions{Argv: argv, Env: env, Dir: n.Repo, Output: out, Timeout: Timeout}); err != nil {
		return fmt.Errorf("notify %s: %w", n.Event, err)
	}
	return nil
}
