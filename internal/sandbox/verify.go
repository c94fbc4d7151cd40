package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// VerifyNow snapshots the worktree and runs verify on that tree.
func (s *Sandbox) VerifyNow(ctx context.Context, io IO) (*record.Verdict, *rescue.Taken, error) {
	if s.Verify == "" {
		return nil, nil, usererr.New("sandbox %s has no verify command", s.Display()).
			Hint("give one at start (--verify CMD) or set verify in %s or your config", config.RepoFile)
	}
	snap, err := s.Snapshotter().Take(ctx, rescue.ReasonManual)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.RunVerify(ctx, snap, io)
	return v, snap, err
}

// RunVerify runs the sandbox's verify command in a fresh container on the
// snapshot's tree and records the verdict, keyed by that tree, in the
// record (outside the agent's reach).
func (s *Sandbox) RunVerify(ctx context.Context, snap *rescue.Taken, io IO) (*record.Verdict, error) {
	unlock, err := s.LockVerify()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v, ok := s.Verdicts[snap.Tree]; ok {
		return &v, nil
	}
	return s.runVerifyLocked(ctx, snap, io)
}

// LockVerify serialises verify runs of the sandbox and reloads the record,
// so a verdict that appeared while waiting (the supervisor verifies when
// the agent exits) is seen.
func (s *Sandbox) LockVerify() (func(), error) {
	// A verify runs as long as the project's tests do.
	unlock, err := record.LockFor(s.env.Layout.VerifyLock(s.Branch), time.Hour)
	if err != nil {
		return nil, err
	}
	if r, err := s.loadRecord(); err == nil {
		s.Record = r
	}
	return unlock, nil
}

// verifyImage is the image verify runs in: the sandbox's warm image when
// it has one (what setup installed, made before any agent ran), else its
// image, built when it is the default one and missing.
func (s *Sandbox) verifyImage(ctx context.Context, d Engine, io IO) (string, error) {
	if s.WarmImage != "" {
		if ok, err := d.Images().Exists(ctx, s.WarmImage); err == nil && ok {
			return s.WarmImage, nil
		}
	}
	return s.Image, s.env.Toolchain().EnsureImage(ctx, d, s.Image, io.Stderr)
}

// runVerifyLocked runs verify; the caller holds the verify lock.
func (s *Sandbox) runVerifyLocked(ctx context.Context, snap *rescue.Taken, io IO) (*record.Verdict, error) {
	o, cleanup, err := s.treeRun(ctx, io, "-verify", container.RoleVerify, s.env.Layout.Dir(s.Branch), s.env.Layout.VerifyDir(s.Branch))
	if err != nil {
		return nil, err
	}
	defer cleanup()
	o.Tree, o.Command = snap.Tree, s.Verify
	s.env.UI.Infof("verifying %s (tree %s): %s", s.Display(), shortID(snap.Tree), termsafe.String(s.Verify))
	code, err := verify.Run(ctx, o)
	if err != nil {
		return nil, err
	}
	return s.newVerdict(snap.Tree, code)
}

// treeRun prepares a throwaway container run on one tree of this sandbox
// (verify, the commit hooks): its image (the warm one when there is one)
// and what verify.Prepare gives it (the sandbox's settings, its network,
// the export budget). The container is named after the sandbox's plus
// suffix and labelled with role; cleanup removes what the network took.
func (s *Sandbox) treeRun(ctx context.Context, io IO, suffix, role, netDir, workDir string) (verify.Options, func(), error) {
	d, err := s.engine(ctx)
	if err != nil {
		return verify.Options{}, nil, err
	}
	ws := s.Workspace()
	return verify.Prepare(ctx, verify.Beside{
		Engine: d, Config: s.env.Config, Network: s.env.network(),
		CommonDir: s.CommonDir, RepoID: s.RepoID,
		Name: s.Container + suffix, Branch: s.Branch, Role: role,
		Image:  func(ctx context.Context) (string, error) { return s.verifyImage(ctx, d, io) },
		Record: s.Record, NetDir: netDir, WorkDir: workDir,
		Remote: ws.Remote(), EngineName: s.engineName(), Out: io.Stderr,
	})
}

// PushVerify prepares verify's run on a pushed commit of ref: in the
// configured image (which must exist: a push builds nothing), as strict as
// the sandbox of ref's branch when it is one's, in a work directory of its
// own that cleanup removes with what the run made.
func (e *Env) PushVerify(ctx context.Context, ref, commit string, out io.Writer) (verify.Options, func(), error) {
	cfg := e.Config
	d, err := e.Engine(ctx)
	if err != nil {
		return verify.Options{}, nil, err
	}
	var rec *record.Record
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		sb, err := e.Find(b)
		switch {
		case err == nil:
			rec = sb.Record
		case !errors.Is(err, ErrNotFound):
			return verify.Options{}, nil, err
		}
	}
	if err := os.MkdirAll(e.Layout.RepoDir(), 0o700); err != nil {
		return verify.Options{}, nil, err
	}
	work, err := os.MkdirTemp(e.Layout.RepoDir(), ".push-verify-")
	if err != nil {
		return verify.Options{}, nil, err
	}
	name := "push-verify-" + commit[:12]
	o, cleanup, err := verify.Prepare(ctx, verify.Beside{
		Engine: d, Config: cfg, Network: e.network(), CommonDir: e.Repo.CommonDir, RepoID: e.Repo.ID,
		Name: container.Name(e.Repo.ID, e.Repo.Name, name), Branch: name, Role: container.RoleVerify,
		Image:  func(ctx context.Context) (string, error) { return cfg.Image, e.imagePresent(ctx, d, cfg.Image) },
		Record: rec, NetDir: work, WorkDir: work, Pushed: true, Out: out,
	})
	if err != nil {
		_ = os.RemoveAll(work)
		return verify.Options{}, nil, err
	}
	return o, func() { cleanup(); _ = os.RemoveAll(work) }, nil
}

// imagePresent refuses an image the engine lacks.
func (e *Env) imagePresent(ctx context.Context, d Engine, image string) error {
	ok, err := d.Images().Exists(ctx, image)
	if err != nil || ok {
		return err
	}
	return container.ErrImageMissing(image, image == config.DefaultImage())
}
