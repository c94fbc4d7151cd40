package sandbox

// Copy mode: a sandbox on an engine that cannot see this machine's files
// (a remote Docker Engine). Nothing of the host is bind-mounted. Volumes on
// the engine hold the worktree, the agent's private git directory, its
// home, and the state of a helper container that the agent's container
// never mounts. Start ships the objects of the start commit as a pack
// through an exec stream into the helper, which checks out; snapshots are
// taken by the helper with a configuration-free git (the agent paused
// while it reads) and come back as a pack that the host indexes with
// index-pack --strict and checks (agentrepo.ImportTree) before the
// snapshot's commit is written on the host. The host keeps every snapshot:
// losing the engine loses at most one rescue interval.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
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

// copyNames names a copy-mode sandbox's volumes and helper after its
// container.
func copyNames(containerName string) record.Copy {
	return record.Copy{
		Workspace: containerName + "-ws",
		GitDir:    containerName + "-git",
		Home:      containerName + "-home",
		State:     containerName + "-state",
		Helper:    containerName + "-helper",
	}
}

// copyMounts are the agent container's mounts in copy mode: volumes only.
func copyMounts(c record.Copy) []container.Mount {
	return []container.Mount{
		{Source: c.Workspace, Target: container.Workspace, Volume: true, NoCopy: true, Why: "the sandbox worktree, in a volume on the engine"},
		{Source: c.GitDir, Target: CopyGitDir, Volume: true, NoCopy: true, Why: "the agent's own repository, in a volume on the engine"},
		{Source: c.Home, Target: container.Home, Volume: true, NoCopy: true, Why: "the agent's home, in a volume on the engine"},
	}
}

// planCopy turns a planned sandbox into a copy-mode one: every host path
// mount is replaced by a volume on the engine (cache volumes stay), and
// what cannot work without this machine's files is refused.
func planCopy(p *Plan, carry bool) error {
	if carry {
		return usererr.New("--carry needs this machine's files: engine %s keeps the sandbox's files in volumes", p.Engine).
			Hint("commit the work first, or start the sandbox on a local engine")
	}
	if p.Egress != nil && len(p.Egress.Secrets) > 0 {
		// The agent trusts the sandbox's CA through files mounted from
		// this machine, and the values would be kept on the engine.
		return usererr.New("engine %s cannot take your [[secret]] entries yet (copy mode): the agent would not trust the proxy that puts them in", p.Engine).
			Hint("start the sandbox on a local engine, or pass --network none or open (secrets are then left out)")
	}
	if p.Egress != nil {
		if err := proxyOnVolumes(p.Egress); err != nil {
			return err
		}
	}
	if len(p.Container.Ports) > 0 {
		return usererr.New("--publish is not available on engine %s: its ports are on another machine", p.Engine)
	}
	if len(p.in.ExtraMounts) > 0 {
		return usererr.New("engine %s cannot mount host paths (copy mode), and your config has [[mount]] entries", p.Engine).
			Hint("start the sandbox on a local engine, or remove the mounts from %s", config.UserPath())
	}
	names := copyNames(p.Container.Name)
	p.Copy = &names
	mounts := copyMounts(names)
	for _, m := range p.Container.Mounts {
		if m.Volume {
			mounts = append(mounts, m) // caches: volumes on the engine
		}
	}
	p.Container.Mounts = mounts
	p.Container.Labels[container.LabelWorktree] = ""
	if p.in.UID != 0 && !slices.ContainsFunc(p.Container.Env, func(v string) bool { return strings.HasPrefix(v, "GIT_CONFIG_COUNT=") }) {
		// The engine makes a volume's root directory root's, and no
		// process of the sandbox may change its owner (no capabilities),
		// so the agent's git would take /workspace for someone else's
		// repository. Its own two directories are declared safe, in the
		// environment (the command-line scope git honours for this).
		p.Container.Env = append(p.Container.Env, "GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0="+container.Workspace,
			"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1="+CopyGitDir)
	}
	p.Worktree, p.PrivateGitDir = "", ""
	return p.Container.Validate()
}

// helperSpec is the copy-mode helper: the sandbox's image (it has git),
// hardened as the agent is, no network, waiting for execs.
func helperSpec(p *Plan) *container.Spec {
	c := p.Copy
	spec := &container.Spec{
		Name:     c.Helper,
		Image:    p.Container.Image,
		User:     p.Container.User,
		WorkDir:  "/",
		Hostname: "git-sandbox-helper",
		Network:  container.NetworkNone,
		Runtime:  p.Container.Runtime,
		Limits:   container.Limits{Pids: 512, MemoryBytes: p.Container.Limits.MemoryBytes},
		Argv:     []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"},
		Env:      []string{"HOME=" + copyState},
		Labels: map[string]string{
			container.LabelManaged: "1",
			container.LabelRepo:    p.Container.Labels[container.LabelRepo],
			container.LabelBranch:  p.Branch,
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
	"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "HOME=" + copyState, "LC_ALL=C",
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
		return fmt.Errorf("helper exited with %d: %s", code, termsafe.String(strings.TrimSpace(stderr.String())))
	}
	return nil
}

// packTo is what packToHelper packs: the objects named in Input, one per
// line, or with Revs the objects of the revisions Input names (rev-list
// arguments, as pack-objects --revs reads them).
type packTo struct {
	Input string
	Revs  bool
}

// packToHelper streams a pack of what's objects from this machine's store
// into script, run by the helper with the pack on its stdin. doing and
// sending name the two sides in errors: what the script does there, and
// what the pack holds.
func (e *Env) packToHelper(ctx context.Context, d Engine, helper, user string, what packTo, script, doing, sending string, args ...string) error {
	argv := []string{"pack-objects", "--stdout", "-q"}
	if what.Revs {
		argv = append(argv, "--revs")
	}
	cmd := e.Git().Command(ctx, argv...)
	cmd.Stdin = strings.NewReader(what.Input)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", sending, err)
	}
	xerr := helperExec(ctx, d, helper, user, script, out, io.Discard, args...)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if xerr != nil {
		return fmt.Errorf("%s: %w", doing, xerr)
	}
	if werr != nil {
		return fmt.Errorf("%s: %w: %s", sending, werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// createCopy makes a copy-mode sandbox: branch, volumes, helper, the start
// commit shipped and checked out, the baseline, the record, the agent's
// container. On failure everything it made is removed again, on the engine
// too.
func (e *Env) createCopy(ctx context.Context, d Engine, p *Plan, o StartOptions) (sb *Sandbox, err error) {
	l := e.Layout
	g := e.Git()
	var u undo
	defer func() {
		if err != nil {
			u.run()
		}
	}()
	cctx := context.WithoutCancel(ctx)
	dir := l.Dir(p.Branch)
	u.add(func() { os.RemoveAll(dir) })
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	if err := e.archiveChain(ctx, p.Branch); err != nil {
		return nil, err
	}
	branchRef := "refs/heads/" + p.Branch
	if err := g.UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: branchRef, New: gitcmd.Hash(p.BaseCommit), Message: "git sandbox start (copy mode)"}); err != nil {
		return nil, err
	}
	u.add(func() { _ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: branchRef, AnyOld: true}) })
	c := *p.Copy
	labels := map[string]string{
		container.LabelRepo: e.Repo.ID, container.LabelBranch: p.Branch, container.LabelRole: container.RoleHelper,
	}
	for _, v := range []string{c.Workspace, c.GitDir, c.Home, c.State} {
		if _, err := d.CreateVolume(ctx, container.VolumeSpec{Name: v, Labels: labels}); err != nil {
			return nil, err
		}
		u.add(func() { _ = d.RemoveVolume(cctx, v) })
	}
	if err := e.step("volumes"); err != nil {
		return nil, err
	}
	hspec := helperSpec(p)
	hid, err := d.Create(ctx, hspec)
	if err != nil {
		return nil, err
	}
	u.add(func() { _ = d.Remove(cctx, hid) })
	if err := d.Start(ctx, hid); err != nil {
		return nil, fmt.Errorf("start the git helper: %w", err)
	}
	if os.Getuid() != 0 && !container.VolumesWritable(d) {
		// The engine makes a new volume's root owned by root; root in the
		// helper (no capabilities, but the owner) opens them to the agent's
		// user, who then owns everything inside.
		if err := helperExec(ctx, d, hid, "0:0", "chmod 0777 "+strings.Join([]string{container.Workspace, CopyGitDir, copyHome, copyState}, " "), nil, io.Discard); err != nil {
			return nil, fmt.Errorf("prepare volumes: %w", err)
		}
	}
	if err := e.shipStart(ctx, d, hid, hspec.User, p.Branch, p.BaseCommit); err != nil {
		return nil, err
	}
	if err := e.step("checkout"); err != nil {
		return nil, err
	}
	rec := &record.Record{
		Branch:    p.Branch,
		RepoID:    e.Repo.ID,
		CommonDir: e.Repo.CommonDir,
		Base:      p.Base,
		BaseTip:   p.BaseCommit,
		Start:     p.BaseCommit,
		Container: p.Container.Name,
		Image:     p.Container.Image,
		Engine:    p.Engine,
		Copy:      &c,
		Agent:     p.in.Agent,
		Prompt:    p.in.Prompt,
		Verify:    p.Verify,
		Setup:     p.Setup,
		Created:   time.Now().UTC(),
	}
	if p.Base != "" {
		rec.BaseRef = "refs/heads/" + p.Base
	}
	sb = &Sandbox{Record: rec, env: e}
	refs := rescue.Refs{Branch: p.Branch}
	u.add(func() {
		for _, r := range []string{refs.Rescue(), refs.Baseline(), refs.Agent()} {
			_ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: r, AnyOld: true})
		}
	})
	base, err := sb.copySnapshotter().Take(ctx, rescue.ReasonStart)
	if err != nil {
		return nil, err
	}
	rec.Baseline = base.ID
	if err := e.step("baseline"); err != nil {
		return nil, err
	}
	if eg := p.Egress; eg != nil {
		rec.Egress = &record.Egress{
			Allow: eg.Allow, Remove: eg.Remove,
			InternalNetwork: eg.InternalNetwork, EgressNetwork: eg.EgressNetwork, Proxy: eg.Proxy.Name,
		}
		if err := e.createEgress(ctx, d, p.Branch, eg, &u); err != nil {
			return nil, err
		}
	}
	spec := *p.Container
	spec.Labels = cloneMap(spec.Labels)
	spec.Labels[container.LabelBaseline] = base.ID
	caches := spec
	caches.Mounts = nil
	for _, m := range spec.Mounts {
		if m.Volume && m.Source != c.Workspace && m.Source != c.GitDir && m.Source != c.Home {
			caches.Mounts = append(caches.Mounts, m)
		}
	}
	if err := e.ensureCaches(ctx, d, &caches, ""); err != nil {
		return nil, err
	}
	id, err := d.Create(ctx, &spec)
	if err != nil {
		return nil, err
	}
	u.add(func() { _ = d.Remove(cctx, id) })
	rec.Spec = &spec
	if err := record.Save(l.Record(p.Branch), rec); err != nil {
		return nil, err
	}
	if err := e.step("container"); err != nil {
		return nil, err
	}
	if p.Setup != "" {
		if err := e.runSetup(ctx, d, sb, o.IO, true); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// shipStart streams the objects of the start commit (its tree, no history:
// the agent's repository is shallow) into the helper and checks it out.
func (e *Env) shipStart(ctx context.Context, d Engine, helper, user, branch, start string) error {
	name, email := e.identity(ctx)
	cfg := agentrepo.CopyConfig(name, email)
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
	// The start commit and its whole tree, no history (the agent's
	// repository is shallow).
	list, err := e.Git().Run(ctx, nil, "rev-list", "--objects", "--no-walk", start)
	if err != nil {
		return fmt.Errorf("ship the start commit: %w", err)
	}
	return e.packToHelper(ctx, d, helper, user, packTo{Input: string(list)}, initScript,
		"check out the start commit on the engine", "ship the start commit",
		cfg, branch, start, string(exclude), string(excludes))
}

// ensureHelper starts the helper when it is not running (the engine
// restarted).
func (s *Sandbox) ensureHelper(ctx context.Context, d Engine) error {
	st, err := d.Inspect(ctx, s.Copy.Helper)
	if container.IsNotFound(err) {
		return usererr.New("the git helper of sandbox %s is gone from engine %s", s.Display(), s.engineName()).
			Hint("the snapshots on this machine keep the work: git sandbox rescue list %s", s.Display())
	}
	if err != nil {
		return err
	}
	if st.Running {
		return nil
	}
	return d.Start(ctx, s.Copy.Helper)
}

// engineName is the sandbox's engine as users name it.
func (s *Sandbox) engineName() string {
	if s.Record.Engine == "" {
		return "default"
	}
	return s.Record.Engine
}

// removeCopyVolumes removes a copy-mode sandbox's volumes on its engine.
func (s *Sandbox) removeCopyVolumes(ctx context.Context, d Engine) error {
	var errs []error
	names := []string{s.Copy.Workspace, s.Copy.GitDir, s.Copy.Home, s.Copy.State}
	// And every other volume made for it (its egress proxy's).
	if vols, err := d.ListVolumes(ctx, container.LabelRepo+"="+s.RepoID, container.LabelBranch+"="+s.Branch); err == nil {
		for _, v := range vols {
			if !slices.Contains(names, v.Name) {
				names = append(names, v.Name)
			}
		}
	}
	for _, v := range names {
		if err := d.RemoveVolume(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errNotInCopyMode refuses what copy mode does not do yet.
func errNotInCopyMode(s *Sandbox, what string) error {
	return usererr.New("%s is not available yet for sandbox %s: its files are in volumes on engine %s (copy mode)", what, s.Display(), s.engineName()).
		Hint("git sandbox diff %s shows the work; git sandbox land %s lands it (--force lands past a verify that cannot run)", s.Display(), s.Display()).
		WithCode(usererr.ExitRefused)
}

// WorktreeText names the sandbox's worktree for messages: its path, or for
// copy mode its volume on the engine.
func (s *Sandbox) WorktreeText() string {
	if s.Copy != nil {
		return "(volume " + s.Copy.Workspace + " on engine " + termsafe.String(s.engineName()) + ")"
	}
	return s.Worktree
}
