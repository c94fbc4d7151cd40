// Package toolchain owns what a sandbox's image holds beyond the base
// image: the repository's setup command (run once, on the container's
// first start or in a container of its own), its result kept as a warm
// image the next sandbox of the same inputs starts from, and the cache
// volumes. It runs containers; what setup means for the sandbox's
// snapshots (a new baseline) is its caller's.
package toolchain

import (
	"context"
	"fmt"
	"io"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// setupMarker is created inside the container (outside /workspace) once the
// setup command succeeded, so a restarted container goes straight to the agent.
const setupMarker = "/var/tmp/.git-sandbox-setup-done"

// SetupScript runs the setup command on the container's first start and
// exits; every later start executes the agent ("$@").
const SetupScript = `if [ ! -e ` + setupMarker + ` ]; then
  /bin/sh -c "$GIT_SANDBOX_SETUP" || exit $?
  : > ` + setupMarker + `
  exit 0
fi
unset GIT_SANDBOX_SETUP
exec "$@"`

// SetupThenRun ran the setup command in a container made for a follow-up
// (its first start), then the agent ("$@") in the same start. Containers
// are no longer made with it (setup now has a start of its own, before the
// login is copied in); it is recognised in containers made before.
const SetupThenRun = `if [ ! -e ` + setupMarker + ` ]; then
  /bin/sh -c "$GIT_SANDBOX_SETUP" || exit $?
  : > ` + setupMarker + `
fi
unset GIT_SANDBOX_SETUP
exec "$@"`

// RunSetup starts the container once to run the setup command (the
// container's first start does only that), its output escaped to out.
// A failure of a new sandbox's setup means the sandbox was not created;
// in a follow-up's new container it means the agent did not run.
func (e *Env) RunSetup(ctx context.Context, d container.Engine, o SetupRun) error {
	e.UI.Infof("running setup in %s", o.Display)
	waitC := d.WaitExit(ctx, o.Container, container.WaitNextExit)
	// The repository chose the setup command, so its output is escaped
	// like the agent's logs.
	out := termsafe.NewWriter(o.Out)
	wait, err := d.Attach(ctx, o.Container, container.Streams{Stdout: out, Stderr: out})
	if err != nil {
		return err
	}
	if err := d.Start(ctx, o.Container); err != nil {
		return err
	}
	_ = wait()
	_ = out.Flush()
	res := <-waitC
	if res.Err != nil {
		return fmt.Errorf("setup: %w", res.Err)
	}
	if res.Code != 0 && o.FollowUp {
		return usererr.New("setup failed with exit code %d in the new container of %s; the agent did not run", res.Code, o.Display).
			Hint("fix the setup command (in %s or your config), then give the task again: git sandbox start %s -p TASK (a new container runs setup first)", config.RepoFile, o.Display)
	}
	if res.Code != 0 {
		return usererr.New("setup failed with exit code %d; the sandbox was not created", res.Code).
			Hint("fix the setup command (in %s or your config) and start again", config.RepoFile)
	}
	return nil
}

// SetupRun is one run of setup on a container's first start.
type SetupRun struct {
	// Container is the sandbox's container; Display its name for
	// messages.
	Container, Display string
	// FollowUp says the container was made for a follow-up task (not a
	// new sandbox).
	FollowUp bool
	// Out receives setup's output.
	Out io.Writer
}

// Env is what the toolchain works with.
type Env struct {
	Repo   *worktree.Repo
	Config *config.Loaded
	UI     *ui.Printer
}
