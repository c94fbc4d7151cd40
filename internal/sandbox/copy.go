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
	"strconv"
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
	if p.Egress != nil {
		return usererr.New("the allowlist network is not available yet on engine %s (copy mode)", p.Engine).
			Hint("start with --network none, or --network open (the agent can then reach any host)")
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

// addScript stages the worktree into the helper's private index and prints
// the tree, then the untracked files left out for their size ("SIZE\tPATH"
// records, each ended by a NUL, then one more NUL), then what git add
// complained about. The same rules as a local snapshot: gitlinks leave the
// index first (for one already there, git add would run git status inside
// that nested repository, whose configuration the agent wrote); untracked
// files over $1 bytes (0: no limit) that the agent does not track stay out
// and leave the index; ignored files the agent tracks (its git add -f) are
// added. What the agent tracks is read from a copy of its index by this
// git: the agent's configuration plays no part.
const addScript = `set -eu
HG="` + helperGit + ` -c core.excludesFile=` + copyExcludes + `"
export GIT_DIR=` + copyScratch + ` GIT_WORK_TREE=` + container.Workspace + ` GIT_INDEX_FILE=` + copyIndex + `
cd ` + container.Workspace + `
T=` + copyState + `/tmp
rm -rf "$T" && mkdir -p "$T"
` + helperGit + ` ls-files -s -z | { grep -z '^160000' || true; } | sed -z 's/^[^\t]*\t//' | ` + helperGit + ` update-index --force-remove -z --stdin
: >"$T/agent"
if [ -f ` + CopyGitDir + `/index ] && [ ! -L ` + CopyGitDir + `/index ]; then
	cp ` + CopyGitDir + `/index "$T/agent.index" && GIT_INDEX_FILE="$T/agent.index" ` + helperGit + ` ls-files -z --cached >"$T/agent" 2>/dev/null || : >"$T/agent"
fi
sort -z -o "$T/agent" "$T/agent"
: >"$T/excl"
if [ "$1" -gt 0 ]; then
	find . -path ./.git -prune -o -type f -size +"$1"c -printf '%P\0' >"$T/big"
	{
		GIT_LITERAL_PATHSPECS=1 xargs -0 -r $HG ls-files -z --others --exclude-standard -- <"$T/big"
		GIT_LITERAL_PATHSPECS=1 xargs -0 -r ` + helperGit + ` ls-files -z --cached -- <"$T/big"
	} | sort -z -u >"$T/large"
	comm -z -23 "$T/large" "$T/agent" >"$T/excl"
	` + helperGit + ` update-index --force-remove -z --stdin <"$T/excl"
fi
rc=0
{ printf '.\0'; sed -z 's/^/:(exclude,literal)/' "$T/excl"; } | $HG add --all --ignore-errors --pathspec-from-file=- --pathspec-file-nul 2>"$T/add.err" || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ]
` + helperGit + ` ls-files -z --cached | sort -z >"$T/have"
comm -z -23 "$T/agent" "$T/have" | xargs -0 -r sh -c 'for p; do if [ -f "$p" ] || [ -L "$p" ]; then printf "%s\0" "$p"; fi; done' sh >"$T/forced"
if [ -s "$T/forced" ]; then
	rc=0
	GIT_LITERAL_PATHSPECS=1 ` + helperGit + ` add --force --ignore-errors --pathspec-from-file="$T/forced" --pathspec-file-nul 2>>"$T/add.err" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 1 ]
fi
` + helperGit + ` write-tree
xargs -0 -r stat --printf '%s\t%n\0' -- <"$T/excl"
printf '\0'
head -c 1048576 "$T/add.err"
`

// parseAdded reads what addScript printed after the tree.
func parseAdded(rest string) (large []rescue.LargeFile, addErrors string) {
	for rest != "" && rest[0] != 0 {
		rec, more, ok := strings.Cut(rest, "\x00")
		if !ok {
			return large, ""
		}
		rest = more
		size, p, ok := strings.Cut(rec, "\t")
		n, err := strconv.ParseInt(size, 10, 64)
		if ok && err == nil && agentrepo.CheckPath(p) == nil {
			large = append(large, rescue.LargeFile{Path: p, Size: n})
		}
	}
	return large, strings.TrimPrefix(rest, "\x00")
}

// packScript writes a pack of tree $1 without what tree $2 (the host's
// newest snapshot, when the helper has it) already holds.
const packScript = `set -eu
export GIT_DIR=` + copyScratch + `
if [ -n "${2:-}" ] && ` + helperGit + ` cat-file -e "$2^{tree}" 2>/dev/null; then
	printf '%s\n--not\n%s\n' "$1" "$2"
else
	printf '%s\n' "$1"
fi | ` + helperGit + ` pack-objects --revs --stdout -q
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
	if os.Getuid() != 0 {
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
		if err := e.runSetup(ctx, d, sb, o.IO); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// shipStart streams the objects of the start commit (its tree, no history:
// the agent's repository is shallow) into the helper and checks it out.
func (e *Env) shipStart(ctx context.Context, d Engine, helper, user, branch, start string) error {
	g := e.Git()
	list, err := g.Run(ctx, nil, "rev-list", "--objects", "--no-walk", start)
	if err != nil {
		return fmt.Errorf("ship the start commit: %w", err)
	}
	cmd := g.Command(ctx, "pack-objects", "--stdout", "-q")
	cmd.Stdin = bytes.NewReader(list)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ship the start commit: %w", err)
	}
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
	xerr := helperExec(ctx, d, helper, user, initScript, out, io.Discard, cfg, branch, start, string(exclude), string(excludes))
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if xerr != nil {
		return fmt.Errorf("check out the start commit on the engine: %w", xerr)
	}
	if werr != nil {
		return fmt.Errorf("ship the start commit: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// copySnapshotter takes the snapshots of a copy-mode sandbox through its
// helper.
func (s *Sandbox) copySnapshotter() *rescue.Snapshotter {
	l := s.env.Layout
	return &rescue.Snapshotter{
		CommonDir: s.env.Repo.CommonDir,
		Branch:    s.Branch,
		Scratch:   l.ScratchGitDir(s.Branch),
		Lock:      l.Lock(s.Branch),
		Start:     s.Start,
		Baseline:  s.Baseline,
		Remote:    s.remoteTree,
		// Set for restore: the files go back to the engine.
		RemoteCheckout: s.remoteCheckout,
	}
}

// checkoutScript indexes the pack on stdin into the helper's repository and
// changes the worktree from tree $1 (what the last snapshot read, and so
// what the helper's index holds) to tree $2, as a local restore does: git
// refuses, changing nothing, when a file it would write changed since.
const checkoutScript = `set -eu
export GIT_DIR=` + copyScratch + ` GIT_WORK_TREE=` + container.Workspace + ` GIT_INDEX_FILE=` + copyIndex + `
` + helperGit + ` index-pack --stdin >/dev/null
cd ` + container.Workspace + `
` + helperGit + ` read-tree -m -u "$1" "$2"
`

// remoteCheckout ships the objects of tree to that tree from lacks and
// checks them out on the engine.
func (s *Sandbox) remoteCheckout(ctx context.Context, from, to string) error {
	d, err := s.engine(ctx)
	if err != nil {
		return err
	}
	if err := s.ensureHelper(ctx, d); err != nil {
		return err
	}
	cmd := s.env.Git().Command(ctx, "pack-objects", "--revs", "--stdout", "-q")
	cmd.Stdin = strings.NewReader(to + "\n--not\n" + from + "\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	xerr := helperExec(ctx, d, s.Copy.Helper, user, checkoutScript, out, io.Discard, from, to)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if xerr != nil {
		return fmt.Errorf("write the files on the engine: %w", xerr)
	}
	if werr != nil {
		return fmt.Errorf("send the snapshot: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// remoteTree stages the worktree on the engine while the agent is paused,
// and brings the tree's new objects back, checked.
func (s *Sandbox) remoteTree(ctx context.Context, prevTree string) (rt *rescue.RemoteTree, err error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	if err := s.ensureHelper(ctx, d); err != nil {
		return nil, err
	}
	began := time.Now()
	defer func() {
		s.env.UI.Tracef("copy snapshot of %s: %s in all", s.Branch, time.Since(began).Round(time.Millisecond))
	}()
	var thaw func()
	if s.Baseline != "" {
		if thaw, err = s.env.freezer(s.Record.Engine, s.Container)(ctx); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	err = helperExec(ctx, d, s.Copy.Helper, user, addScript, nil, &out, strconv.FormatInt(s.env.maxFileSize(), 10))
	if thaw != nil {
		thaw()
	}
	if err != nil {
		return nil, fmt.Errorf("read the worktree on the engine: %w", err)
	}
	s.env.UI.Tracef("copy snapshot of %s: staged on the engine after %s", s.Branch, time.Since(began).Round(time.Millisecond))
	tree, rest, _ := strings.Cut(out.String(), "\n")
	tree = strings.TrimSpace(tree)
	rt = &rescue.RemoteTree{Tree: tree}
	rt.TooLarge, rt.AddErrors = parseAdded(rest)
	if _, err := s.env.Git().Run(ctx, nil, "cat-file", "-e", tree+"^{tree}"); err == nil && tree != "" {
		return rt, nil // the user's store has it (and what it holds)
	}
	budget, err := s.env.syncBudget()
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	xerr := make(chan error, 1)
	go func() {
		err := helperExec(ctx, d, s.Copy.Helper, user, packScript, nil, pw, tree, prevTree)
		pw.CloseWithError(err)
		xerr <- err
	}()
	ierr := agentrepo.ImportTree(ctx, agentrepo.ImportOptions{
		CommonDir: s.env.Repo.CommonDir, Pack: pr, Tree: tree, Known: prevTree, Budget: budget,
	})
	pr.CloseWithError(errors.New("import ended"))
	if err := <-xerr; err != nil && ierr == nil {
		return nil, fmt.Errorf("bring the snapshot back: %w", err)
	}
	if ierr != nil {
		return nil, fmt.Errorf("bring the snapshot back: %w", ierr)
	}
	return rt, nil
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
	for _, v := range []string{s.Copy.Workspace, s.Copy.GitDir, s.Copy.Home, s.Copy.State} {
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

// headScript prints the agent's HEAD commit and the ref it goes through,
// read as files (no git runs in the agent's repository), or nothing for an
// unborn branch. The host checks both before using them.
const headScript = `G=` + CopyGitDir + `
[ -f "$G/HEAD" ] && [ ! -L "$G/HEAD" ] || exit 0
h=$(head -c 300 "$G/HEAD" | head -n 1)
ref=
case "$h" in
"ref: "*)
	ref=${h#ref: }
	case "$ref" in refs/heads/*) ;; *) exit 0 ;; esac
	case "$ref" in *..* | *//*) exit 0 ;; esac
	if [ -f "$G/$ref" ] && [ ! -L "$G/$ref" ]; then
		h=$(head -c 100 "$G/$ref" | head -n 1)
	elif [ -f "$G/packed-refs" ]; then
		h=$(awk -v r="$ref" '$2 == r { print $1; exit }' "$G/packed-refs")
	else
		h=
	fi ;;
esac
[ -n "$h" ] && printf '%s %s\n' "$h" "$ref"
exit 0
`

// commitsScript packs the agent's commits from $1 down to the start commit
// $2 (the repositories are shallow there) and without what the known
// commit $3 holds, reading the agent's objects as an alternate of the
// helper's repository: the agent's configuration plays no part.
const commitsScript = `set -eu
export GIT_DIR=` + copyScratch + ` GIT_ALTERNATE_OBJECT_DIRECTORIES=` + CopyGitDir + `/objects
{
	printf '%s\n--not\n%s\n' "$1" "$2"
	if [ -n "${3:-}" ] && ` + helperGit + ` cat-file -e "$3^{commit}" 2>/dev/null; then printf '%s\n' "$3"; fi
} | ` + helperGit + ` pack-objects --revs --stdout -q
`

// copySync brings the agent's commits back from the engine: its HEAD read
// as files by the helper, a pack of the commits since the start, indexed
// with index-pack --strict into a directory of the sandbox's state, and
// then the same checks and copy as a local sync (agentrepo.SyncWithin) with
// that directory as the agent's repository.
func (s *Sandbox) copySync(ctx context.Context, known string, budget agentrepo.Budget) (*agentrepo.SyncResult, error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.ensureHelper(ctx, d); err != nil {
		return nil, err
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	var out bytes.Buffer
	if err := helperExec(ctx, d, s.Copy.Helper, user, headScript, nil, &out); err != nil {
		return nil, fmt.Errorf("read the agent's HEAD on the engine: %w", err)
	}
	id, ref, _ := strings.Cut(strings.TrimSpace(out.String()), " ")
	if id == "" {
		return &agentrepo.SyncResult{}, nil
	}
	if !agentrepo.ValidID(id) || (ref != "" && !agentrepo.ValidRef(ref)) {
		return nil, usererr.New("the agent's HEAD on the engine is not a commit id (%s)", termsafe.String(id)).
			WithCode(usererr.ExitRefused)
	}
	g := s.env.Git()
	if id == s.Start || id == known {
		return &agentrepo.SyncResult{Head: id, Ref: ref}, nil
	}
	dir, err := os.MkdirTemp(s.env.Layout.Dir(s.Branch), "sync-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	objects := dir + "/objects"
	if err := os.MkdirAll(objects+"/pack", 0o700); err != nil {
		return nil, err
	}
	if _, err := g.Run(ctx, nil, "cat-file", "-e", id+"^{commit}"); err != nil {
		// Not here yet: the commits come over the wire.
		pr, pw := io.Pipe()
		xerr := make(chan error, 1)
		go func() {
			err := helperExec(ctx, d, s.Copy.Helper, user, commitsScript, nil, pw, id, s.Start, known)
			pw.CloseWithError(err)
			xerr <- err
		}()
		q := &gitcmd.Runner{
			GitDir: s.env.Repo.CommonDir, ObjectDir: objects, Isolated: true,
			Env:    []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + s.env.Repo.ObjectsDir()},
			Config: []string{"core.bigFileThreshold=16m"},
		}
		_, ierr := q.Run(ctx, pr, "index-pack", "--stdin", "--strict")
		pr.CloseWithError(errors.New("index ended"))
		if err := <-xerr; err != nil && ierr == nil {
			return nil, fmt.Errorf("bring the agent's commits back: %w", err)
		}
		if ierr != nil {
			return nil, usererr.Wrap(ierr, "the agent's commits were refused: %v", ierr).WithCode(usererr.ExitRefused)
		}
	}
	if err := os.WriteFile(dir+"/HEAD", []byte(id+"\n"), 0o600); err != nil {
		return nil, err
	}
	res, err := agentrepo.SyncWithin(ctx, g, dir, s.Start, known, budget)
	if err != nil {
		return nil, err
	}
	res.Ref = ref
	return res, nil
}

// updateScript brings the base's new commits into the agent's repository
// on the engine: the pack on stdin is indexed by the helper and copied in,
// the base branch ($1) moves to the tip ($2), and then either the agent's
// branch ($3, "" when detached: HEAD) moves to $4 with its index following,
// or ($5 = merging) MERGE_HEAD and MERGE_MSG ($6) are written for the
// agent to finish the merge. Its index is written by the helper's own git
// (the agent's configuration plays no part).
const updateScript = `set -eu
G=` + CopyGitDir + ` S=` + copyScratch + `
before=$(ls "$S/objects/pack")
GIT_DIR="$S" ` + helperGit + ` index-pack --stdin >/dev/null
for f in $(ls "$S/objects/pack"); do
	case " $(echo $before) " in *" $f "*) ;; *) cp "$S/objects/pack/$f" "$G/objects/pack/" ;; esac
done
mkdir -p "$G/$(dirname "$1")"
printf '%s\n' "$2" >"$G/$1"
if [ "$5" = merging ]; then
	printf '%s\n' "$2" >"$G/MERGE_HEAD"
	printf '%s' "$6" >"$G/MERGE_MSG"
	exit 0
fi
if [ -n "$3" ]; then
	mkdir -p "$G/$(dirname "$3")"
	printf '%s\n' "$4" >"$G/$3"
else
	printf '%s\n' "$4" >"$G/HEAD"
fi
GIT_DIR="$S" GIT_INDEX_FILE="$G/index" ` + helperGit + ` read-tree "$4"
`

// copyUpdateAgentRepo is update's step in the agent's repository for a
// copy-mode sandbox: the objects between the old start and the new head
// and tip are sent to the engine, the refs and index written there.
func (s *Sandbox) copyUpdateAgentRepo(ctx context.Context, head, tip, newHead gitcmd.Hash, merging bool, msg string) error {
	d, err := s.engine(ctx)
	if err != nil {
		return err
	}
	if err := s.ensureHelper(ctx, d); err != nil {
		return err
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	var out bytes.Buffer
	if err := helperExec(ctx, d, s.Copy.Helper, user, headScript, nil, &out); err != nil {
		return fmt.Errorf("read the agent's HEAD on the engine: %w", err)
	}
	_, ref, _ := strings.Cut(strings.TrimSpace(out.String()), " ")
	if ref != "" && !agentrepo.ValidRef(ref) {
		ref = ""
	}
	cmd := s.env.Git().Command(ctx, "pack-objects", "--revs", "--stdout", "-q")
	cmd.Stdin = strings.NewReader(newHead.String() + "\n" + tip.String() + "\n--not\n" + s.Start + "\n" + head.String() + "\n")
	pack, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	state := ""
	if merging {
		state = "merging"
	}
	xerr := helperExec(ctx, d, s.Copy.Helper, user, updateScript, pack, io.Discard, s.BaseRef, tip.String(), ref, newHead.String(), state, msg)
	_, _ = io.Copy(io.Discard, pack)
	werr := cmd.Wait()
	if xerr != nil {
		return fmt.Errorf("update the agent's repository on the engine: %w", xerr)
	}
	if werr != nil {
		return fmt.Errorf("send the base's commits: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// WorktreeText names the sandbox's worktree for messages: its path, or for
// copy mode its volume on the engine.
func (s *Sandbox) WorktreeText() string {
	if s.Copy != nil {
		return "(volume " + s.Copy.Workspace + " on engine " + termsafe.String(s.engineName()) + ")"
	}
	return s.Worktree
}
