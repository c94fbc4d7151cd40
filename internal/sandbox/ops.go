package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// States a sandbox can be in, as ps shows them.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateExited  = "exited"
	StateStopped = "stopped"
	StateCreated = "created"
	StateMissing = "container missing"
	StateUnknown = "unknown"
	// StateUnreachable is a sandbox on a configured engine that does not
	// answer.
	StateUnreachable = "unreachable"
	// StateLost is a sandbox whose engine lost its container while it
	// ran (a Kubernetes Pod deleted or evicted, its node gone): the
	// snapshots on this machine keep its work.
	StateLost = "lost"
)

// Status is one row of ps.
type Status struct {
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
	Usage  *agent.Usage `json:"usage,omitempty"`
	Prompt string       `json:"prompt,omitempty"`
	Verify string       `json:"verify,omitempty"`
	// Ports are the published ports (on the host's loopback interface).
	Ports []container.Port `json:"ports,omitempty"`
	// Conflicts are the paths the last git sandbox update left conflicted
	// that still hold conflict markers in the worktree.
	Conflicts []string `json:"conflicts,omitempty"`
}

// Statuses reports every sandbox of the repository. Records are the source
// of truth for which sandboxes exist; Docker adds their state in one call,
// and when it is unreachable the state is unknown rather than an error.
func (e *Env) Statuses(ctx context.Context) ([]Status, error) {
	sbs, errs := e.All()
	for _, err := range errs {
		e.UI.Warnf("%v", err)
	}
	e.EmptyTrash()
	// Every engine the sandboxes are on, asked at once and while git reads
	// the refs: a slow or unreachable one holds up only its own rows.
	type answer struct {
		byName map[string]container.State
		err    error
	}
	engines := map[string]*answer{"": nil}
	for _, sb := range sbs {
		engines[sb.Record.Engine] = nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range slices.Collect(maps.Keys(engines)) {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			a := &answer{byName: map[string]container.State{}}
			d, err := e.EngineNamed(ctx, name)
			if err == nil {
				var list []container.State
				list, err = d.List(ctx, container.LabelRepo+"="+e.Repo.ID)
				for _, c := range list {
					a.byName[c.Name] = c
				}
			}
			a.err = err
			mu.Lock()
			engines[name] = a
			mu.Unlock()
		}(name)
	}
	var bases []string
	seen := map[string]bool{}
	for _, sb := range sbs {
		if sb.BaseRef != "" && !seen[sb.BaseRef] && !strings.HasPrefix(sb.BaseRef, rescue.RefPrefix) {
			seen[sb.BaseRef] = true
			bases = append(bases, sb.BaseRef)
		}
	}
	tips := e.rescueTips(ctx, bases...)
	wg.Wait()
	for _, name := range slices.Sorted(maps.Keys(engines)) {
		if a := engines[name]; name != "" && a.err != nil {
			e.UI.Warnf("engine %s is unreachable: %v", name, a.err)
		}
	}
	out := make([]Status, 0, len(sbs))
	for _, sb := range sbs {
		st := Status{
			Branch: sb.Branch, Agent: sb.Agent, Base: sb.Base, Created: sb.Created,
			Worktree: sb.Worktree, Baseline: sb.Baseline, Container: sb.Container,
			Prompt: sb.Prompt, Verify: sb.Verify, Ports: sb.Ports(), Engine: sb.Record.Engine,
		}
		if sb.Copy != nil {
			st.Worktree = "(volume " + sb.Copy.Workspace + ")"
		}
		st.Network = string(sb.Network())
		if u := sb.TotalUsage(); !u.IsZero() {
			st.Usage = &u
		}
		st.Conflicts = sb.ConflictsInWorktree()
		st.SnapshotBytes, _, st.SnapshotBudgetSpent = sb.SnapshotBudget()
		if sb.Egress != nil {
			if sum, err := egress.SummarizeFile(sb.NetLog()); err == nil {
				st.Denied = sum.Denied + sum.Leaks
			}
		}
		if t, ok := tips[sb.Refs().Rescue()]; ok {
			st.Changes, st.Snapshot, st.TooLarge, st.Nested = t.changes, t.id, t.tooLarge, t.nested
			st.SnapshotTime, st.SnapshotTree = t.time, t.tree
		}
		st.Verdict = verdictOf(sb, st.SnapshotTree)
		a := engines[sb.Record.Engine]
		c, ok := a.byName[sb.Container]
		switch {
		case a.err != nil && sb.Record.Engine != "":
			st.State = StateUnreachable
			st.EngineError = a.err.Error()
		case a.err != nil:
			st.State = StateUnknown
		case !ok:
			st.State = StateMissing
		case c.Status == container.StatusLost:
			st.State = StateLost
		case c.Running:
			st.State = StateRunning
		case c.Status == "paused":
			// A snapshot is reading its files this instant (or one died
			// doing so; the next snapshot thaws it).
			st.State = StatePaused
		case c.Status == "created":
			st.State = StateCreated
		default:
			if c.ListExitCode != nil {
				code := *c.ListExitCode
				st.ExitCode = &code
			}
			st.State = StateExited
			if sb.Stopped {
				st.State = StateStopped
			}
		}
		out = append(out, st)
	}
	if fc, err := e.forecast(ctx, sbs, tips, false); err != nil {
		e.UI.Warnf("conflict forecast: %v", err)
	} else {
		for i := range out {
			out[i].Forecast = fc[out[i].Branch]
		}
	}
	return out, nil
}

// verdictOf names verify's verdict on tree for ps.
func verdictOf(sb *Sandbox, tree string) string {
	if sb.Verify == "" {
		return ""
	}
	if v, ok := sb.Verdicts[tree]; ok && tree != "" {
		if v.OK {
			return "passed"
		}
		return "failed"
	}
	if len(sb.Verdicts) > 0 {
		return "stale"
	}
	return "none"
}

type tip struct {
	id       string
	tree     string
	time     time.Time
	changes  int
	tooLarge int
	nested   []string
}

// rescueTips reads every sandbox's newest snapshot and its change count,
// and the refs named in extra (the bases, for the conflict forecast), with
// three git processes run at once.
func (e *Env) rescueTips(ctx context.Context, extra ...string) map[string]tip {
	out := map[string]tip{}
	// git before 2.40 applies the options of one trailers atom to every
	// other in the same format: one call per trailer.
	var main, large, nested []string
	var mainErr, largeErr, nestedErr error
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		args := []string{"for-each-ref",
			"--format=%(refname) %(objectname) %(tree) %(committerdate:unix) %(contents:trailers:key=Sandbox-Changes,valueonly,separator=)", rescue.RefPrefix}
		main, mainErr = e.Git().Lines(ctx, append(args, extra...)...)
	}()
	go func() {
		defer wg.Done()
		large, largeErr = e.Git().Lines(ctx, "for-each-ref",
			"--format=%(refname) %(contents:trailers:key=Sandbox-Too-Large,valueonly,separator=%x01)", rescue.RefPrefix)
	}()
	go func() {
		defer wg.Done()
		nested, nestedErr = e.Git().Lines(ctx, "for-each-ref",
			"--format=%(refname) %(contents:trailers:key=Sandbox-Nested,valueonly,separator=%x01)", rescue.RefPrefix)
	}()
	wg.Wait()
	if mainErr != nil {
		return out
	}
	for _, line := range main {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		t := tip{id: f[1]}
		if len(f) >= 4 {
			t.tree = f[2]
			if sec, err := strconv.ParseInt(f[3], 10, 64); err == nil {
				t.time = time.Unix(sec, 0)
			}
		}
		if len(f) >= 5 {
			t.changes, _ = strconv.Atoi(f[4])
		}
		out[f[0]] = t
	}
	if largeErr == nil {
		for _, line := range large {
			ref, l, _ := strings.Cut(line, " ")
			if t, ok := out[ref]; ok && l != "" {
				// Paths are quoted: \x01 only separates.
				t.tooLarge = strings.Count(l, "\x01") + 1
				out[ref] = t
			}
		}
	}
	if nestedErr == nil {
		for _, line := range nested {
			ref, n, _ := strings.Cut(line, " ")
			t, ok := out[ref]
			if !ok || n == "" {
				continue
			}
			for _, q := range strings.Split(n, "\x01") {
				if p, err := strconv.Unquote(q); err == nil {
					t.nested = append(t.nested, p)
				}
			}
			out[ref] = t
		}
	}
	return out
}

// existing connects to the engine and returns the sandbox's container, which
// must exist.
func (s *Sandbox) existing(ctx context.Context) (Engine, *container.State, error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.ContainerState(ctx)
	if err != nil {
		return nil, nil, err
	}
	if st == nil {
		return nil, nil, errMissing(s)
	}
	return d, st, nil
}

// Wait blocks until the sandbox's agent exits and returns its exit code.
// A timeout of 0 waits for ever.
func (s *Sandbox) Wait(ctx context.Context, timeout time.Duration) (int, error) {
	d, st, err := s.existing(ctx)
	if err != nil {
		return -1, err
	}
	if !st.Running {
		if st.Status == "created" {
			return -1, usererr.New("sandbox %s has not started", s.Display()).
				Hint("git sandbox start %s runs it", s.Display())
		}
		return st.ExitCode, s.exitSnapshot(ctx)
	}
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	res := <-d.WaitExit(wctx, s.Container, container.WaitNotRunning)
	if res.Err != nil {
		if errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return -1, usererr.New("sandbox %s is still running after %s", s.Display(), timeout).
				Hint("wait again, or stop it with git sandbox stop %s", s.Display()).
				WithCode(usererr.ExitTimeout)
		}
		return -1, fmt.Errorf("wait: %w", res.Err)
	}
	return res.Code, s.exitSnapshot(ctx)
}

// exitSnapshot makes sure the snapshot of the agent's last files is
// written before wait returns, so ps right after shows what it changed.
// The supervisor takes the same snapshot; whichever comes second finds the
// tree unchanged and writes nothing.
func (s *Sandbox) exitSnapshot(ctx context.Context) error {
	if _, err := s.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonExit); err != nil {
		return fmt.Errorf("snapshot after the agent exited: %w", err)
	}
	s.quarantineNested(context.WithoutCancel(ctx))
	return nil
}

func errMissing(s *Sandbox) error {
	return usererr.New("sandbox %s has no container any more", s.Display()).
		Hint("git sandbox rescue list %s shows its snapshots; git sandbox rm %s cleans up", s.Display(), s.Display())
}

// Running reports whether the sandbox's container runs. Docker being
// unreachable is an error: callers that delete must not guess.
func (s *Sandbox) Running(ctx context.Context) (bool, error) {
	st, err := s.ContainerState(ctx)
	if err != nil {
		return false, err
	}
	return st != nil && st.Running, nil
}

// Stop stops the agent's container and takes a snapshot.
func (s *Sandbox) Stop(ctx context.Context, timeout time.Duration) (*rescue.Taken, error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.ContainerState(ctx)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Running {
		if err := s.Update(func(r *record.Record) error { r.Stopped = true; return nil }); err != nil {
			return nil, err
		}
		if err := d.Stop(ctx, s.Container, timeout); err != nil {
			return nil, err
		}
	}
	if err := s.stopProxy(ctx, d); err != nil {
		s.env.UI.Warnf("the egress proxy was not removed: %v", err)
	}
	t, err := s.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonStop)
	if err != nil {
		return nil, err
	}
	s.quarantineNested(context.WithoutCancel(ctx))
	return t, nil
}

// RemoveOptions control rm.
type RemoveOptions struct {
	// Force removes a running sandbox and one with work that differs from
	// its baseline (the snapshots stay).
	Force bool
	// Reason is recorded on the last snapshot (rm, land).
	Reason rescue.Reason
}

// Remove deletes the sandbox: container, worktree, branch, private
// repository and state. A final snapshot is taken first, and the rescue
// chain stays until pruned.
func (s *Sandbox) Remove(ctx context.Context, o RemoveOptions) (*rescue.Taken, error) {
	d, err := s.engine(ctx)
	if err != nil && s.Copy != nil {
		// Its machine may be gone for good: the work is in the snapshots
		// here, so --force forgets the sandbox on this side.
		if !o.Force {
			return nil, usererr.Wrap(err, "engine %s does not answer, so sandbox %s cannot be removed there: %v", s.engineName(), s.Display(), err).
				Hint("its snapshots are here: git sandbox rescue list %s", s.Display()).
				Hint("git sandbox rm --force %s removes it here only (its containers and volumes there stay)", s.Display())
		}
		s.env.UI.Warnf("engine %s does not answer: sandbox %s is removed here only; its containers and volumes there stay", s.engineName(), s.Display())
		return nil, s.teardown(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	st, err := s.ContainerState(ctx)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Running {
		if !o.Force {
			return nil, usererr.New("sandbox %s is still running", s.Display()).
				Hint("stop it first (git sandbox stop %s), or remove it anyway with --force", s.Display()).
				WithCode(usererr.ExitRefused)
		}
		if err := d.Stop(ctx, s.Container, 5*time.Second); err != nil {
			return nil, err
		}
	}
	var last *rescue.Taken
	if _, err := os.Lstat(s.Worktree); err == nil || s.Copy != nil {
		// The agent's commits go with its repository: bring them back first,
		// so the last snapshot keeps them (as its second parent).
		if _, err := s.Sync(ctx, false); err != nil {
			s.env.UI.Warnf("the agent's commits were not kept: %v", err)
		}
		reason := o.Reason
		if reason == "" {
			reason = rescue.ReasonRemove
		}
		last, err = s.Snapshotter().Take(ctx, reason)
		if err != nil && s.Copy != nil {
			return nil, usererr.Wrap(err, "cannot take the final snapshot of %s: %v", s.Display(), err).
				Hint("nothing was removed; the newest snapshot on this machine is in git sandbox rescue list %s", s.Display())
		}
		if err != nil {
			return nil, usererr.Wrap(err, "cannot take the final snapshot of %s: %v", s.Display(), err).
				Hint("nothing was removed; fix the cause or copy the worktree %s by hand", s.Worktree)
		}
		if len(last.Nested) > 0 && !o.Force {
			s.quarantineNested(context.WithoutCancel(ctx))
			what := "git sandbox rm"
			if reason == rescue.ReasonLand {
				what = "git sandbox land"
			}
			return nil, nestedRefusal(s, last.Nested, what)
		}
		if last.Changes > 0 && !o.Force {
			return nil, usererr.New("sandbox %s has %d changed files that were not landed", s.Display(), last.Changes).
				Hint("git sandbox diff %s shows them; git sandbox land %s lands them", s.Display(), s.Display()).
				Hint("git sandbox rm --force %s removes it anyway (snapshot %s keeps the work)", s.Display(), shortID(last.ID)).
				WithCode(usererr.ExitRefused)
		}
	}
	return last, s.teardown(ctx, d)
}

// teardownEngine removes what the sandbox has on its engine.
func (s *Sandbox) teardownEngine(ctx context.Context, d Engine) []error {
	var errs []error
	if err := d.Remove(ctx, s.Container); err != nil {
		errs = append(errs, err)
	}
	// Verify and proxy containers of this sandbox too, then its networks.
	if others, err := d.List(ctx, container.LabelRepo+"="+s.RepoID, container.LabelBranch+"="+s.Branch); err == nil {
		for _, c := range others {
			_ = d.Remove(ctx, c.ID)
		}
	}
	if err := s.removeNetworks(ctx, d); err != nil {
		errs = append(errs, err)
	}
	if s.Copy != nil {
		// The files on the engine: their snapshots are on this machine.
		if err := s.removeCopyVolumes(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// teardown removes everything of the sandbox except its snapshot refs.
func (s *Sandbox) teardown(ctx context.Context, d Engine) error {
	ctx = context.WithoutCancel(ctx)
	g := s.env.Git()
	var errs []error
	if d != nil { // nil: a lost engine, forgotten with rm --force
		errs = append(errs, s.teardownEngine(ctx, d)...)
	}
	// The worktree and the state directory are moved aside (a rename, so
	// the name can be used again at once, however many files they hold)
	// and deleted in the background.
	trash := s.env.Layout.Trash()
	if s.Copy == nil {
		if err := worktree.MoveAside(s.env.Repo.CommonDir, s.Worktree, trash); err != nil {
			errs = append(errs, err)
		}
	}
	branch := "refs/heads/" + s.Branch
	if head, err := g.RevParse(ctx, branch); err == nil {
		if err := g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: branch, Old: head, Message: "git sandbox: remove sandbox"}); err != nil {
			errs = append(errs, err)
		}
	} else if !errors.Is(err, gitcmd.ErrNotExist) {
		errs = append(errs, err)
	}
	_ = g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: s.Refs().Agent(), AnyOld: true})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := worktree.MoveIntoTrash(s.env.Layout.Dir(s.Branch), trash); err != nil {
		return fmt.Errorf("remove sandbox state: %w", err)
	}
	s.env.EmptyTrash()
	return nil
}

// PurgeCommand is the hidden command that deletes a repository's trash.
const PurgeCommand = "__purge"

// EmptyTrash deletes what removed sandboxes left in the trash, in a
// detached process, so the command that removed them returns at once (and
// a crash before it ran is finished by the next rm, land or ps).
func (e *Env) EmptyTrash() {
	trash := e.Layout.Trash()
	entries, err := os.ReadDir(trash)
	if err != nil || len(entries) == 0 {
		return
	}
	if e.purge != nil {
		_ = e.purge(trash)
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = proc.SpawnDetached(proc.SpawnOptions{
			Path: exe, Args: []string{"git-sandbox", PurgeCommand, "--", trash}, Dir: "/", Env: os.Environ(),
		})
	}
	if err != nil {
		e.UI.Warnf("cannot delete %s in the background (%v); deleting it now", trash, err)
		_ = Purge(trash)
	}
}

// Purge deletes a trash directory's entries.
func Purge(trash string) error {
	if filepath.Base(trash) != ".trash" {
		return fmt.Errorf("purge: %s is not a trash directory", trash)
	}
	entries, err := os.ReadDir(trash)
	if err != nil {
		return err
	}
	var errs []error
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(trash, en.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Logs writes the agent's output.
func (s *Sandbox) Logs(ctx context.Context, follow bool, tail string, stdout, stderr io.Writer) error {
	d, _, err := s.existing(ctx)
	if err != nil {
		return err
	}
	return d.Logs(ctx, s.Container, container.LogsOptions{Follow: follow, Tail: tail, Stdout: stdout, Stderr: stderr})
}

// Attach connects the terminal to the running agent.
func (s *Sandbox) Attach(ctx context.Context, io IO) error {
	d, st, err := s.existing(ctx)
	if err != nil {
		return err
	}
	if !st.Running {
		return usererr.New("sandbox %s is not running", s.Display()).
			Hint("git sandbox start %s resumes it; git sandbox logs %s shows what it printed", s.Display(), s.Display())
	}
	tty := st.TTY
	if tty && !io.StdinIsTerminal {
		return usererr.New("sandbox %s has a terminal and this command has none", s.Display()).
			Hint("attach from a terminal, or read its output with git sandbox logs -f %s", s.Display())
	}
	streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: tty, TerminalFd: io.StdinFd}
	if st.OpenStdin && (io.StdinIsTerminal || io.StdinIsPipe) {
		streams.Stdin = io.Stdin
	}
	// The engine refuses to attach to a paused container: attach under the
	// sandbox's lock, so no snapshot pauses the agent while it connects.
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		return err
	}
	wait, err := d.Attach(ctx, s.Container, streams)
	unlock()
	if err != nil {
		return err
	}
	return wait()
}

// Exec runs a command in the running sandbox as the sandbox user, in
// /workspace, and returns its exit code.
func (s *Sandbox) Exec(ctx context.Context, argv []string, io IO) (int, error) {
	d, st, err := s.existing(ctx)
	if err != nil {
		return -1, err
	}
	if len(argv) == 0 {
		if !io.StdinIsTerminal {
			return -1, usererr.New("an interactive shell needs a terminal").
				Hint("give a command: git sandbox exec %s -- CMD", s.Display())
		}
		argv = []string{"/bin/bash", "-l"}
	}
	if !st.Running {
		return s.execFresh(ctx, d, argv, io)
	}
	streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: io.StdinIsTerminal, TerminalFd: io.StdinFd}
	if io.StdinIsTerminal || io.StdinIsPipe {
		streams.Stdin = io.Stdin
	}
	env := []string{"HOME=" + container.Home}
	if io.StdinIsTerminal {
		env = append(env, "TERM="+firstNonEmpty(os.Getenv("TERM"), "xterm-256color"))
	}
	// A process started into a container a snapshot has paused hangs, and
	// with it the daemon's handling of that container (its unpause
	// included). Snapshots pause only under the sandbox's lock: hold it
	// until the command runs, not while it runs.
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		return -1, err
	}
	return d.Exec(ctx, s.Container, container.ExecOptions{
		Argv: argv, User: fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), WorkDir: container.Workspace, Env: env, Streams: streams,
		Started: unlock,
	})
}

// execFresh runs a command in a sandbox whose agent is not running: in a
// fresh container made from the agent's (same image, mounts, hardening,
// limits, network), which is removed when the command ends. The agent is
// not started. The sandbox's lock is held while the command runs, so no
// snapshot reads the files half-written and the agent cannot start beside
// it; a snapshot is taken when it ends, as after the agent.
func (s *Sandbox) execFresh(ctx context.Context, d Engine, argv []string, io IO) (int, error) {
	if s.Spec == nil {
		return -1, usererr.New("sandbox %s is not running, and was made by an older git sandbox that did not record its container", s.Display()).
			Hint("git sandbox start -d %s runs it again; then exec works", s.Display())
	}
	spec := s.Spec.Clone()
	spec.Name = fmt.Sprintf("%s-exec-%d", s.Container, time.Now().UnixNano())
	spec.Argv = argv
	spec.Labels[container.LabelRole] = container.RoleExec
	spec.TTY = io.StdinIsTerminal
	spec.OpenStdin = io.StdinIsTerminal || io.StdinIsPipe
	spec.StdinOnce = spec.OpenStdin && !spec.TTY
	if spec.TTY {
		spec.Env = append(spec.Env, "TERM="+firstNonEmpty(os.Getenv("TERM"), "xterm-256color"))
	}
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		return -1, err
	}
	code, err := func() (int, error) {
		defer unlock()
		if st, err := s.ContainerState(ctx); err != nil {
			return -1, err
		} else if st != nil && st.Running {
			return -1, usererr.New("sandbox %s started while exec was getting ready", s.Display()).
				Hint("run git sandbox exec %s again", s.Display())
		}
		// The command runs where the agent would: with its nested
		// repositories in place (quarantined again after it).
		if err := s.env.restoreNested(s); err != nil {
			return -1, err
		}
		id, err := d.Create(ctx, spec)
		if err != nil {
			return -1, err
		}
		defer func() { _ = d.Remove(context.WithoutCancel(ctx), id) }()
		streams := container.Streams{Stdout: io.Stdout, Stderr: io.Stderr, TTY: spec.TTY, TerminalFd: io.StdinFd}
		if spec.OpenStdin {
			streams.Stdin = io.Stdin
		}
		waitC := d.WaitExit(ctx, id, container.WaitNextExit)
		pump, err := d.Attach(ctx, id, streams)
		if err != nil {
			return -1, err
		}
		if err := d.Start(ctx, id); err != nil {
			return -1, err
		}
		stopSignals := forwardSignals(ctx, d, id, spec.TTY)
		_ = pump()
		res := <-waitC
		stopSignals()
		if res.Err != nil {
			return -1, fmt.Errorf("wait for the command: %w", res.Err)
		}
		return res.Code, nil
	}()
	if err != nil {
		s.quarantineNested(context.WithoutCancel(ctx))
		return code, err
	}
	if _, err := s.Snapshotter().Take(context.WithoutCancel(ctx), rescue.ReasonExec); err != nil {
		s.env.UI.Warnf("snapshot after the command failed: %v", err)
	}
	s.quarantineNested(context.WithoutCancel(ctx))
	return code, nil
}

// WaitAny blocks until the first of the sandboxes' agents exits (one that
// has exited already counts at once, the first listed winning) and returns
// it with its exit code. A timeout of 0 waits for ever.
func (e *Env) WaitAny(ctx context.Context, sbs []*Sandbox, timeout time.Duration) (*Sandbox, int, error) {
	if len(sbs) == 0 {
		return nil, -1, usererr.New("wait --any needs at least one sandbox")
	}
	d, err := e.Engine(ctx)
	if err != nil {
		return nil, -1, err
	}
	// Already exited: the first in the order given, without waiting.
	for _, sb := range sbs {
		st, err := d.Inspect(ctx, sb.Container)
		if container.IsNotFound(err) {
			return nil, -1, errMissing(sb)
		}
		if err != nil {
			return nil, -1, fmt.Errorf("inspect container: %w", err)
		}
		if st.Status == "created" {
			return nil, -1, usererr.New("sandbox %s has not started", sb.Display()).
				Hint("git sandbox start %s runs it", sb.Display())
		}
		if !st.Running {
			return sb, st.ExitCode, sb.exitSnapshot(ctx)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(wctx, timeout)
		defer cancel()
	}
	type done struct {
		sb  *Sandbox
		res container.WaitResult
	}
	ch := make(chan done, len(sbs))
	for _, sb := range sbs {
		go func() {
			ch <- done{sb, <-d.WaitExit(wctx, sb.Container, container.WaitNotRunning)}
		}()
	}
	// The first answer decides: an exit, or the wait failing (every
	// waiter fails alike when the timeout or ctx ends).
	r := <-ch
	if r.res.Err == nil {
		return r.sb, r.res.Code, r.sb.exitSnapshot(ctx)
	}
	if wctx.Err() == nil {
		return nil, -1, fmt.Errorf("wait for %s: %w", r.sb.Display(), r.res.Err)
	}
	if errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return nil, -1, usererr.New("no sandbox's agent exited within %s", timeout).
			Hint("wait again, or stop them with git sandbox stop BRANCH").
			WithCode(usererr.ExitTimeout)
	}
	return nil, -1, ctx.Err()
}
