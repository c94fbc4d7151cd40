// Package sandbox composes the pieces of one sandbox's life: start (branch,
// worktree, baseline snapshot, record, private repository, container),
// resume, the supervisor that snapshots while the agent runs, status for
// ps, wait, stop and rm. Each piece is owned elsewhere (worktree, rescue,
// agentrepo, container, record); this package decides their order and
// undoes a half-made sandbox when a step fails.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Env is what every operation works with. The engine is connected
// lazily: ps and rescue work while the daemon is down.
type Env struct {
	Repo   *worktree.Repo
	Layout worktree.Layout
	Config *config.Loaded
	// UI receives every message, warning and trace line.
	UI *ui.Printer
	// Connect reaches the container engine on first use; nil means the
	// Docker daemon from the environment. Tests put a fake here.
	Connect func(ctx context.Context) (Engine, error)

	engineMu sync.Mutex
	engines  map[string]*engineConn

	// spawn starts the supervisor (spawnSupervisor when nil; tests, whose
	// executable is not git-sandbox, record the call instead).
	spawn func(branch string) error
	// purge deletes the trash (EmptyTrash spawns a detached process when
	// nil; tests delete it in place).
	purge func(trash string) error
	// connectNamed, when set, reaches every engine by name (tests with
	// more than one fake engine).
	connectNamed func(ctx context.Context, name string) (Engine, error)
	// failStep, when set, is asked after each step of create whether to
	// fail there (tests of the rollback).
	failStep func(step string) error
	// after, when set, stands for time.After in the supervisor's pacing of
	// its interval snapshots (tests record the waits and skip them).
	after func(d time.Duration) <-chan time.Time
}

// NewEnv builds an Env for the repository.
func NewEnv(repo *worktree.Repo, cfg *config.Loaded, stateRoot string, p *ui.Printer) *Env {
	if p == nil {
		p = ui.Discard()
	}
	return &Env{
		Repo:   repo,
		Layout: worktree.Layout{Root: stateRoot, RepoID: repo.ID, WorktreesDir: cfg.WorktreesDir},
		Config: cfg,
		UI:     p,
	}
}

// engineConn is one engine's connection, made once.
type engineConn struct {
	once sync.Once
	eng  Engine
	err  error
}

// Engine connects to the container engine the environment names (where
// new sandboxes go unless the config names another) on first use.
func (e *Env) Engine(ctx context.Context) (Engine, error) { return e.EngineNamed(ctx, "") }

// EngineNamed connects, on first use, to the engine of that name in the
// user's config ("" is the one the environment names).
func (e *Env) EngineNamed(ctx context.Context, name string) (Engine, error) {
	e.engineMu.Lock()
	if e.engines == nil {
		e.engines = map[string]*engineConn{}
	}
	c := e.engines[name]
	if c == nil {
		c = &engineConn{}
		e.engines[name] = c
	}
	e.engineMu.Unlock()
	c.once.Do(func() {
		switch {
		case e.connectNamed != nil:
			c.eng, c.err = e.connectNamed(ctx, name)
		case e.Connect != nil:
			c.eng, c.err = e.Connect(ctx)
		case name == "":
			c.eng, c.err = connectDocker(ctx)
		default:
			c.eng, c.err = e.connectConfigured(ctx, name)
		}
	})
	return c.eng, c.err
}

// Close releases the engines' connections.
func (e *Env) Close() {
	e.engineMu.Lock()
	defer e.engineMu.Unlock()
	for _, c := range e.engines {
		if c.eng != nil {
			c.eng.Close()
		}
	}
}

// engine is the sandbox's own engine.
func (s *Sandbox) engine(ctx context.Context) (Engine, error) {
	return s.env.EngineNamed(ctx, s.Record.Engine)
}

// Git is the user's repository with its own (trusted) configuration.
func (e *Env) Git() *gitcmd.Runner { return e.Repo.Git() }

// Sandbox is one existing sandbox.
type Sandbox struct {
	*record.Record
	env *Env
}

// Find loads the sandbox of a branch.
func (e *Env) Find(branch string) (*Sandbox, error) {
	r, err := record.Load(e.Layout.Record(branch))
	if errors.Is(err, record.ErrNotExist) {
		return nil, errNoSandbox(branch)
	}
	if err != nil {
		return nil, err
	}
	return &Sandbox{Record: r, env: e}, nil
}

// ErrNotFound is in the chain of the error Find returns for a branch that
// has no sandbox.
var ErrNotFound = errors.New("no such sandbox")

func errNoSandbox(branch string) error {
	return usererr.Wrap(ErrNotFound, "no sandbox %s in this repository", termsafe.String(branch)).
		Hint("git sandbox ps lists them; git sandbox start %s creates it", termsafe.String(branch))
}

// All loads every sandbox of the repository.
func (e *Env) All() ([]*Sandbox, []error) {
	recs, errs := record.List(e.Layout.RepoDir(), filepath.Base(e.Layout.Record("x")))
	out := make([]*Sandbox, len(recs))
	for i, r := range recs {
		out[i] = &Sandbox{Record: r, env: e}
	}
	return out, errs
}

// Refs names the sandbox's refs.
func (s *Sandbox) Refs() rescue.Refs { return rescue.Refs{Branch: s.Branch} }

// Snapshotter returns the sandbox's snapshotter.
func (s *Sandbox) Snapshotter() *rescue.Snapshotter {
	if s.Copy != nil {
		return s.copySnapshotter()
	}
	return s.env.snapshotter(s.Record.Engine, s.Branch, s.Worktree, s.Start, s.Baseline, s.PrivateGitDir, s.Container)
}

func (e *Env) snapshotter(engine, branch, wt, start, baseline, privateGit, containerName string) *rescue.Snapshotter {
	l := e.Layout
	return &rescue.Snapshotter{
		CommonDir:    e.Repo.CommonDir,
		Branch:       branch,
		Worktree:     wt,
		Index:        l.RescueIndex(branch),
		Scratch:      l.ScratchGitDir(branch),
		Lock:         l.Lock(branch),
		ExcludesFile: e.excludesFile(),
		AgentGitDir:  privateGit,
		Quarantine:   l.Quarantine(branch),
		MaxFileSize:  e.maxFileSize(),
		Budget:       e.snapshotBudget(),
		Usage:        l.SnapshotUsage(branch),
		Start:        start,
		Baseline:     baseline,
		Freeze:       e.freezer(engine, containerName),
		AgentHead: func() string {
			if privateGit == "" {
				return ""
			}
			id, _, err := agentrepo.Head(privateGit)
			if err != nil {
				return ""
			}
			return id
		},
	}
}

// freezer pauses the sandbox's container while a snapshot reads the
// worktree, if it runs. A running container that cannot be paused, or a
// daemon that cannot be asked, fails the snapshot: reading the worktree
// while the agent can swap symlinks in is not safe.
//
// Snapshots hold the sandbox's lock, and so does starting its container,
// so a container found paused here was left paused by a snapshotter that
// died: this one thaws it when done. Ctrl-C and termination wait until the
// agent is thawed.
func (e *Env) freezer(engine, name string) func(ctx context.Context) (func(), error) {
	if name == "" {
		// No container yet (the baseline): no agent has run.
		return nil
	}
	return func(ctx context.Context) (func(), error) {
		d, err := e.EngineNamed(ctx, engine)
		if err != nil {
			return nil, fmt.Errorf("cannot pause the agent to read its files safely: %w", err)
		}
		// Signals wait until the agent runs again, then act.
		release := sigstack.Hold()
		err = d.Pause(ctx, name)
		e.UI.Tracef("pause %s: %v", name, err)
		switch {
		case err == nil:
		case container.IsNotFound(err):
			release()
			return func() {}, nil
		case container.IsConflict(err):
			st, ierr := d.Inspect(ctx, name)
			if ierr != nil || !st.Paused {
				// Not running: nothing can change the files.
				release()
				return func() {}, nil
			}
			// Paused and left so: frozen now, thawed by us afterwards.
		default:
			release()
			return nil, fmt.Errorf("cannot pause the agent to read its files safely: %w", err)
		}
		return func() {
			_ = d.Unpause(context.WithoutCancel(ctx), name)
			release()
		}, nil
	}
}

// excludesFile returns the user's core.excludesFile (their own trusted
// config), expanded, or "" when unset or missing.
func (e *Env) excludesFile() string {
	out, err := e.Git().Output(context.Background(), "config", "--path", "--get", "core.excludesFile")
	if err != nil || out == "" {
		if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
			out = filepath.Join(xdg, "git", "ignore")
		} else if home, herr := os.UserHomeDir(); herr == nil {
			out = filepath.Join(home, ".config", "git", "ignore")
		}
	}
	if _, err := os.Stat(out); err != nil {
		return ""
	}
	return out
}

// Update changes the sandbox's record under its lock.
func (s *Sandbox) Update(fn func(*record.Record) error) error {
	r, err := record.Update(s.env.Layout.Record(s.Branch), s.env.Layout.RecordLock(s.Branch), fn)
	if err != nil {
		return err
	}
	s.Record = r
	return nil
}

// ContainerState returns the sandbox's container, or nil when it is gone.
func (s *Sandbox) ContainerState(ctx context.Context) (*container.State, error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	st, err := d.Inspect(ctx, s.Container)
	if container.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container: %w", err)
	}
	return st, nil
}

// Display returns the branch escaped for printing.
func (s *Sandbox) Display() string { return termsafe.String(s.Branch) }

// shortID abbreviates a commit id for messages.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// maxFileSize is rescue.max_file_size in bytes (0: no limit).
// snapshotBudget is budget.snapshots in bytes (0: no bound).
func (e *Env) snapshotBudget() int64 {
	if e.Config == nil {
		return 0
	}
	n, err := config.MemoryBytes(e.Config.Budget.Snapshots)
	if err != nil {
		return 0
	}
	return n
}

// SnapshotBudget reports the bytes the sandbox's snapshots wrote and the
// budget (0: none); spent says interval snapshots have stopped.
func (s *Sandbox) SnapshotBudget() (used, budget int64, spent bool) {
	used, budget = rescue.ReadUsage(s.env.Layout.SnapshotUsage(s.Branch)), s.env.snapshotBudget()
	return used, budget, budget > 0 && used >= budget
}

func (e *Env) maxFileSize() int64 {
	if e.Config == nil {
		return 0
	}
	n, err := config.FileSizeBytes(e.Config.Rescue.MaxFileSize)
	if err != nil {
		return 0
	}
	return n
}
