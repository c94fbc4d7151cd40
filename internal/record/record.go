// Package record owns a sandbox's record file: the trusted copy of what must
// not be forged. It lives in the state directory, outside every container
// mount, so the agent can neither read nor change it. Land takes the
// baseline, the base branch and the verify verdicts from here, never from a
// file or ref the agent could reach.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/meter"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Version is the record format version this build writes.
const Version = 1

// Record describes one sandbox.
type Record struct {
	Version int    `json:"version"`
	Branch  string `json:"branch"`
	RepoID  string `json:"repo_id"`
	// CommonDir is the user's repository git directory.
	CommonDir string `json:"common_dir"`
	// Base is the branch the work lands on (short name), BaseRef its full
	// ref, and BaseTip its commit when the sandbox started.
	Base    string `json:"base"`
	BaseRef string `json:"base_ref"`
	BaseTip string `json:"base_tip"`
	// Start is the commit the sandbox branch was created at.
	Start string `json:"start"`
	// Baseline is the snapshot the agent's change is measured from.
	Baseline string `json:"baseline"`
	// Worktree and PrivateGitDir are where the sandbox's files and the
	// agent's repository live on the host.
	Worktree      string `json:"worktree"`
	PrivateGitDir string `json:"private_git_dir"`
	// Container is the container's name.
	Container string `json:"container"`
	// Engine is the configured engine the sandbox runs on ("" for the one
	// the environment names); every command about it talks to that one.
	Engine string `json:"engine,omitempty"`
	// Copy is set when the sandbox's files live in volumes on its engine
	// (copy mode) rather than in bind-mounted host directories.
	Copy   *Copy  `json:"copy,omitempty"`
	Image  string `json:"image"`
	Agent  string `json:"agent"`
	Prompt string `json:"prompt,omitempty"`
	// Argv is the agent's command for the original task, which --rerun
	// runs again after follow-ups replaced the container's (nil in records
	// of older versions: the container's command then).
	Argv []string `json:"argv,omitempty"`
	// Tasks are the follow-up tasks given after the first, in order.
	Tasks  []string `json:"tasks,omitempty"`
	Verify string   `json:"verify,omitempty"`
	Setup  string   `json:"setup,omitempty"`
	// WarmImage is the image holding setup's result that the sandbox's
	// container runs (made by its start, or an earlier one's).
	WarmImage string `json:"warm_image,omitempty"`
	Carried   bool   `json:"carried,omitempty"`
	// LoginStore is where the agent's login is copied from before it runs
	// and back to after ("" for sandboxes that mount the old shared home).
	LoginStore string `json:"login_store,omitempty"`
	// Egress is the allowlist mode's policy and what enforces it.
	Egress *Egress `json:"egress,omitempty"`
	// Stopped is set by git sandbox stop and cleared when it runs again.
	Stopped bool      `json:"stopped,omitempty"`
	Created time.Time `json:"created"`
	// Spec is the agent container as created: exec in a stopped sandbox
	// and follow-up tasks make fresh containers from it (same image,
	// mounts, hardening and limits), every later container of the sandbox
	// (verify) runs with its network, runtime and limits or the current
	// configuration's, whichever is stricter, and its ports are the ones
	// published. Absent for sandboxes made before it was recorded.
	Spec *Container `json:"spec,omitempty"`
	// UpdateConflicts are the paths git sandbox update last left with
	// conflict markers; land refuses while any still holds them.
	UpdateConflicts []string `json:"update_conflicts,omitempty"`
	// Verdicts are verify results keyed by the tree id they verified.
	Verdicts map[string]Verdict `json:"verdicts,omitempty"`
	// Usage is what the agent reported spending, per run of its container
	// (keyed by the run's start time); see agent.Usage.
	Usage map[string]agent.Usage `json:"usage,omitempty"`
	// Notified names the events already announced (notify), newest last,
	// so each fires once however many supervisors see it.
	Notified []string `json:"notified,omitempty"`
}

// Copy is what a copy-mode sandbox keeps on its engine.
type Copy struct {
	// Workspace holds the worktree, GitDir the agent's private git
	// directory, State the snapshot helper's own repository and index
	// (never mounted into the agent's container).
	Workspace string `json:"workspace_volume"`
	GitDir    string `json:"git_volume"`
	State     string `json:"state_volume"`
	// Home is the agent's home.
	Home string `json:"home_volume"`
	// Helper is the container that reads the files for snapshots.
	Helper string `json:"helper"`
}

// Egress is a sandbox's allow list, as it was at start, and the engine
// objects that enforce it.
type Egress struct {
	// Allow and Remove are the effective entries with their sources.
	Allow  []egress.Rule `json:"allow"`
	Remove []egress.Rule `json:"remove,omitempty"`
	// Live are the entries allowed and denied since (git sandbox net
	// allow, deny): every new proxy of the sandbox gets them.
	Live *egress.LivePolicy `json:"live,omitempty"`
	// InternalNetwork is the network the agent joins (no route out);
	// EgressNetwork the proxy's way out; Proxy the proxy's container.
	InternalNetwork string `json:"internal_network"`
	EgressNetwork   string `json:"egress_network"`
	Proxy           string `json:"proxy"`
	// ProxyAddr is the proxy's address on the internal network, kept for
	// it there (the agent's hosts file names it); none on an engine that
	// gives its own (Kubernetes) and in records made before it.
	ProxyAddr netip.Addr `json:"proxy_addr,omitzero"`
	// Secrets are the credentials given to the agent as placeholders: the
	// placeholder stays the same on every resume (the container's
	// environment holds it), the hosts are those of the start, and the
	// value is read again from the user's config each time the proxy is
	// made. No value is ever recorded.
	Secrets []Secret `json:"secrets,omitempty"`
	// Inspect are the hosts whose TLS the proxy terminates with no secret
	// (the user's [[host]] inspect = true when the sandbox started).
	Inspect []string `json:"inspect,omitempty"`
	// Forward are the agent's published ports, which the proxy carries
	// to it (the agent's container, on the internal network, publishes
	// none): every new proxy of the sandbox publishes them again.
	Forward []Port `json:"forward,omitempty"`
	// Budget is what the sandbox may spend on model calls through the
	// credential broker (start --budget, budget.model, git sandbox budget).
	Budget meter.Budget `json:"budget,omitzero"`
}

// Secret is a credential of the sandbox, without its value.
type Secret struct {
	Name        string   `json:"name"`
	Hosts       []string `json:"hosts"`
	Placeholder string   `json:"placeholder"`
}

// TotalUsage is the sum of every run's reported usage.
func (r *Record) TotalUsage() agent.Usage {
	var u agent.Usage
	for _, x := range r.Usage {
		u = u.Add(x)
	}
	return u
}

// Network is the network mode the sandbox's container was created with
// ("" when the record predates the spec).
func (r *Record) Network() container.NetworkMode {
	if r.Spec == nil {
		return ""
	}
	return r.Spec.Network
}

// Ports are the container ports published on the host's loopback
// interface: by the engine (open mode), or by the proxy (allowlist mode).
func (r *Record) Ports() []container.Port {
	if r.Egress != nil && len(r.Egress.Forward) > 0 {
		return ToPorts(r.Egress.Forward)
	}
	if r.Spec == nil {
		return nil
	}
	return r.Spec.ContainerPorts()
}

// Verdict is the result of one verify run.
type Verdict struct {
	Tree     string    `json:"tree"`
	OK       bool      `json:"ok"`
	ExitCode int       `json:"exit_code"`
	Command  string    `json:"command"`
	Time     time.Time `json:"time"`
}

// ErrNotExist is returned by Load when there is no record.
var ErrNotExist = errors.New("no sandbox record")

// Load reads a record file.
func Load(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("read sandbox record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("parse sandbox record %s: %w", path, err)
	}
	if r.Version > Version {
		return nil, fmt.Errorf("sandbox record %s was written by a newer git sandbox (format %d)", path, r.Version)
	}
	return &r, nil
}

// Save writes a record atomically (write, fsync, rename).
func Save(path string, r *Record) error {
	r.Version = Version
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".record-*")
	if err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write sandbox record: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write sandbox record: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	return nil
}

// Update loads the record at path under its lock, applies fn and saves it.
func Update(path, lockPath string, fn func(*Record) error) (*Record, error) {
	unlock, err := Lock(lockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := Load(path)
	if err != nil {
		return nil, err
	}
	if err := fn(r); err != nil {
		return nil, err
	}
	return r, Save(path, r)
}

// LockWait is how long Lock waits for another holder before it gives up.
// A snapshot holds a sandbox's lock for seconds; a holder stuck for longer
// is reported, not waited for forever.
var LockWait = 2 * time.Minute

// Lock takes an exclusive lock on lockPath (created if missing), waiting
// for other holders at most LockWait. The returned function releases it.
func Lock(lockPath string) (func(), error) {
	return LockFor(lockPath, LockWait)
}

// ErrLockTimeout is returned when a lock stayed held for the whole wait.
var ErrLockTimeout = errors.New("lock held by another process")

// ErrBusy is returned by TryLock when the lock is held, or when a Lock
// waits for it.
var ErrBusy = errors.New("lock busy")

// LockFor is Lock with its own wait; 0 waits for as long as it takes. The
// wait polls, so the process never sits in a system call it cannot leave.
// While it waits it says so in the lock's waiters file (a shared flock on
// lockPath+".wait", gone with the process however it ends), and TryLock
// leaves the lock to it: background work that comes back every second
// cannot take the lock again and again between two of this wait's polls.
func LockFor(lockPath string, wait time.Duration) (func(), error) {
	return LockHinted(lockPath, wait, "a snapshot, verify or supervisor of this sandbox is stuck or still busy; try again, or find it with ps and end it")
}

// LockHinted is LockFor whose timeout says hint: what else takes this
// lock, and what to do about it.
func LockHinted(lockPath string, wait time.Duration, hint string) (func(), error) {
	f, err := openLock(lockPath)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	pause := 10 * time.Millisecond
	var waiting *os.File
	defer func() {
		if waiting != nil {
			waiting.Close() // releases the shared flock
		}
	}()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		if wait > 0 && time.Now().After(deadline) {
			f.Close()
			return nil, usererr.Wrap(ErrLockTimeout, "gave up after %s waiting for %s: another git sandbox process holds it", wait, lockPath).
				Hint("%s", hint)
		}
		if waiting == nil {
			waiting, err = announceWait(lockPath)
			if err != nil {
				f.Close()
				return nil, err
			}
		}
		time.Sleep(pause)
		pause = min(pause*2, 200*time.Millisecond)
	}
	return unlocker(f), nil
}

// TryLock takes the lock on lockPath only if it is free and no LockFor
// waits for it, and returns ErrBusy at once otherwise. It is for
// background work (the supervisor's interval snapshots), which yields to
// whatever a user's command waits to do.
func TryLock(lockPath string) (func(), error) {
	f, err := openLock(lockPath)
	if err != nil {
		return nil, err
	}
	w, err := openLock(WaitersPath(lockPath))
	if err != nil {
		f.Close()
		return nil, err
	}
	// Held exclusively, the waiters file says nobody waits; a waiter that
	// comes meanwhile finds it held and tries again at its next poll, by
	// when this has either the lock (and the waiter waits for this one
	// holder) or nothing.
	defer w.Close()
	if err := syscall.Flock(int(w.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, busy(lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, busy(lockPath, err)
	}
	return unlocker(f), nil
}

// WaitersPath is the file in which LockFor says it waits for lockPath.
func WaitersPath(lockPath string) string { return lockPath + ".wait" }

// announceWait takes a shared flock on lockPath's waiters file, kept until
// the returned file is closed. A TryLock holds that file exclusively for
// an instant; a waiter that meets it is not yet counted and tries again at
// its next poll.
func announceWait(lockPath string) (*os.File, error) {
	w, err := openLock(WaitersPath(lockPath))
	if err != nil {
		return nil, err
	}
	err = syscall.Flock(int(w.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK || err == syscall.EINTR {
		w.Close()
		return nil, nil
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return w, nil
}

// busy turns a failed non-blocking flock into ErrBusy, or into the error
// it is.
func busy(lockPath string, err error) error {
	if err == syscall.EWOULDBLOCK || err == syscall.EINTR {
		return ErrBusy
	}
	return fmt.Errorf("lock %s: %w", lockPath, err)
}

// openLock opens (creating it if missing) a lock file, never through a
// symbolic link.
func openLock(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil
}

// unlocker releases the flock on f and closes it.
func unlocker(f *os.File) func() {
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// List returns the records of every sandbox under repoDir, sorted by
// branch. Unreadable records are skipped and reported in errs.
func List(repoDir string, recordName string) (recs []*Record, errs []error) {
	entries, err := os.ReadDir(repoDir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		return nil, errs
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r, err := Load(filepath.Join(repoDir, e.Name(), recordName))
		if errors.Is(err, ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Branch < recs[j].Branch })
	return recs, errs
}
