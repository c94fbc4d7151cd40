package sandbox

import (
	"context"
	"os"
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

// runVerifyLocked runs verify; the caller holds the verify lock.
func (s *Sandbox) runVerifyLocked(ctx context.Context, snap *rescue.Taken, io IO) (*record.Verdict, error) {
	d, err := s.env.Engine(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.env.ensureImage(ctx, d, s.Image, io); err != nil {
		return nil, err
	}
	cfg := s.env.Config
	mem, err := config.MemoryBytes(cfg.Limits.Memory)
	if err != nil {
		return nil, err
	}
	s.env.UI.Infof("verifying %s (tree %s): %s", s.Display(), shortID(snap.Tree), termsafe.String(s.Verify))
	code, err := verify.Run(ctx, verify.Options{
		Engine:    d,
		CommonDir: s.CommonDir,
		Tree:      snap.Tree,
		Command:   s.Verify,
		Image:     s.Image,
		Name:      s.Container + "-verify",
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: s.RepoID, container.LabelBranch: s.Branch,
			container.LabelRole: container.RoleVerify, container.LabelVersion: version.Version,
		},
		Network: cfg.Network,
		Runtime: cfg.Runtime,
		Limits:  container.Limits{MemoryBytes: mem, CPUs: cfg.Limits.CPUs, Pids: cfg.Limits.Pids},
		UID:     os.Getuid(),
		GID:     os.Getgid(),
		WorkDir: s.env.Layout.VerifyDir(s.Branch),
		Stdout:  io.Stderr,
		Stderr:  io.Stderr,
	})
	if err != nil {
		return nil, err
	}
	return s.newVerdict(snap.Tree, code)
}
