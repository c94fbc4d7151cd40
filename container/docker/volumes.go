package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/volume"

	"github.com/git-sandbox/git-sandbox/container"
)

// CreateVolume creates a volume, stamped as managed by git sandbox.
func (d *Engine) CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error) {
	v, err := d.api.VolumeCreate(ctx, volume.CreateOptions{Name: s.Name, Labels: managedLabels(s.Labels)})
	if err != nil {
		return nil, fmt.Errorf("create volume %s: %w", s.Name, sdkErr(err))
	}
	return &container.Volume{Name: v.Name, Labels: v.Labels}, nil
}

// RemoveVolume removes a volume; a missing one is not an error, one still
// in use is ErrConflict.
func (d *Engine) RemoveVolume(ctx context.Context, name string) error {
	err := sdkErr(d.api.VolumeRemove(ctx, name, false))
	if err != nil && !container.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}

// ListVolumes returns the managed volumes carrying every given label.
func (d *Engine) ListVolumes(ctx context.Context, labels ...string) ([]container.Volume, error) {
	resp, err := d.api.VolumeList(ctx, volume.ListOptions{Filters: managedFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", sdkErr(err))
	}
	out := make([]container.Volume, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		out = append(out, container.Volume{Name: v.Name, Labels: v.Labels})
	}
	return out, nil
}
