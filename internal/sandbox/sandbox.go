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
	"path/filepath"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
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
	// Engines reaches the engines sandboxes run on, by name (nil: as the
	// user's config says, through internal/engines).
	Engines Connector
	// Background starts the tool's own processes that outlive a command:
	// supervisors and the trash's purge (nil: detached processes of this
	// binary).
	Background Background
	// Clock paces the supervisor's interval snapshots (nil: real time).
	Clock Clock
	// Faults fails a flow after a named step (tests of rollback; nil:
	// never).
	Faults Faults
	// ProxyBinary is the binary the egress proxy's image holds (nil: this
	// git-sandbox, checked to be static; tests, whose executable is no
	// git-sandbox, name another).
	ProxyBinary ProxyBinary

	engineMu sync.Mutex
	engines  map[string]*engineConn

	excludesOnce sync.Once
	excludes     string
}

// excludesFile is the user's core.excludesFile, read from their config
// once (a git process) when a workspace first needs it.
func (e *Env) excludesFile() string {
	e.excludesOnce.Do(func() { e.excludes = e.Repo.ExcludesFile() })
	return e.excludes
}

// Connector reaches container engines by the name the user's config
// gives them ("" is the environment's Docker daemon).
type Connector interface {
	Connect(ctx context.Context, name string) (Engine, error)
}

// ConnectorFunc is a function that is a Connector.
type ConnectorFunc func(ctx context.Context, name string) (Engine, error)

// Connect calls f.
func (f ConnectorFunc) Connect(ctx context.Context, name string) (Engine, error) { return f(ctx, name) }

// configConnector connects as the user's config says.
type configConnector struct{ cfg *config.Loaded }

func (c configConnector) Connect(ctx context.Context, name string) (Engine, error) {
	return engines.Connect(ctx, c.cfg, name)
}

// Background starts the tool's own processes that outlive a command.
type Background interface {
	// Supervise starts the supervisor of a sandbox whose agent was just
	// started.
	Supervise(branch string) error
	// Purge deletes what removed sandboxes left in a trash directory.
	Purge(trash string) error
}

// Clock is the supervisor's sense of time.
type Clock interface {
	After(d time.Duration) <-chan time.Time
}

// realClock is time itself.
type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ProxyBinary says which binary the egress proxy's image holds.
type ProxyBinary = network.ProxyBinary

// ProxyBinaryFunc is a function that is a ProxyBinary.
type ProxyBinaryFunc = network.ProxyBinaryFunc

// Faults fails flows at named steps.
type Faults interface {
	// At returns the error to fail with after step, or nil.
	At(step string) error
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
		conn := e.Engines
		if conn == nil {
			conn = configConnector{e.Config}
		}
		c.eng, c.err = conn.Connect(ctx, name)
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
	// interrupted marks the sandbox of a start that was killed midway:
	// its teardown leaves a branch alone that moved from the start commit
	// (the user may have taken the name up since).
	interrupted bool
}

// Find loads the sandbox of a branch.
func (e *Env) Find(branch string) (*Sandbox, error) {
	r, err := record.Load(e.Layout.Record(branch))
	if errors.Is(err, record.ErrNotExist) {
		return nil, e.errNoSandbox(branch)
	}
	if err != nil {
		return nil, err
	}
	return &Sandbox{Record: r, env: e}, nil
}

// ErrNotFound is in the chain of the error Find returns for a branch that
// has no sandbox.
var ErrNotFound = errors.New("no such sandbox")

func (e *Env) errNoSandbox(branch string) error {
	err := usererr.Wrap(ErrNotFound, "no sandbox %s in this repository", termsafe.String(branch))
	all, _ := e.All()
	names := make([]string, len(all))
	for i, sb := range all {
		names[i] = sb.Branch
	}
	if near := usererr.Closest(branch, names); near != "" {
		return err.Hint("did you mean %s?", termsafe.String(near)).Hint("git sandbox ps lists them")
	}
	return err.Hint("git sandbox ps lists them; git sandbox start %s creates it", termsafe.String(branch))
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

// Workspace is the sandbox's files and git, wherever they are.
func (s *Sandbox) Workspace() workspace.Workspace {
	return workspace.Open(s.env.workspaceEnv(s.Record.Engine), s.Record)
}

// workspaceEnv is what the workspaces of sandboxes on the named engine
// work with.
func (e *Env) workspaceEnv(engine string) *workspace.Env {
	budget, _ := e.syncBudget()
	return &workspace.Env{
		Repo: e.Repo, Layout: e.Layout, UI: e.UI,
		Engine: func(ctx context.Context) (workspace.Engine, error) {
			return e.EngineNamed(ctx, engine)
		},
		ExcludesFile: e.excludesFile,
		MaxFileSize:  e.Config.MaxFileSizeBytes(),
		SyncBudget:   budget,
	}
}

// Snapshotter returns the sandbox's snapshotter. Once the baseline is
// taken an agent may run: its container is frozen while its files are
// read.
func (s *Sandbox) Snapshotter() *rescue.Snapshotter {
	ws := s.Workspace()
	var freeze workspace.Freeze
	if s.Baseline != "" {
		engine := s.Record.Engine
		connect := func(ctx context.Context) (container.Engine, error) { return s.env.EngineNamed(ctx, engine) }
		freeze = workspace.Freezer(connect, s.Container, s.env.UI.Tracef)
	}
	l := s.env.Layout
	return &rescue.Snapshotter{
		CommonDir: s.env.Repo.CommonDir,
		Branch:    s.Branch,
		Scratch:   l.ScratchGitDir(s.Branch),
		Lock:      l.Lock(s.Branch),
		Source:    ws.Source(freeze),
		Budget:    s.env.Config.SnapshotBudgetBytes(),
		Usage:     l.SnapshotUsage(s.Branch),
		Start:     s.Start,
		Baseline:  s.Baseline,
		Current: func() (string, string) {
			r, err := s.loadRecord()
			if err != nil {
				return "", ""
			}
			return r.Start, r.Baseline
		},
		AgentHead: ws.AgentHead,
	}
}

// loadRecord reads the sandbox's record as it is now on disk (another
// process may have changed it since this one loaded it).
func (s *Sandbox) loadRecord() (*record.Record, error) {
	return record.Load(s.env.Layout.Record(s.Branch))
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

// SnapshotBudget reports the bytes the sandbox's snapshots wrote and the
// budget (0: none); spent says interval snapshots have stopped.
func (s *Sandbox) SnapshotBudget() (used, budget int64, spent bool) {
	used, budget = rescue.ReadUsage(s.env.Layout.SnapshotUsage(s.Branch)), s.env.Config.SnapshotBudgetBytes()
	return used, budget, budget > 0 && used >= budget
}

// Toolchain is what runs setup, keeps warm images and makes caches for the
// repository's sandboxes.
func (e *Env) Toolchain() *toolchain.Env {
	return &toolchain.Env{Repo: e.Repo, Config: e.Config, UI: e.UI}
}

// Caches lists the repository's cache volumes on the engine the
// environment names.
func (e *Env) Caches(ctx context.Context) ([]toolchain.Cache, error) {
	d, err := e.Engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.Toolchain().CachesOn(ctx, d)
}

// CachesOn lists the repository's cache volumes on an engine.
func (e *Env) CachesOn(ctx context.Context, d Engine) ([]toolchain.Cache, error) {
	return e.Toolchain().CachesOn(ctx, d)
}

// setupSnapshot takes the snapshot of what setup wrote into the worktree
// as the sandbox's new baseline (what setup wrote is not the agent's
// work), and returns the trees before and after when setup wrote there.
func (s *Sandbox) setupSnapshot(ctx context.Context) (from, to string, err error) {
	before := s.Baseline
	taken, err := s.Snapshotter().Take(ctx, rescue.ReasonSetup)
	if err != nil || !taken.New {
		return "", "", err
	}
	if err := s.Update(func(r *record.Record) error { r.Baseline = taken.ID; return nil }); err != nil {
		return "", "", err
	}
	start, err := rescue.Read(ctx, s.env.Git(), before)
	if err != nil {
		return "", "", err
	}
	return start.Tree, taken.Tree, nil
}

// placer chooses engines for new sandboxes.
func (e *Env) placer() engines.Placer {
	return engines.Placer{Config: e.Config, Connect: e.EngineNamed, UI: e.UI}
}

// network is what makes a sandbox's networks, proxy, secrets' files and
// home.
func (e *Env) network() *network.Env {
	return &network.Env{Repo: e.Repo, Layout: e.Layout, Config: e.Config, UI: e.UI, Faults: e.Faults, ProxyBinary: e.ProxyBinary}
}

// NetLog is the sandbox's egress decision log on the host.
func (s *Sandbox) NetLog() string { return s.env.network().NetLog(s.Branch) }

// CLIDenials are the hosts the sandbox's agent CLI needs that its proxy
// denied.
func (s *Sandbox) CLIDenials() []network.CLIDenial { return s.env.network().CLIDenials(s.Record) }

// Live is what changes the sandbox's egress policy while it exists
// (ChangeEgress, AllowOnce, Held of network.Env) and the sandbox to it.
func (s *Sandbox) Live() (*network.Env, network.LiveTarget) {
	engine := func(ctx context.Context) (network.Engine, error) { return s.engine(ctx) }
	return s.env.network(), network.LiveTarget{Branch: s.Branch, Update: s.Update, Remote: s.Workspace().Remote(), Engine: engine}
}
