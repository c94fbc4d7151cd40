package workspace

// Copy mode: the sandbox's files on an engine that cannot see this
// machine's (a remote Docker Engine, a Kubernetes cluster). Nothing of the
// host is mounted. Volumes on the engine hold the worktree, the agent's
// private git directory, its home, and the state of a helper container
// that the agent's container never mounts. Create ships the objects of the
// start commit as a pack through an exec stream into the helper, which
// checks out; snapshots are taken by the helper with a configuration-free
// git (the agent paused while it reads) and come back as a pack that the
// host indexes with index-pack --strict and checks (agentrepo.ImportTree)
// before the snapshot's commit is written on the host. The host keeps
// every snapshot: losing the engine loses at most one rescue interval.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// Paths inside a copy-mode sandbox's containers.
const (
	// CopyGitDir is the agent's private git directory (a volume).
	CopyGitDir = "/sandbox/git"
	// copyState is the helper's own repository and index (a volume the
	// agent's container never mounts).
	copyState   = "/sandbox-state"
	copyScratch = copyState + "/scratch"
	copyIndex   = copyState + "/index"
	copyHome    = "/sandbox/home"
	// copyExcludes is the user's core.excludesFile, copied at start.
	copyExcludes = copyState + "/excludes"
)

// VolumeNames names a copy-mode sandbox's volumes and helper after its
// container.
func VolumeNames(containerName string) record.Copy {
	return record.Copy{
		Workspace: containerName + "-ws",
		GitDir:    containerName + "-git",
		Home:      containerName + "-home",
		State:     containerName + "-state",
		Helper:    containerName + "-helper",
	}
}

// VolumeMounts are the agent container's mounts in copy mode: volumes only.
func VolumeMounts(c record.Copy) []container.Mount {
	return []container.Mount{
		{Source: c.Workspace, Target: container.Workspace, Volume: true, NoCopy: true, Why: "the sandbox worktree, in a volume on the engine"},
		{Source: c.GitDir, Target: CopyGitDir, Volume: true, NoCopy: true, Why: "the agent's own repository, in a volume on the engine"},
		{Source: c.Home, Target: container.Home, Volume: true, NoCopy: true, Why: "the agent's home, in a volume on the engine"},
	}
}

// HelperSpec is the copy-mode helper of the sandbox whose container agent
// describes: the sandbox's image (it has git), hardened as the agent is,
// with a read-only root (what it writes goes into the volumes, its
// temporary files into its own), no network, waiting for execs.
func HelperSpec(c record.Copy, branch string, agent *container.Spec) *container.Spec {
	spec := &container.Spec{
		Name:         c.Helper,
		Image:        agent.Image,
		User:         agent.User,
		WorkDir:      "/",
		Hostname:     "git-sandbox-helper",
		Network:      container.NetworkNone,
		Runtime:      agent.Runtime,
		Limits:       container.Limits{Pids: 512, MemoryBytes: agent.Limits.MemoryBytes},
		Argv:         []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"},
		Env:          []string{"HOME=" + copyState, "TMPDIR=" + copyState},
		ReadOnlyRoot: true,
		Labels: map[string]string{
			container.LabelManaged: "1",
			container.LabelRepo:    agent.Labels[container.LabelRepo],
			container.LabelBranch:  branch,
			container.LabelRole:    container.RoleHelper,
			container.LabelVersion: version.Version,
		},
		Mounts: []container.Mount{
			{Source: c.Workspace, Target: container.Workspace, Volume: true, NoCopy: true, Why: "the worktree it checks out and reads"},
			{Source: c.GitDir, Target: CopyGitDir, Volume: true, NoCopy: true, Why: "the agent's repository it creates"},
			{Source: c.Home, Target: copyHome, Volume: true, NoCopy: true, Why: "the agent's home, made writable for it"},
			{Source: c.State, Target: copyState, Volume: true, NoCopy: true, Why: "its own repository and index"},
		},
	}
	spec.Harden()
	return spec
}

// helperGit is the configuration-free git of the helper: no system or
// global file, and every setting that could run something or change what
// is read fixed on the command line.
var helperGitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
	"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "HOME=" + copyState, "TMPDIR=" + copyState, "LC_ALL=C",
}

const helperGit = `git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false ` +
	`-c core.excludesFile=/dev/null -c core.attributesFile=/dev/null -c core.symlinks=true -c core.fileMode=true ` +
	`-c core.ignoreCase=false -c core.autocrlf=false -c core.safecrlf=false -c core.splitIndex=false ` +
	`-c index.skipHash=false -c gc.auto=0 -c maintenance.auto=false -c advice.addEmbeddedRepo=false ` +
	`-c submodule.recurse=false -c diff.ignoreSubmodules=all -c protocol.ext.allow=never`

// initScript makes the helper's repository and the agent's, indexes the
// pack on stdin, checks the start commit out and seeds the snapshot index.
// $1 the agent repository's config, $2 the branch, $3 the start commit,
// $4 the repository's info/exclude and $5 the user's core.excludesFile
// (what snapshots leave out, as locally).
const initScript = `set -eu
G=` + CopyGitDir + ` S=` + copyScratch + `
mkdir -p "$S/objects/pack" "$S/refs" "$S/info" "$G/objects/pack" "$G/objects/info" "$G/refs/heads" "$G/refs/tags" "$G/info"
echo 'ref: refs/heads/snapshot' >"$S/HEAD"
printf '%s' "$4" >"$S/info/exclude"
printf '%s' "$5" >` + copyExcludes + `
` + helperGit + ` --git-dir="$S" index-pack --stdin >/dev/null
cp "$S"/objects/pack/* "$G/objects/pack/"
printf '%s' "$1" >"$G/config"
printf 'ref: refs/heads/%s\n' "$2" >"$G/HEAD"
printf '# pack-refs with: sorted \n%s refs/heads/%s\n' "$3" "$2" >"$G/packed-refs"
printf '%s\n' "$3" >"$G/shallow"
cp "$G/shallow" "$S/shallow"
printf 'git sandbox: the agent repository for %s\n' "$2" >"$G/description"
GIT_DIR="$G" GIT_WORK_TREE=` + container.Workspace + ` ` + helperGit + ` read-tree --reset -u "$3"
printf 'gitdir: %s\n' "$G" >` + container.Workspace + `/.git
cp "$G/index" ` + copyIndex + `
`

// Volume is a copy-mode workspace: volumes on the engine, read and
// written by the sandbox's helper container.
type Volume struct {
	env *Env
	rec *record.Record
	// pooled says Create took the volumes from the engine's warm pool.
	pooled bool
	// remake says the helper could not run a command though its engine
	// calls it running (errCannotExec): helper makes it again first.
	remake atomic.Bool
}

var _ Workspace = (*Volume)(nil)

// PooledMounts are the volumes' mounts when they came from the warm pool.
func (v *Volume) PooledMounts() []container.Mount {
	if !v.pooled {
		return nil
	}
	return VolumeMounts(*v.rec.Copy)
}

// Kind is KindVolume.
func (v *Volume) Kind() Kind { return KindVolume }

// Where names the worktree's volume and engine.
func (v *Volume) Where() string {
	return "(volume " + v.rec.Copy.Workspace + " on engine " + termsafe.String(engineName(v.rec)) + ")"
}

// Remote is true: the files live on the engine.
func (v *Volume) Remote() bool { return true }

// engineName is the sandbox's engine as users name it.
func engineName(r *record.Record) string {
	if r.Engine == "" {
		return "default"
	}
	return r.Engine
}

// user is the uid:gid the helper's git runs as: the caller's, who owns
// what the helper writes in the volumes.
func user() string { return strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()) }

// Create adds the sandbox branch at the start commit on this machine, and
// on the engine the volumes and the helper, which checks out the start
// commit and makes the agent's repository.
func (v *Volume) Create(ctx context.Context, u *steps.Undo, o CreateOptions) error {
	g := v.env.Repo.Git()
	r := v.rec
	cctx := context.WithoutCancel(ctx)
	branchRef := "refs/heads/" + r.Branch
	if err := g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: branchRef, New: gitcmd.Hash(r.Start), Message: "git sandbox start (copy mode)"}); err != nil {
		return err
	}
	u.Add(func() { _ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: branchRef, AnyOld: true}) })
	d, err := v.env.Engine(ctx)
	if err != nil {
		return err
	}
	c := *r.Copy
	labels := map[string]string{
		container.LabelRepo: r.RepoID, container.LabelBranch: r.Branch, container.LabelRole: container.RoleHelper,
	}
	took, err := v.fromPool(ctx, u, d, o, labels)
	if err != nil {
		return err
	}
	v.pooled = took
	if !took {
		if err := createVolumes(ctx, u, d, labels, c.Workspace, c.GitDir, c.Home, c.State); err != nil {
			return err
		}
		if err := v.startHelper(ctx, u, d, HelperSpec(c, r.Branch, o.Agent)); err != nil {
			return err
		}
	}
	if err := v.shipStart(ctx, d, o); err != nil {
		return err
	}
	// Fresh from checkout, the worktree on the engine is the start
	// commit: the baseline is its tree, read from nowhere, as in bind
	// mode. (Not when it has gitlinks, which the helper's snapshots
	// leave out, or attributes, which can make git add store a file
	// otherwise than checkout wrote it: an eol conversion of a file
	// committed with CRLF.)
	if v.startNeedsEngineBaseline(ctx) {
		return nil
	}
	return rescue.WriteSeed(v.seedMarker(), r.Start)
}

// createVolumes makes the volumes at once: on a cluster each is a claim,
// one API request and a volume to provision, and the helper's Pod is
// scheduled only once all are bound. Each one made is undone on failure.
func createVolumes(ctx context.Context, u *steps.Undo, d Engine, labels map[string]string, names ...string) error {
	cctx := context.WithoutCancel(ctx)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			_, errs[i] = d.CreateVolume(ctx, container.VolumeSpec{Name: name, Labels: labels})
		})
	}
	wg.Wait()
	for i, name := range names {
		if errs[i] == nil {
			u.Add(func() { _ = d.RemoveVolume(cctx, name) })
		}
	}
	for _, err := range errs {
		if err != nil {
			return err // the same reason for each, as a rule: said once
		}
	}
	return nil
}

// seedMarker is where Create writes down that the worktree holds the
// start commit, until the baseline reads it.
func (v *Volume) seedMarker() string {
	return rescue.SeedMarker(v.env.Layout.RescueIndex(v.rec.Branch))
}

// startNeedsEngineBaseline reports whether the start commit's tree holds
// a gitlink or a .gitattributes (or cannot be listed).
func (v *Volume) startNeedsEngineBaseline(ctx context.Context) bool {
	out, err := v.env.Repo.Git().Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", v.rec.Start)
	if err != nil {
		return true
	}
	for _, rec := range strings.Split(string(out), "\x00") {
		_, name, _ := strings.Cut(rec, "\t")
		if strings.HasPrefix(rec, "160000 ") || name == ".gitattributes" || strings.HasSuffix(name, "/.gitattributes") {
			return true
		}
	}
	return false
}

// startHelper creates and starts the helper and opens the volumes to the
// agent's user.
func (v *Volume) startHelper(ctx context.Context, u *steps.Undo, d Engine, spec *container.Spec) error {
	cctx := context.WithoutCancel(ctx)
	hid, err := d.Create(ctx, spec)
	if err != nil {
		return err
	}
	u.Add(func() { _ = d.Remove(cctx, hid) })
	if err := d.Start(ctx, hid); err != nil {
		return fmt.Errorf("start the git helper: %w", err)
	}
	if os.Getuid() != 0 && !d.Abilities().VolumesWritable {
		// The engine makes a new volume's root owned by root; root in the
		// helper (no capabilities, but the owner) opens them to the agent's
		// user, who then owns everything inside.
		if err := helperExec(ctx, d, hid, "0:0", "chmod 0777 "+strings.Join([]string{container.Workspace, CopyGitDir, copyHome, copyState}, " "), nil, io.Discard); err != nil {
			return fmt.Errorf("prepare volumes: %w", err)
		}
	}
	return nil
}

// CreateAgentRepo does nothing: the helper made the agent's repository
// when it checked out the start commit.
func (v *Volume) CreateAgentRepo(context.Context, *steps.Undo, CreateOptions) error { return nil }

// BranchMoved does nothing: the worktree has no index on this machine.
func (v *Volume) BranchMoved(context.Context, string) error { return nil }

// HostHome is "": the home is a volume on the engine.
func (v *Volume) HostHome() string { return "" }

// AgentHead is not known without asking the engine.
func (v *Volume) AgentHead() string { return "" }

// helperExec runs a script in the helper; stdout gets its output. A
// failure carries what it wrote to stderr.
func helperExec(ctx context.Context, d Engine, helper, user, script string, stdin io.Reader, stdout io.Writer, args ...string) error {
	var stderr bytes.Buffer
	argv := append([]string{"/bin/sh", "-c", script, "git-sandbox-helper"}, args...)
	code, err := d.Exec(ctx, helper, container.ExecOptions{
		Argv: argv, User: user, Env: helperGitEnv,
		Streams: container.Streams{Stdin: stdin, Stdout: stdout, Stderr: &stderr},
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return helperFailed(code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// helperFailed is the error of a helper's script that exited with code
// and wrote stderr. One killed by a signal that said nothing was most
// likely stopped by its engine (stopped or restarted under it): it says
// so, and that trying again starts the helper again.
func helperFailed(code int, stderr string) error {
	switch {
	case stderr != "":
		return fmt.Errorf("helper exited with %d: %s", code, termsafe.String(stderr))
	case code == 126:
		return fmt.Errorf("helper exited with 126: %w", errCannotExec)
	case code > 128 && code < 160:
		return usererr.New("the git helper was killed by signal %d (exit %d) before it was done: its engine stopped it, as when the engine stops or restarts", code-128, code).
			Hint("try again once the engine answers: git sandbox starts the helper again, and the snapshots already taken keep the work")
	default:
		return fmt.Errorf("helper exited with %d", code)
	}
}

// errCannotExec is an exec in the helper that ended with 126 and said
// nothing: the runtime could not run the command in the container, which
// its engine still calls running (an engine that went down while it
// started the helper). The next use makes the helper again.
var errCannotExec = errors.New("the engine could not run a command in the git helper")

// packTo is what packToHelper packs: the objects named in Input, one per
// line, or with Revs the objects of the revisions Input names (rev-list
// arguments, as pack-objects --revs reads them).
type packTo struct {
	Input string
	Revs  bool
}

// helperRun is one script run by the helper with a pack on its stdin.
type helperRun struct {
	// Script and Args are the script and its arguments.
	Script string
	Args   []string
	// Doing and Sending name the two sides in errors: what the script
	// does there, and what the pack holds.
	Doing, Sending string
}

// packToHelper streams a pack of what's objects from this machine's store
// into the helper's script.
func (v *Volume) packToHelper(ctx context.Context, d Engine, what packTo, run helperRun) error {
	argv := []string{"pack-objects", "--stdout", "-q"}
	if what.Revs {
		argv = append(argv, "--revs")
	}
	cmd := v.env.Repo.Git().Command(ctx, argv...)
	cmd.Stdin = strings.NewReader(what.Input)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", run.Sending, err)
	}
	xerr := helperExec(ctx, d, v.rec.Copy.Helper, user(), run.Script, out, io.Discard, run.Args...)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if xerr != nil {
		return fmt.Errorf("%s: %w", run.Doing, xerr)
	}
	if werr != nil {
		return fmt.Errorf("%s: %w: %s", run.Sending, werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// shipStart streams the objects of the start commit (its tree, no history:
// the agent's repository is shallow) into the helper and checks it out.
func (v *Volume) shipStart(ctx context.Context, d Engine, o CreateOptions) error {
	e := v.env
	cfg := agentrepo.CopyConfig(o.UserName, o.UserEmail)
	exclude, _ := os.ReadFile(filepath.Join(e.Repo.CommonDir, "info", "exclude"))
	var excludes []byte
	if f := e.excludesFile(); f != "" {
		excludes, _ = os.ReadFile(f)
	}
	// They travel as arguments; a very long list is not sent.
	for name, b := range map[string]*[]byte{"info/exclude": &exclude, "core.excludesFile": &excludes} {
		if len(*b) > 64<<10 {
			e.UI.Warnf("%s is over 64 KiB and was not sent to the engine: snapshots there do not leave out what it names", name)
			*b = nil
		}
	}
	list, err := e.Repo.Git().Run(ctx, nil, "rev-list", "--objects", "--no-walk", v.rec.Start)
	if err != nil {
		return fmt.Errorf("ship the start commit: %w", err)
	}
	return v.packToHelper(ctx, d, packTo{Input: string(list)}, helperRun{
		Script: initScript, Args: []string{cfg, v.rec.Branch, v.rec.Start, string(exclude), string(excludes)},
		Doing: "check out the start commit on the engine", Sending: "ship the start commit",
	})
}

// helper connects to the engine and starts the helper when it is not
// running (the engine restarted).
func (v *Volume) helper(ctx context.Context) (Engine, error) {
	d, err := v.env.Engine(ctx)
	if err != nil {
		return nil, err
	}
	st, err := d.Inspect(ctx, v.rec.Copy.Helper)
	if container.IsNotFound(err) {
		branch := termsafe.String(v.rec.Branch)
		return nil, usererr.New("the git helper of sandbox %s is gone from engine %s", branch, termsafe.String(engineName(v.rec))).
			Hint("the snapshots on this machine keep the work: git sandbox rescue list %s", branch)
	}
	if err != nil {
		return nil, err
	}
	if st.Running && v.remake.CompareAndSwap(true, false) && v.rec.Spec != nil {
		if err := v.replaceHelper(ctx, d); err != nil {
			return nil, helperWontStart(v.rec, fmt.Errorf("making the helper again: %w", err))
		}
		if v.env.UI != nil {
			v.env.UI.Infof("made the git helper of %s again: its engine could not run a command in it", termsafe.String(v.rec.Branch))
		}
		return d, nil
	}
	if st.Running {
		return d, nil
	}
	if err := d.Start(ctx, v.rec.Copy.Helper); err != nil {
		// Another process (the supervisor, a command) may have started it
		// at the same moment: the engine refuses the second start.
		if st, ierr := d.Inspect(ctx, v.rec.Copy.Helper); ierr == nil && st.Running {
			return d, nil
		}
		if !staleTask(err) || v.rec.Spec == nil {
			return nil, helperWontStart(v.rec, err)
		}
		// An engine that stopped while it started the helper (a snapshot
		// when the engine's shutdown stopped the agent) can keep a task of
		// it that it no longer knows, and refuses every start after: a new
		// helper on the same volumes replaces it (all it keeps is in them).
		if rerr := v.replaceHelper(ctx, d); rerr != nil {
			return nil, helperWontStart(v.rec, fmt.Errorf("%w; making the helper again: %v", err, rerr))
		}
		if v.env.UI != nil {
			v.env.UI.Infof("made the git helper of %s again: its engine kept a task of the old one that it no longer knew", termsafe.String(v.rec.Branch))
		}
	}
	return d, nil
}

// helperWontStart is the error of a helper its engine refused to start
// (one that is stopping or restarting refuses with what its store says).
func helperWontStart(r *record.Record, err error) error {
	branch := termsafe.String(r.Branch)
	return usererr.Wrap(err, "the git helper of sandbox %s did not start on engine %s: %v", branch, termsafe.String(engineName(r)), err).
		Hint("if the engine is stopping or restarting, try again once it answers; the snapshots on this machine keep the work: git sandbox rescue list %s", branch)
}

// staleTask reports whether a start failed on what an engine that
// stopped mid-start kept of the container's old task: the task itself
// ("task … already exists"), its runtime's state ("id already in use"), or
// its shim's directory ("failed to start shim: mkdir …: file exists").
func staleTask(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "already exists") || strings.Contains(msg, "id already in use") ||
		strings.Contains(msg, "failed to start shim") && strings.Contains(msg, "file exists")
}

// replaceHelper removes the helper container and starts a new one of the
// same name from the record.
func (v *Volume) replaceHelper(ctx context.Context, d Engine) error {
	if err := d.Remove(ctx, v.rec.Copy.Helper); err != nil {
		return err
	}
	id, err := d.Create(ctx, HelperSpec(*v.rec.Copy, v.rec.Branch, v.rec.Spec.ToSpec()))
	if err != nil {
		return err
	}
	return d.Start(ctx, id)
}

// Remove removes the sandbox's volumes on its engine, and every other
// volume made for it (its egress proxy's), once its containers are gone.
// Their snapshots are on this machine. An engine that is gone keeps them.
func (v *Volume) Remove(ctx context.Context, _ string, d Engine) []error {
	if d == nil {
		return nil
	}
	c, r := v.rec.Copy, v.rec
	names := []string{c.Workspace, c.GitDir, c.Home, c.State}
	if vols, err := d.ListVolumes(ctx, container.LabelRepo+"="+r.RepoID, container.LabelBranch+"="+r.Branch); err == nil {
		for _, vol := range vols {
			if !slices.Contains(names, vol.Name) {
				names = append(names, vol.Name)
			}
		}
	}
	var errs []error
	for _, name := range names {
		if err := d.RemoveVolume(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// CopyAsks is what a start asks for that a copy-mode sandbox cannot give:
// each needs this machine's files or ports.
type CopyAsks struct {
	Carry   bool // --carry: the checkout's uncommitted work
	Publish bool // --publish: ports on this machine
	Mounts  bool // [[mount]] entries: this machine's paths
}

// RefuseCopy refuses what a copy-mode sandbox on engine cannot do, with
// the way on.
func RefuseCopy(engine string, a CopyAsks, userConfig string) error {
	switch {
	case a.Carry:
		return usererr.New("--carry needs this machine's files: engine %s keeps the sandbox's files in volumes", engine).
			Hint("commit the work first, or start the sandbox on a local engine")
	case a.Publish:
		return usererr.New("--publish is not available on engine %s: its ports are on another machine", engine).
			Hint("start the sandbox on a local engine (--engine) to reach a server in it from this machine")
	case a.Mounts:
		return usererr.New("engine %s cannot mount host paths (copy mode), and your config has [[mount]] entries", engine).
			Hint("start the sandbox on a local engine, or remove the mounts from %s", userConfig)
	}
	return nil
}

// SafeDirEnv declares the copy-mode agent's two directories safe to its
// git, in the environment (the command-line scope git honours for this):
// the engine makes a volume's root directory root's, and no process of
// the sandbox may change its owner (no capabilities), so a git running
// as another uid would take /workspace for someone else's repository.
func SafeDirEnv() []string {
	return []string{"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=" + container.Workspace,
		"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1=" + CopyGitDir}
}
