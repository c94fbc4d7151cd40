package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/fleet"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

type noIn struct{}

type branchIn struct {
	Branch string `json:"branch" jsonschema:"the sandbox's branch"`
}

type startIn struct {
	Branch  string   `json:"branch" jsonschema:"the new sandbox's branch, created from base"`
	Prompt  string   `json:"prompt,omitempty" jsonschema:"the task; every agent but shell needs one"`
	Agent   string   `json:"agent,omitempty" jsonschema:"the agent: claude, codex or shell (default: the user's config)"`
	Command []string `json:"command,omitempty" jsonschema:"for the shell agent: the command to run, as argv"`
	Base    string   `json:"base,omitempty" jsonschema:"branch or commit to start from and land on (default: the branch checked out)"`
	Allow   []string `json:"allow,omitempty" jsonschema:"hosts the agent may reach on top of its allow list: HOST[:PORT] or *.SUFFIX"`
	Verify  string   `json:"verify,omitempty" jsonschema:"command that decides whether the work is done (run by land)"`
	Budget  string   `json:"budget,omitempty" jsonschema:"dollars the agent may spend on model calls, such as 2.00 (at most the user's budget.model)"`
}

// started is sandbox_start's and sandbox_followup's answer.
type started struct {
	Branch    string           `json:"branch"`
	State     string           `json:"state"`
	Resumed   bool             `json:"resumed"`
	Container string           `json:"container"`
	Engine    string           `json:"engine,omitempty"`
	Ports     []container.Port `json:"ports,omitempty"`
}

// io is what a start run from here prints: to the server's log, never to
// the protocol's stream.
func (s *Server) io() sandbox.IO {
	return sandbox.IO{Stdin: strings.NewReader(""), Stdout: s.log, Stderr: s.log}
}

func (s *Server) start(ctx context.Context, _ *sdk.CallToolRequest, in startIn) (result, error) {
	if in.Prompt == "" && len(in.Command) == 0 {
		return result{}, usererr.New("sandbox_start needs the task: a prompt, or for the shell agent a command").
			Hint("a sandbox started here runs without a terminal, so its agent cannot be interactive")
	}
	if _, err := s.env.Find(in.Branch); err == nil {
		return result{}, usererr.New("sandbox %s exists already", termsafe.String(in.Branch)).
			Hint("sandbox_followup gives it a follow-up task; sandbox_rm removes it")
	}
	if err := s.checkBudget(in.Budget); err != nil {
		return result{}, err
	}
	res, err := s.env.Start(ctx, sandbox.StartOptions{
		Branch: in.Branch, Base: in.Base, Agent: in.Agent, Prompt: in.Prompt, Args: in.Command,
		Verify: in.Verify, Allow: in.Allow, Budget: in.Budget, Detach: true, IO: s.io(),
	})
	if err != nil {
		return result{}, err
	}
	s.watch.poke()
	return startedResult(res), nil
}

// startedResult is the answer of a detached start.
func startedResult(res *sandbox.StartResult) result {
	sb := res.Sandbox
	return result{
		Summary: started{Branch: sb.Branch, State: sandbox.StateRunning, Resumed: res.Resumed, Container: sb.Container, Engine: sb.Record.Engine, Ports: sb.Ports()},
		Note:    "the agent works in the background: sandbox_wait waits for it, sandbox_logs shows its output, sandbox_diff its change",
	}
}

type followupIn struct {
	Branch  string   `json:"branch" jsonschema:"the existing sandbox's branch"`
	Prompt  string   `json:"prompt,omitempty" jsonschema:"the follow-up task"`
	Command []string `json:"command,omitempty" jsonschema:"for the shell agent: the command to run, as argv"`
	Verify  string   `json:"verify,omitempty" jsonschema:"a new verify command, if it changes"`
}

func (s *Server) followup(ctx context.Context, _ *sdk.CallToolRequest, in followupIn) (result, error) {
	if in.Prompt == "" && len(in.Command) == 0 {
		return result{}, usererr.New("sandbox_followup needs the follow-up task: a prompt, or for the shell agent a command")
	}
	if _, err := s.env.Find(in.Branch); err != nil {
		return result{}, err
	}
	res, err := s.env.Start(ctx, sandbox.StartOptions{
		Branch: in.Branch, Prompt: in.Prompt, Args: in.Command, Verify: in.Verify, Detach: true, IO: s.io(),
	})
	if err != nil {
		return result{}, err
	}
	return startedResult(res), nil
}

type waitIn struct {
	Branch  string `json:"branch" jsonschema:"the sandbox's branch"`
	Timeout int    `json:"timeout_seconds,omitempty" jsonschema:"give up after this many seconds (default 600, at most 3600)"`
}

// waited is sandbox_wait's answer.
type waited struct {
	Branch   string `json:"branch"`
	State    string `json:"state"`
	ExitCode *int   `json:"exit_code,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// Wait's bounds, and how often it says it is still waiting.
const (
	defaultWait   = 600 * time.Second
	maxWait       = time.Hour
	progressEvery = 2 * time.Second
)

func (s *Server) wait(ctx context.Context, req *sdk.CallToolRequest, in waitIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	timeout := defaultWait
	if in.Timeout > 0 {
		timeout = min(time.Duration(in.Timeout)*time.Second, maxWait)
	}
	stop := s.progress(ctx, req, sb.Display(), timeout)
	code, err := sb.Wait(ctx, timeout)
	stop()
	if ue, ok := usererr.As(err); ok && ue.Code == usererr.ExitTimeout {
		return result{Summary: waited{Branch: sb.Branch, State: sandbox.StateRunning, TimedOut: true},
			Note: fmt.Sprintf("still running after %s: wait again, or sandbox_stop stops it", timeout)}, nil
	}
	if err != nil {
		return result{}, err
	}
	return result{Summary: waited{Branch: sb.Branch, State: sandbox.StateExited, ExitCode: &code},
		Note: "sandbox_diff shows what it changed"}, nil
}

// progress tells the client, when the call carries a progress token, that
// the wait goes on: at once and every progressEvery, counting seconds.
// The returned function stops it.
func (s *Server) progress(ctx context.Context, req *sdk.CallToolRequest, name string, timeout time.Duration) func() {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		begin := time.Now()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			waited := time.Since(begin).Round(time.Second)
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: token, Progress: waited.Seconds(), Total: timeout.Seconds(),
				Message: fmt.Sprintf("waiting for %s: running for %s", name, waited),
			})
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

type stopIn struct {
	Branch  string `json:"branch" jsonschema:"the sandbox's branch"`
	Timeout int    `json:"timeout_seconds,omitempty" jsonschema:"how long the agent gets to exit before it is killed (default 10)"`
}

// stopped is sandbox_stop's and sandbox_rm's answer.
type stopped struct {
	Branch   string `json:"branch"`
	Stopped  bool   `json:"stopped,omitempty"`
	Removed  bool   `json:"removed,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
	Changes  int    `json:"changes"`
}

func (s *Server) stop(ctx context.Context, _ *sdk.CallToolRequest, in stopIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	timeout := 10 * time.Second
	if in.Timeout > 0 {
		timeout = min(time.Duration(in.Timeout)*time.Second, 10*time.Minute)
	}
	snap, err := sb.Stop(ctx, timeout)
	if err != nil {
		return result{}, err
	}
	return result{Summary: stopped{Branch: sb.Branch, Stopped: true, Snapshot: snap.ID, Changes: snap.Changes}}, nil
}

type rmIn struct {
	Branch string `json:"branch" jsonschema:"the sandbox's branch"`
	Force  bool   `json:"force,omitempty" jsonschema:"also remove a running sandbox, or one whose work was not landed (its snapshots stay)"`
}

func (s *Server) rm(ctx context.Context, _ *sdk.CallToolRequest, in rmIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	last, err := sb.Remove(ctx, sandbox.RemoveOptions{Force: in.Force})
	if err != nil {
		return result{}, err
	}
	s.watch.poke()
	out := stopped{Branch: sb.Branch, Removed: true}
	r := result{Summary: &out}
	if last != nil && last.Changes > 0 {
		out.Snapshot, out.Changes = last.ID, last.Changes
		r.Note = fmt.Sprintf("its work is in snapshot %s: git sandbox rescue restore %s --branch NEW brings it back", last.ID[:12], last.ID[:12])
	}
	return r, nil
}

type updateIn struct {
	Branch string `json:"branch" jsonschema:"the sandbox's branch"`
	Wait   bool   `json:"wait,omitempty" jsonschema:"wait for a running agent to exit instead of refusing"`
}

// updated is sandbox_update's answer; the conflicted paths are the
// agent's names and come in the block.
type updated struct {
	Branch    string `json:"branch"`
	UpToDate  bool   `json:"up_to_date"`
	Tip       string `json:"tip"`
	Before    string `json:"snapshot_before,omitempty"`
	After     string `json:"snapshot_after,omitempty"`
	Conflicts int    `json:"conflicts"`
}

func (s *Server) update(ctx context.Context, _ *sdk.CallToolRequest, in updateIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	res, err := sb.UpdateBase(ctx, sandbox.UpdateOptions{Wait: in.Wait})
	if err != nil {
		return result{}, err
	}
	out := updated{Branch: sb.Branch, UpToDate: res.UpToDate, Tip: res.Tip.String(), Conflicts: len(res.Conflicts)}
	if res.Before != nil && res.After != nil {
		out.Before, out.After = res.Before.ID, res.After.ID
	}
	r := result{Summary: out}
	if len(res.Conflicts) > 0 {
		r.Untrusted = &block{What: fmt.Sprintf("the paths in sandbox %s that hold conflict markers, one a line", sb.Display()), Body: strings.Join(res.Conflicts, "\n")}
		r.Note = "resolve them with sandbox_followup (a task that resolves the markers); landing refuses until then"
	}
	return r, nil
}

type taskIn struct {
	Branch  string   `json:"branch" jsonschema:"the task's sandbox branch"`
	Prompt  string   `json:"prompt,omitempty" jsonschema:"the task; every agent but shell needs one"`
	Agent   string   `json:"agent,omitempty" jsonschema:"the agent (default: the user's config)"`
	Command []string `json:"command,omitempty" jsonschema:"for the shell agent: the command, as argv"`
	Base    string   `json:"base,omitempty" jsonschema:"branch or commit to start from (default: the branch checked out now)"`
	Verify  string   `json:"verify,omitempty" jsonschema:"the verify command"`
	Allow   []string `json:"allow,omitempty" jsonschema:"hosts the agent may reach on top of its allow list"`
	Memory  string   `json:"memory,omitempty" jsonschema:"memory limit, such as 4g"`
	CPUs    float64  `json:"cpus,omitempty" jsonschema:"CPU limit, such as 1.5"`
	Pids    int64    `json:"pids,omitempty" jsonschema:"process limit"`
}

type fleetIn struct {
	Name        string   `json:"name" jsonschema:"the fleet's name (a plain file name)"`
	MaxParallel int      `json:"max_parallel,omitempty" jsonschema:"how many tasks run at once (default: as many as memory allows, at most two per CPU)"`
	Tasks       []taskIn `json:"tasks" jsonschema:"the tasks, in the order they start and land"`
}

// fleetStarted is fleet_start's answer.
type fleetStarted struct {
	Fleet       string `json:"fleet"`
	Tasks       int    `json:"tasks"`
	MaxParallel int    `json:"max_parallel"`
}

func (s *Server) fleetStart(ctx context.Context, _ *sdk.CallToolRequest, in fleetIn) (result, error) {
	f := &fleet.File{MaxParallel: in.MaxParallel}
	for _, t := range in.Tasks {
		f.Tasks = append(f.Tasks, fleet.Task{
			Branch: t.Branch, Agent: t.Agent, Prompt: t.Prompt, Command: t.Command, Base: t.Base,
			Verify: t.Verify, Allow: t.Allow, Limits: config.Limits{Memory: t.Memory, CPUs: t.CPUs, Pids: t.Pids},
		})
	}
	fl := &fleet.Fleets{Store: fleet.NewStore(s.env.Layout.FleetDir()), SB: &fleet.Sandboxes{Env: s.env, Out: s.log}}
	// The tasks' numbers stand for lines in the messages.
	err := fleet.CheckTasks("tasks", f, fl.SB)
	var st *fleet.State
	if err == nil {
		st, err = fl.Start(ctx, in.Name, "", f)
	}
	if p, ok := errors.AsType[*fleet.Problems](err); ok {
		return result{}, usererr.Wrap(p, "%s", p.Error()).Hint("\"tasks:N\" is the N-th task; fix them and start the fleet again")
	}
	if err != nil {
		return result{}, err
	}
	s.watch.poke()
	return result{Summary: fleetStarted{Fleet: st.Name, Tasks: len(st.Tasks), MaxParallel: st.MaxParallel},
		Note: "the tasks start in the background: sandbox_list shows them, sandbox_wait waits for one"}, nil
}
