// Package verify runs a verify command — the definition of done — on
// exactly one tree: the tree is written into a throwaway directory (never
// the user's checkout, never the sandbox worktree), which is mounted into a
// fresh container hardened like every sandbox, and removed afterwards along
// with the container, also when the run is interrupted.
package verify

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/go-units"
	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Engine is what a verify run asks of the container engine.
type Engine interface {
	container.Runner
	CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	Abilities() container.Abilities
}

// Options describe one verify run.
type Options struct {
	Engine Engine
	// CommonDir is the repository whose object store holds Tree.
	CommonDir string
	// Tree is the tree (or commit) verified.
	Tree string
	// Command is the verify command, run with /bin/sh -c.
	Command string
	Image   string
	// Name is the container's name; Labels are stamped on it.
	Name    string
	Labels  map[string]string
	Network container.NetworkMode
	// NetworkName is the network to join (allowlist mode: the run's own
	// internal network, with Env pointing at its proxy).
	NetworkName string
	// Hosts are its hosts-file lines (its proxy's address).
	Hosts   []container.Host
	Limits  container.Limits
	Runtime string
	Env     []string
	UID     int
	GID     int
	// WorkDir is a directory verify may use for its files; it is removed.
	WorkDir string
	// MaxBytes bounds the total size of the files written out (0: none).
	MaxBytes int64
	Stdout   io.Writer
	Stderr   io.Writer

	// Argv, when set, runs instead of /bin/sh -c Command.
	Argv []string
	// Mounts are more host paths for the run; each is mounted read-only.
	Mounts []container.Mount
	// Prepare, when set, runs after the tree is written into files (the
	// directory mounted at /workspace) and before the container starts.
	Prepare func(files string) error
	// Collect, when set, runs after the command ended with the exit code
	// and before the files are removed. The files were the container's:
	// read them as anything the agent could have written.
	Collect func(files string, code int) error
	// Volumes is set for an engine that cannot see this machine's files
	// (copy mode): the tree is streamed into a volume of the engine's by
	// the verify container itself, before the command runs, and the
	// volumes go with the container.
	Volumes bool
}

// Run verifies the tree and returns the command's exit code.
func Run(ctx context.Context, o Options) (code int, err error) {
	if err := os.MkdirAll(o.WorkDir, 0o700); err != nil {
		return -1, fmt.Errorf("verify: %w", err)
	}
	defer os.RemoveAll(o.WorkDir)
	if o.Volumes && (o.Argv != nil || len(o.Mounts) > 0 || o.Prepare != nil || o.Collect != nil) {
		// Those read or mount files of this machine, which such an engine
		// cannot see.
		return -1, errors.New("verify: this run needs files of this machine, and its engine cannot see them")
	}
	argv := o.Argv
	env := []string{"HOME=" + container.Home, "GIT_SANDBOX=1"}
	if argv == nil {
		argv = []string{"/bin/sh", "-c", o.Command}
		env = append(env, "GIT_SANDBOX_VERIFY=1")
	}
	spec := &container.Spec{
		Name:        o.Name,
		Image:       o.Image,
		Argv:        argv,
		Env:         append(env, o.Env...),
		User:        fmt.Sprintf("%d:%d", o.UID, o.GID),
		WorkDir:     container.Workspace,
		Labels:      o.Labels,
		Network:     o.Network,
		NetworkName: o.NetworkName,
		Hosts:       o.Hosts,
		Runtime:     o.Runtime,
		Limits:      o.Limits,
	}
	for _, m := range o.Mounts {
		m.ReadOnly = true
		spec.Mounts = append(spec.Mounts, m)
	}
	spec.Harden()
	in, err := o.input(ctx, spec)
	defer in.done()
	if err != nil {
		return -1, err
	}
	// The container goes whatever happens, Ctrl-C included.
	_ = o.Engine.Remove(context.WithoutCancel(ctx), o.Name)
	// The repository or the agent chose the command and the files it runs
	// on, so its output is escaped like the agent's logs.
	streams := container.Streams{}
	if o.Stdout != nil {
		w := termsafe.NewWriter(o.Stdout)
		defer w.Flush()
		streams.Stdout = w
	}
	if o.Stderr != nil {
		w := termsafe.NewWriter(o.Stderr)
		defer w.Flush()
		streams.Stderr = w
	}
	streams.Stdin = in.stdin
	res, err := container.Run(ctx, o.Engine, spec, container.RunOptions{Streams: streams})
	if err != nil {
		return -1, err
	}
	if res.Err != nil {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		return -1, fmt.Errorf("verify: %w", res.Err)
	}
	if err := in.sent(); err != nil {
		return -1, fmt.Errorf("verify: the tree did not reach the container whole: %w", err)
	}
	if o.Collect != nil {
		if err := o.Collect(in.files, res.Code); err != nil {
			return res.Code, err
		}
	}
	return res.Code, nil
}

// input is how the tree reaches the container: as files in a directory
// of this machine (files), or as a tar on its stdin (volumes).
type input struct {
	stdin io.Reader
	files string
	// sent reports how the tar's writing ended, once the container has
	// read what it would: git archive that dies part way may have written
	// whole blocks that end where an entry does, which tar takes for the
	// whole tree.
	sent func() error
	// done removes what the input made on the engine.
	done func()
}

// input writes the tree where the run reads it from.
func (o Options) input(ctx context.Context, spec *container.Spec) (input, error) {
	if o.Volumes {
		return o.volumes(ctx, spec)
	}
	files, err := o.directories(ctx, spec)
	return input{files: files, sent: func() error { return nil }, done: func() {}}, err
}

// directories writes the tree into the work directory (then runs
// Prepare on it) and mounts it, with a home, ahead of the spec's other
// mounts; it returns the directory of the files.
func (o Options) directories(ctx context.Context, spec *container.Spec) (string, error) {
	files := filepath.Join(o.WorkDir, "workspace")
	home := filepath.Join(o.WorkDir, "home")
	for _, d := range []string{files, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("verify: %w", err)
		}
	}
	if err := Export(ctx, o.CommonDir, o.Tree, files, o.WorkDir, o.MaxBytes); err != nil {
		return "", err
	}
	if o.Prepare != nil {
		if err := o.Prepare(files); err != nil {
			return "", err
		}
	}
	spec.Mounts = append([]container.Mount{
		{Source: files, Target: container.Workspace, Why: "the verified tree, written for this run only"},
		{Source: home, Target: container.Home, Why: "a home for this run only"},
	}, spec.Mounts...)
	for i, m := range spec.Mounts {
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return "", err
		}
		spec.Mounts[i].Source = src
	}
	return files, nil
}

// loader extracts the tar on stdin into the workspace, then runs the
// verify command ($1) in its place.
const loader = `tar -x -f - -C ` + container.Workspace + ` && exec /bin/sh -c "$1"`

// volumes makes the run's two volumes on the engine and the archive of the
// tree the container reads on stdin; its done removes the volumes (after
// the container) and stops the archive.
func (o Options) volumes(ctx context.Context, spec *container.Spec) (input, error) {
	d := o.Engine
	cctx := context.WithoutCancel(ctx)
	var made []string
	var stop func()
	in := input{done: func() {
		if stop != nil {
			stop()
		}
		_ = d.Remove(cctx, o.Name)
		for _, v := range made {
			_ = d.RemoveVolume(cctx, v)
		}
	}}
	for _, v := range []struct{ name, target, why string }{
		{o.Name + "-ws", container.Workspace, "the verified tree, streamed in for this run only"},
		{o.Name + "-home", container.Home, "a home for this run only"},
	} {
		if _, err := d.CreateVolume(ctx, container.VolumeSpec{Name: v.name, Labels: o.Labels}); err != nil {
			return in, err
		}
		made = append(made, v.name)
		spec.Mounts = append(spec.Mounts, container.Mount{Source: v.name, Target: v.target, Volume: true, NoCopy: true, Why: v.why})
	}
	if o.UID != 0 && !d.Abilities().VolumesWritable {
		// A new volume's root is root's: root in a container of its own
		// (no capabilities, but the owner) opens them to the run's user.
		if err := o.openVolumes(ctx, spec); err != nil {
			return in, err
		}
	}
	spec.Argv = []string{"/bin/sh", "-c", loader, "git-sandbox-verify", o.Command}
	spec.OpenStdin, spec.StdinOnce = true, true
	r, wait, err := Archive(ctx, o.CommonDir, o.Tree, o.WorkDir, o.MaxBytes)
	if err != nil {
		return in, err
	}
	// sent drains what the container left unread rather than closing it,
	// so that only git's own failure is reported.
	in.stdin, in.sent = r, sync.OnceValue(wait)
	stop = func() { _ = r.Close(); _ = in.sent() }
	return in, nil
}

// openVolumes makes the volumes' roots writable by the run's user.
func (o Options) openVolumes(ctx context.Context, spec *container.Spec) error {
	d := o.Engine
	prep := *spec
	prep.Name = o.Name + "-prep"
	prep.User = "0:0"
	prep.Network, prep.NetworkName = container.NetworkNone, ""
	prep.Env = nil
	prep.Argv = []string{"chmod", "0777", container.Workspace, container.Home}
	_ = d.Remove(context.WithoutCancel(ctx), prep.Name)
	res, err := container.Run(ctx, d, &prep, container.RunOptions{})
	if err != nil {
		return err
	}
	if res.Err != nil || res.Code != 0 {
		return fmt.Errorf("verify: prepare volumes: exit %d %v", res.Code, res.Err)
	}
	return nil
}

// Archive streams the files of tree as a tar, read as Export reads them
// (a configuration-free git, no attributes), after the same size check.
// wait reports how git archive ended.
func Archive(ctx context.Context, commonDir, tree, scratchParent string, maxBytes int64) (io.ReadCloser, func() error, error) {
	scratch, err := os.MkdirTemp(scratchParent, "scratch-")
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	cleanup := func() { os.RemoveAll(scratch) }
	for _, d := range []string{"objects", "refs", "empty"} {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o700); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("export: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(scratch, "HEAD"), []byte("ref: refs/heads/none\n"), 0o600); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	g := &gitcmd.Runner{
		GitDir:    scratch,
		WorkTree:  filepath.Join(scratch, "empty"),
		ObjectDir: filepath.Join(commonDir, "objects"),
		Isolated:  true,
		Config:    []string{"core.attributesFile=/dev/null", "tar.umask=0022"},
	}
	if maxBytes > 0 {
		if err := checkSize(ctx, g, tree, maxBytes); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	cmd := g.Command(ctx, "archive", "--worktree-attributes", "--format=tar", tree)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	wait := func() error {
		_, _ = io.Copy(io.Discard, out)
		defer cleanup()
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("export: git archive: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	return out, wait, nil
}

// Export writes the files of tree into dir (which must be empty). git
// archive reads the tree from the object store in a scratch git directory
// with no configuration and no attributes, so no filter, eol conversion or
// export-ignore applies: the files are byte for byte the tree's. They are
// extracted confined beneath dir, symlinks written as symlinks.
//
// The tree's files are totalled first, from the object headers (a sparse
// or highly compressible file costs nothing to measure), and a tree over
// maxBytes (0: no bound) is refused before anything is written.
func Export(ctx context.Context, commonDir, tree, dir, scratchParent string, maxBytes int64) error {
	scratch, err := scratchGitDir(scratchParent)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(scratch)
	g := &gitcmd.Runner{
		GitDir:    scratch,
		WorkTree:  filepath.Join(scratch, "empty"),
		ObjectDir: filepath.Join(commonDir, "objects"),
		Isolated:  true,
		Config:    []string{"core.attributesFile=/dev/null", "tar.umask=0022"},
	}
	if maxBytes > 0 {
		if err := checkSize(ctx, g, tree, maxBytes); err != nil {
			return err
		}
	}
	cmd := g.Command(ctx, "archive", "--worktree-attributes", "--format=tar", tree)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	exErr := extract(out, dir)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("export: git archive: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return exErr
}

// scratchGitDir makes an empty git directory of this process's own under
// parent, with an empty work tree beside its files ("empty").
func scratchGitDir(parent string) (string, error) {
	scratch, err := os.MkdirTemp(parent, "scratch-")
	if err != nil {
		return "", err
	}
	for _, d := range []string{"objects", "refs", "empty"} {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o700); err != nil {
			os.RemoveAll(scratch)
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(scratch, "HEAD"), []byte("ref: refs/heads/none\n"), 0o600); err != nil {
		os.RemoveAll(scratch)
		return "", err
	}
	return scratch, nil
}

func extract(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		name := path.Clean(strings.TrimSuffix(h.Name, "/"))
		if name == "." || strings.HasPrefix(name, "../") || path.IsAbs(name) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, 0o755)
		case tar.TypeReg:
			mode := os.FileMode(0o644)
			if h.Mode&0o100 != 0 {
				mode = 0o755
			}
			var f *os.File
			f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		case tar.TypeSymlink:
			err = root.Symlink(h.Linkname, name)
		default:
			// pax headers and the like carry no files.
			continue
		}
		if err != nil {
			return fmt.Errorf("export %s: %w", name, err)
		}
	}
}

// checkSize refuses a tree whose files total more than max bytes, naming
// the largest.
func checkSize(ctx context.Context, g *gitcmd.Runner, tree string, max int64) error {
	cmd := g.Command(ctx, "ls-tree", "-r", "-l", "-z", "--full-tree", tree)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var total, largest int64
	var largestPath string
	r := bufio.NewReader(out)
	for {
		rec, err := r.ReadString(0)
		if err != nil {
			break
		}
		// "<mode> <type> <id> <size>\t<path>\x00"
		meta, p, _ := strings.Cut(strings.TrimSuffix(rec, "\x00"), "\t")
		f := strings.Fields(meta)
		if len(f) != 4 || f[1] != "blob" {
			continue
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		total += n
		if n > largest {
			largest, largestPath = n, p
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("export: git ls-tree: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if total > max {
		return usererr.New("the files of tree %s total %s, over the %s verify may write out (budget.export); the largest is %s (%s)",
			gitcmd.Hash(tree).Short(), units.BytesSize(float64(total)), units.BytesSize(float64(max)), termsafe.String(largestPath), units.BytesSize(float64(largest))).
			Hint("nothing was written; remove the file from the work, or raise budget.export in your config if it belongs").
			WithCode(usererr.ExitRefused)
	}
	return nil
}
