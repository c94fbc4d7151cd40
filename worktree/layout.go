package worktree

import (
	"os"
	"path/filepath"
	"strings"
)

// WorktreeDirName is the last element of every sandbox worktree path.
const WorktreeDirName = "worktree"

// StateRoot returns the directory that holds every sandbox's state:
// $GIT_SANDBOX_STATE_DIR, else ${XDG_STATE_HOME:-~/.local/state}/git-sandbox.
func StateRoot() (string, error) {
	if d := os.Getenv("GIT_SANDBOX_STATE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "git-sandbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "git-sandbox"), nil
}

// Layout names every path of the sandboxes of one repository. Nothing in it
// is mounted into a container except where a method says so.
type Layout struct {
	// Root is the state root (see StateRoot).
	Root string
	// RepoID is the repository's Repo.ID.
	RepoID string
	// WorktreesDir, when set, holds the worktrees instead of Root.
	WorktreesDir string
}

// RepoDir holds the state of every sandbox of the repository.
func (l Layout) RepoDir() string { return filepath.Join(l.Root, l.RepoID) }

// Trash holds what a removed sandbox left, moved aside at once and deleted
// in the background. No branch escapes to ".trash" (git refuses a name
// component that starts with a dot).
func (l Layout) Trash() string { return filepath.Join(l.RepoDir(), ".trash") }

// ForecastCache keeps the conflict forecast's merge results (a file, so
// listing the sandboxes never mistakes it for one).
func (l Layout) ForecastCache() string { return filepath.Join(l.RepoDir(), ".forecast.json") }

// FleetDir holds the repository's fleets and its landing queue (a dot
// name, like Trash, so no sandbox's directory can be it).
func (l Layout) FleetDir() string { return filepath.Join(l.RepoDir(), ".fleet") }

// WorktreeLock serialises the creation of the repository's linked
// worktrees by git sandbox (see AddOptions.Lock).
func (l Layout) WorktreeLock() string { return filepath.Join(l.RepoDir(), ".worktree.lock") }

// LandLock serialises the lands onto one branch (full ref name) of the
// repository: the lock of the base's compare-and-swap and its checkout's
// update.
func (l Layout) LandLock(ref string) string {
	return filepath.Join(l.LandDir(), EscapeBranch(ref)+".lock")
}

// LandJournal is where a land writes down the move of the branch under
// way (land's journal), beside its LandLock.
func (l Layout) LandJournal(ref string) string {
	return filepath.Join(l.LandDir(), EscapeBranch(ref)+".journal")
}

// LandDir holds the land locks and journals of the repository's branches.
func (l Layout) LandDir() string { return filepath.Join(l.RepoDir(), ".land") }

// VisibleStore holds the repository's visible store (internal/visible):
// the objects its branches and tags reach, which every agent's repository
// borrows from. Its objects directory is mounted read-only into agents'
// containers; the user's own object store never is.
func (l Layout) VisibleStore() string { return filepath.Join(l.RepoDir(), ".visible") }

// Dir is one sandbox's state directory. The branch is escaped into a single
// path element ('%' → %25, '/' → %2F), so a sandbox is one directory entry
// and listing the repository's sandboxes is one ReadDir.
func (l Layout) Dir(branch string) string {
	return filepath.Join(l.RepoDir(), EscapeBranch(branch))
}

// Worktree is the sandbox's linked worktree, mounted read-write at /workspace.
func (l Layout) Worktree(branch string) string {
	if l.WorktreesDir != "" {
		return filepath.Join(l.WorktreesDir, l.RepoID, EscapeBranch(branch), WorktreeDirName)
	}
	return filepath.Join(l.Dir(branch), WorktreeDirName)
}

// PrivateGitDir is the agent's own repository: mounted read-write, owned by
// the agent, never opened by a host git process.
func (l Layout) PrivateGitDir(branch string) string { return filepath.Join(l.Dir(branch), "git") }

// GivenObjects is the object directory of what the sandbox was given
// beyond the visible store (its start commit when no branch holds it, the
// work carried in, update's merge), mounted read-only: the agent's
// repository borrows from it.
func (l Layout) GivenObjects(branch string) string { return filepath.Join(l.Dir(branch), "given") }

// Gitfile is the generated gitfile mounted read-only over /workspace/.git.
func (l Layout) Gitfile(branch string) string { return filepath.Join(l.Dir(branch), "gitfile") }

// Record is the sandbox's trusted record file.
func (l Layout) Record(branch string) string { return filepath.Join(l.Dir(branch), "record.json") }

// Lock serialises what reads or writes one sandbox's files from the host —
// snapshots, restores into the worktree — with starts of its container, so
// a snapshot that found the container stopped is done reading before the
// agent runs again. Record writes take their own lock, RecordLock.
func (l Layout) Lock(branch string) string { return filepath.Join(l.Dir(branch), "lock") }

// RecordLock serialises changes of the sandbox's record.
func (l Layout) RecordLock(branch string) string { return l.Lock(branch) + ".record" }

// SupervisorLock is held by the one supervisor of the sandbox.
func (l Layout) SupervisorLock(branch string) string {
	return filepath.Join(l.Dir(branch), "supervisor.lock")
}

// VerifyLock serialises verify runs of the sandbox.
func (l Layout) VerifyLock(branch string) string {
	return filepath.Join(l.Dir(branch), "verify.lock")
}

// VerifyDir is the scratch directory a verify run exports its tree into;
// it is removed after each run.
func (l Layout) VerifyDir(branch string) string {
	return filepath.Join(l.Dir(branch), "verify")
}

// CommitHooksDir is the scratch directory land runs the user's commit hooks
// in; it is removed after each run.
func (l Layout) CommitHooksDir(branch string) string {
	return filepath.Join(l.Dir(branch), "commit-hooks")
}

// RescueIndex is the private index snapshots are written through.
func (l Layout) RescueIndex(branch string) string {
	return filepath.Join(l.Dir(branch), "rescue.index")
}

// ScratchGitDir is the configuration-free git directory snapshots run in.
func (l Layout) ScratchGitDir(branch string) string {
	return filepath.Join(l.Dir(branch), "scratch")
}

// Quarantine is where the git directories of nested repositories in the
// worktree are kept while the agent is not running (see Quarantine).
func (l Layout) Quarantine(branch string) string {
	return filepath.Join(l.Dir(branch), "quarantine")
}

// SnapshotUsage counts the bytes the sandbox's snapshots wrote into the
// object store (budget.snapshots).
func (l Layout) SnapshotUsage(branch string) string {
	return filepath.Join(l.Dir(branch), "snapshot-bytes")
}

// WatchSocket is where the supervisor's watcher of the worktree answers
// snapshots (bind mode).
func (l Layout) WatchSocket(branch string) string {
	return filepath.Join(l.Dir(branch), "watch.sock")
}

// SupervisorLog is where the detached supervisor writes.
func (l Layout) SupervisorLog(branch string) string {
	return filepath.Join(l.Dir(branch), "supervisor.log")
}

// ProxyDir holds the egress proxy's configuration (mode 0600), mounted
// read-only into the proxy's container only.
func (l Layout) ProxyDir(branch string) string {
	return filepath.Join(l.Dir(branch), "proxy")
}

// TrustDir holds the certificates the agent's container trusts when the
// sandbox has secrets: the sandbox CA's certificate (never its key, which
// stays in ProxyDir) and a bundle of this machine's roots plus that CA.
// Mounted read-only into the agent's container.
func (l Layout) TrustDir(branch string) string {
	return filepath.Join(l.Dir(branch), "trust")
}

// NetLogDir holds the egress decision log, mounted read-write into the
// proxy's container only; NetLog is the log itself (JSON lines).
func (l Layout) NetLogDir(branch string) string {
	return filepath.Join(l.Dir(branch), "net")
}

// NetLog is the egress decision log of a sandbox.
func (l Layout) NetLog(branch string) string {
	return filepath.Join(l.NetLogDir(branch), "egress.jsonl")
}

// Home is the sandbox's own home directory, mounted read-write as the
// container's home: new for every sandbox.
func (l Layout) Home(branch string) string { return filepath.Join(l.Dir(branch), "home") }

// Logins is where an agent's login files persist between sandboxes: one
// store per agent, or per agent and repository when repoID is set.
func (l Layout) Logins(agent, repoID string) string {
	if repoID != "" {
		return filepath.Join(l.Root, "logins", agent+"@"+repoID)
	}
	return filepath.Join(l.Root, "logins", agent)
}

// AgentHome is the home directory an agent had, shared by all its
// sandboxes, before homes were per sandbox: its login is taken from there
// into the agent's login store once.
func (l Layout) AgentHome(agent string) string {
	return filepath.Join(l.Root, "agents", agent)
}

// EscapeBranch turns a branch name into one path element.
func EscapeBranch(b string) string {
	b = strings.ReplaceAll(b, "%", "%25")
	return strings.ReplaceAll(b, "/", "%2F")
}

// UnescapeBranch is EscapeBranch undone.
func UnescapeBranch(s string) string {
	return strings.NewReplacer("%2F", "/", "%25", "%").Replace(s)
}

// UsageArchive keeps the usage logs of removed sandboxes (git sandbox
// usage reads them), one file per sandbox: BRANCH@START.jsonl with the
// branch's slashes as %2F.
func (l Layout) UsageArchive() string { return filepath.Join(l.RepoDir(), ".usage") }
