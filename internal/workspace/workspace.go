// Package workspace owns how a sandbox's files and its git reach the
// engine its agent runs on, and everything that follows from that: making
// them, the agent container's mounts of them, how snapshots read them, how
// the agent's commits come back and the base's commits go in, and removing
// them. Every guarantee above it (snapshots, land's checks, nested
// repositories, budgets) is written once, against this interface.
//
// Bind: the worktree is a linked worktree on this machine and the agent's
// private repository a directory of the state directory; both are
// bind-mounted. Volume (copy mode, for engines that cannot see this
// machine's files): both live in volumes on the engine, which a helper
// container reads and writes with a configuration-free git; packs travel
// over exec streams and are checked before this machine keeps anything.
package workspace

import (
	"context"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Kind is how the files reach the engine.
type Kind string

// The kinds of workspace.
const (
	// KindBind mounts this machine's worktree and private repository.
	KindBind Kind = "bind"
	// KindVolume keeps them in volumes on the engine (copy mode).
	KindVolume Kind = "volume"
)

// Workspace is one sandbox's files and git.
type Workspace interface {
	// Kind says how the files reach the engine.
	Kind() Kind
	// Where names the worktree for messages: a path on this machine, or a
	// volume on an engine.
	Where() string
	// Remote reports whether the files live on the engine: then losing
	// the engine loses at most the work since the newest snapshot (which
	// is on this machine), and forgetting the sandbox here needs no
	// engine.
	Remote() bool
	// Create makes the worktree at the start commit (with the carried
	// work), registering in u how to remove what it made.
	Create(ctx context.Context, u *steps.Undo, o CreateOptions) error
	// PooledMounts are the agent's mounts of the workspace when Create
	// took it from the engine's warm pool (its volumes have the pool's
	// names), nil when the planned mounts hold.
	PooledMounts() []container.Mount
	// CreateAgentRepo makes the agent's private repository (once the
	// baseline is taken).
	CreateAgentRepo(ctx context.Context, u *steps.Undo, o CreateOptions) error
	// Source reads the worktree for snapshots; freeze, when set, pauses the
	// agent while its files are read.
	Source(freeze Freeze) rescue.Source
	// AgentHead is the agent's HEAD commit read without running anything
	// in its repository ("" when it is not known without a round trip).
	AgentHead() string
	// Sync brings the agent's commits since the start back into the
	// user's store as checked objects; known is what an earlier sync
	// brought.
	Sync(ctx context.Context, known string, budget agentrepo.Budget) (*agentrepo.SyncResult, error)
	// GiveUpdate writes an update into the agent's repository: the base's
	// new commits, its base branch at the tip, and HEAD moved (or a merge
	// left for the agent to finish).
	GiveUpdate(ctx context.Context, up AgentUpdate) error
	// BranchMoved follows the sandbox branch, just moved to head, where
	// the worktree's files are.
	BranchMoved(ctx context.Context, head string) error
	// Quarantine moves the git directories of nested repositories the
	// agent made out of the worktree (the agent is not running): a git
	// run in them would read configuration the agent wrote.
	Quarantine(ctx context.Context) error
	// Unquarantine puts them back, before the agent runs again, and
	// returns them, naming each where a git of this machine could run in
	// it (WarnNested).
	Unquarantine(ctx context.Context) ([]worktree.Nested, error)
	// WarnNested names the nested repositories of a running agent where a
	// git of this machine could run in them and read the configuration
	// the agent wrote: a worktree here (none on an engine).
	WarnNested(repos []string)
	// NestedKept says where quarantined git directories are kept, and
	// NestedCopyHint how to copy a nested repository's files out first
	// (first names one), for messages.
	NestedKept() string
	NestedCopyHint(first string) string
	// HostHome is the agent's home on this machine ("" when it is a
	// volume on the engine).
	HostHome() string
	// Remove removes the worktree and the agent's repository (moved into
	// trash on this machine; removed on engine d, unless d is nil: the
	// engine is gone), whatever it can, and returns what failed.
	Remove(ctx context.Context, trash string, d Engine) []error
}

// Freeze stops the agent from changing its files and returns what lets it
// go on.
type Freeze func(ctx context.Context) (func(), error)

// CreateOptions are what a new sandbox's workspace is made from.
type CreateOptions struct {
	// Carry copies the main checkout's uncommitted work in (bind only).
	Carry bool
	// UserName and UserEmail are the identity of the agent's commits.
	UserName, UserEmail string
	// HooksDir is the user's hooks directory (bind: the agent's hooks).
	HooksDir string
	// Agent is the agent's container; the copy-mode helper is made like
	// it (volume only).
	Agent *container.Spec
}

// AgentUpdate is what update decided for the agent's repository.
type AgentUpdate struct {
	// Head is the agent's HEAD before, Tip the base's new tip, NewHead
	// what HEAD becomes (Tip, or a merge of Head and Tip).
	Head, Tip, NewHead gitcmd.Hash
	// Merging leaves HEAD where it is with MERGE_HEAD naming Tip and
	// Message in MERGE_MSG: the agent's next commit is the merge.
	Merging bool
	Message string
}

// Engine is what a workspace asks of the container engine.
type Engine interface {
	Create(ctx context.Context, spec *container.Spec) (string, error)
	Start(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	Inspect(ctx context.Context, id string) (*container.State, error)
	Exec(ctx context.Context, id string, o container.ExecOptions) (int, error)
	CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	ListVolumes(ctx context.Context, labels ...string) ([]container.Volume, error)
	Abilities() container.Abilities
}

// Env is what every workspace works with.
type Env struct {
	Repo   *worktree.Repo
	Layout worktree.Layout
	UI     *ui.Printer
	// Engine reaches the sandbox's engine on first use.
	Engine func(ctx context.Context) (Engine, error)
	// ExcludesFile reads the user's core.excludesFile ("" for none) when
	// a snapshot or a copy needs it (nil: none); it runs git, so it is not
	// asked while a workspace is only described.
	ExcludesFile func() string
	// MaxFileSize leaves out of snapshots untracked files larger than
	// this (0: no limit).
	MaxFileSize int64
	// SyncBudget bounds what comes back from the agent.
	SyncBudget agentrepo.Budget
}

// excludesFile is the user's core.excludesFile, "" for none.
func (e *Env) excludesFile() string {
	if e.ExcludesFile == nil {
		return ""
	}
	return e.ExcludesFile()
}

// Line is one line of a workspace's description: what, and where.
type Line struct{ Label, Text string }

// Describe says where a sandbox's files and git are, for a plan.
func Describe(rec *record.Record) []Line {
	if c := rec.Copy; c != nil {
		return []Line{
			{"worktree", "volume " + c.Workspace + " on the engine (copy mode)"},
			{"agent git", "volume " + c.GitDir + " on the engine"},
			{"helper", c.Helper + " (volume " + c.State + ")"},
		}
	}
	return []Line{{"worktree", rec.Worktree}, {"agent git", rec.PrivateGitDir}}
}

// Open returns the workspace of the sandbox rec describes.
func Open(env *Env, rec *record.Record) Workspace {
	if OnEngine(rec) {
		return &Volume{env: env, rec: rec}
	}
	return &Bind{env: env, rec: rec}
}

// OnEngine says whether r's files live on its engine (copy mode) without
// opening its workspace: what works only with this machine's files (the
// credential broker, its usage log) asks here.
func OnEngine(r *record.Record) bool { return r.Copy != nil }
