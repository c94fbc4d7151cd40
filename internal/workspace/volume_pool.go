package workspace

import (
	"context"
	"fmt"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
)

// fromPool takes a ready helper, with its empty volumes, from the engine's
// warm pool when it keeps one (container.HelperPool): the sandbox's
// volumes and helper are then those, renamed in its record and in the
// agent's mounts, and nothing has to be made or waited for. It reports
// whether it took one.
func (v *Volume) fromPool(ctx context.Context, u *steps.Undo, d Engine, o CreateOptions, volumeLabels map[string]string) (bool, error) {
	pool, ok := d.(container.HelperPool)
	if !ok {
		return false, nil
	}
	planned := *v.rec.Copy
	taken, err := pool.TakeHelper(ctx, HelperSpec(planned, v.rec.Branch, o.Agent), volumeLabels)
	if err != nil || taken == nil {
		return false, err
	}
	got := record.Copy{
		Helper:    taken.Name,
		Workspace: taken.Volumes[container.Workspace],
		GitDir:    taken.Volumes[CopyGitDir],
		Home:      taken.Volumes[copyHome],
		State:     taken.Volumes[copyState],
	}
	cctx := context.WithoutCancel(ctx)
	u.Add(func() {
		_ = d.Remove(cctx, got.Helper)
		for _, name := range []string{got.Workspace, got.GitDir, got.Home, got.State} {
			if name != "" {
				_ = d.RemoveVolume(cctx, name)
			}
		}
	})
	if got.Workspace == "" || got.GitDir == "" || got.Home == "" || got.State == "" {
		return false, fmt.Errorf("the helper %s taken from the warm pool lacks a volume", taken.Name)
	}
	RenameVolumes(o.Agent.Mounts, planned, got)
	*v.rec.Copy = got
	return true, nil
}

// RenameVolumes makes mounts of a copy-mode sandbox's planned volumes
// mounts of the ones it got (from a warm pool).
func RenameVolumes(mounts []container.Mount, planned, got record.Copy) {
	to := map[string]string{
		planned.Workspace: got.Workspace, planned.GitDir: got.GitDir,
		planned.Home: got.Home, planned.State: got.State,
	}
	for i, m := range mounts {
		if n, ok := to[m.Source]; ok && m.Volume {
			mounts[i].Source = n
		}
	}
}
