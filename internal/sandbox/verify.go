package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
	"github.com/git-sandbox/git-sandbox/internal/version"
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
	unlock, err := s.lockVerify()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v, ok := s.Verdicts[snap.Tree]; ok {
		return &v, nil
	}
	return s.runVerifyLocked(ctx, snap, io)
}

// lockVerify serialises verify runs of the sandbox and reloads the record,
// so a verdict that appeared while waiting (the supervisor verifies when
// the agent exits) is seen.
func (s *Sandbox) lockVerify() (func(), error) {
	// A verify runs as long as the project's tests do.
	unlock, err := record.LockFor(s.env.Layout.VerifyLock(s.Branch), time.Hour)
	if err != nil {
		return nil, err
	}
	if r, err := record.Load(s.env.Layout.Record(s.Branch)); err == nil {
		s.Record = r
	}
	return unlock, nil
}

// verifyImage is the image verify runs in: the sandbox's warm image when
// it has one (what setup installed, made before any agent ran), else its
// image, built when it is the default one and missing.
func (s *Sandbox) verifyImage(ctx context.Context, d Engine, io IO) (string, error) {
	if s.WarmImage != "" {
		if ok, err := d.ImageExists(ctx, s.WarmImage); err == nil && ok {
			return s.WarmImage, nil
		}
	}
	return s.Image, s.env.ensureImage(ctx, d, s.Image, io)
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
// (verify, the commit hooks): its image (the warm one when there is one);
// its own settings, so such a run never gets more network, a weaker
// runtime or higher limits than the sandbox was started with; its network
// (none unless verify_allow, whose proxy files go in netDir); the export
// budget.
// The container is named after the sandbox's plus suffix and labelled
// with role; cleanup removes what the network took.
func (s *Sandbox) treeRun(ctx context.Context, io IO, suffix, role, netDir, workDir string) (verify.Options, func(), error) {
	d, err := s.engine(ctx)
	if err != nil {
		return verify.Options{}, nil, err
	}
	if s.Copy != nil {
		if vp, err := VerifyPolicy(s.env.Config); err != nil || vp != nil {
			if err != nil {
				return verify.Options{}, nil, err
			}
			return verify.Options{}, nil, errNotInCopyMode(s, "verify with verify_allow (its egress proxy)")
		}
	}
	image, err := s.verifyImage(ctx, d, io)
	if err != nil {
		return verify.Options{}, nil, err
	}
	set, err := s.RunSettings()
	if err != nil {
		return verify.Options{}, nil, err
	}
	maxBytes, err := ExportBudget(s.env.Config)
	if err != nil {
		return verify.Options{}, nil, err
	}
	name := s.Container + suffix
	network, netName, env, cleanup, err := s.env.VerifyNetwork(ctx, d, name, s.Branch, image, set, netDir)
	if err != nil {
		return verify.Options{}, nil, err
	}
	return verify.Options{
		Engine:    d,
		CommonDir: s.CommonDir,
		Image:     image,
		Name:      name,
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: s.RepoID, container.LabelBranch: s.Branch,
			container.LabelRole: role, container.LabelVersion: version.Version,
		},
		Network:     network,
		NetworkName: netName,
		Env:         env,
		Runtime:     set.Runtime,
		Limits:      set.Limits,
		UID:         os.Getuid(),
		GID:         os.Getgid(),
		WorkDir:     workDir,
		MaxBytes:    maxBytes,
		Stdout:      io.Stderr,
		Stderr:      io.Stderr,
		Volumes:     s.Copy != nil,
	}, cleanup, nil
}

// VerifyNetwork gives a verify container its network: none, unless the
// user's verify_allow lists hosts and set (the sandbox's own settings, or
// the config's) allows a network at all; then networks and a proxy of its
// own, made here and removed by cleanup. dir holds the proxy's files.
func (e *Env) VerifyNetwork(ctx context.Context, d Engine, name, branch, image string, set RunSettings, dir string) (mode container.NetworkMode, netName string, env []string, cleanup func(), err error) {
	none := func() {}
	vp, err := VerifyPolicy(e.Config)
	if err != nil {
		return "", "", nil, none, err
	}
	if vp == nil || set.Network == container.NetworkNone {
		return container.NetworkNone, "", nil, none, nil
	}
	eg, err := e.planEgressFor(name, branch, image, set.Runtime, vp, filepath.Join(dir, "verify-proxy"), filepath.Join(dir, "verify-net"))
	if err != nil {
		return "", "", nil, none, err
	}
	var u undo
	if err := e.createEgress(ctx, d, branch, eg, &u); err != nil {
		u.run()
		return "", "", nil, none, err
	}
	return container.NetworkAllowlist, eg.InternalNetwork, proxyEnv(eg.ProxyURL), u.run, nil
}
