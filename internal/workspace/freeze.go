package workspace

import (
	"context"
	"fmt"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/holdat"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
)

// Freezer pauses the container name while a snapshot reads the worktree,
// if it runs. A running container that cannot be paused, or an engine
// that cannot be asked, fails the snapshot: reading the worktree while
// the agent can swap symlinks in is not safe.
//
// Snapshots hold the sandbox's lock, and so does starting its container,
// so a container found paused here was left paused by a snapshotter that
// died: this one thaws it when done. Ctrl-C and termination wait until the
// agent is thawed. With no container yet (the baseline) no agent has run
// and there is nothing to freeze (nil).
func Freezer(connect func(context.Context) (container.Engine, error), name string, trace func(string, ...any)) Freeze {
	if name == "" {
		return nil
	}
	return func(ctx context.Context) (func(), error) {
		d, err := connect(ctx)
		if err != nil {
			return nil, fmt.Errorf("cannot pause the agent to read its files safely: %w", err)
		}
		// Signals wait until the agent runs again, then act.
		release := sigstack.Hold()
		err = d.Pause(ctx, name)
		trace("pause %s: %v", name, err)
		switch {
		case err == nil:
			// The fault tests stop here: the agent paused, its files
			// not yet read.
			holdat.Point("snapshot: paused")
		case container.IsNotFound(err):
			release()
			return func() {}, nil
		case container.IsConflict(err):
			st, ierr := d.Inspect(ctx, name)
			if ierr != nil || !st.Paused {
				// Not running: nothing can change the files.
				release()
				return func() {}, nil
			}
			// Paused and left so: frozen now, thawed by us afterwards.
		default:
			release()
			return nil, fmt.Errorf("cannot pause the agent to read its files safely: %w", err)
		}
		return func() {
			_ = d.Unpause(context.WithoutCancel(ctx), name)
			release()
		}, nil
	}
}
