package sandbox

import (
	"context"
	"fmt"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// setupMarker is created inside the container (outside /workspace) once the
// setup command succeeded, so a restarted container goes straight to the agent.
const setupMarker = "/var/tmp/.git-sandbox-setup-done"

// setupScript runs the setup command on the container's first start and
// exits; every later start executes the agent ("$@").
const setupScript = `if [ ! -e ` + setupMarker + ` ]; then
  /bin/sh -c "$GIT_SANDBOX_SETUP" || exit $?
  : > ` + setupMarker + `
  exit 0
fi
unset GIT_SANDBOX_SETUP
exec "$@"`

// setupThenRun ran the setup command in a container made for a follow-up
// (its first start), then the agent ("$@") in the same start. Containers
// are no longer made with it (setup now has a start of its own, before the
// login is copied in); it is recognised in containers made before.
const setupThenRun = `if [ ! -e ` + setupMarker + ` ]; then
  /bin/sh -c "$GIT_SANDBOX_SETUP" || exit $?
  : > ` + setupMarker + `
fi
unset GIT_SANDBOX_SETUP
exec "$@"`

// runSetup starts the container once to run the setup command (the
// container's first start does only that). For a new sandbox (rebaseline)
// it then takes the baseline again so what setup wrote is not counted as
// the agent's work; in a follow-up's new container what setup writes is
// the agent's work like anything else since the baseline. A new sandbox
// takes this path only on an engine that cannot keep setup's result as an
// image (see setupWarm).
func (e *Env) runSetup(ctx context.Context, d Engine, sb *Sandbox, io IO, rebaseline bool) error {
	e.UI.Infof("running setup in %s", sb.Display())
	waitC := d.WaitExit(ctx, sb.Container, container.WaitNextExit)
	// The repository chose the setup command, so its output is escaped
	// like the agent's logs.
	out := termsafe.NewWriter(io.Stderr)
	wait, err := d.Attach(ctx, sb.Container, container.Streams{Stdout: out, Stderr: out})
	if err != nil {
		return err
	}
	if err := d.Start(ctx, sb.Container); err != nil {
		return err
	}
	_ = wait()
	_ = out.Flush()
	res := <-waitC
	if res.Err != nil {
		return fmt.Errorf("setup: %w", res.Err)
	}
	if res.Code != 0 && !rebaseline {
		return usererr.New("setup failed with exit code %d in the new container of %s; the agent did not run", res.Code, sb.Display()).
			Hint("fix the setup command (in %s or your config), then give the task again: git sandbox start %s -p TASK (a new container runs setup first)", config.RepoFile, sb.Display())
	}
	if res.Code != 0 {
		return usererr.New("setup failed with exit code %d; the sandbox was not created", res.Code).
			Hint("fix the setup command (in %s or your config) and start again", config.RepoFile)
	}
	if !rebaseline {
		return nil
	}
	snap := sb.Snapshotter()
	taken, err := snap.Take(ctx, rescue.ReasonSetup)
	if err != nil {
		return err
	}
	if taken.New {
		return sb.Update(func(r *record.Record) error { r.Baseline = taken.ID; return nil })
	}
	return nil
}
