package container

import (
	"context"
	"fmt"

	dcontainer "github.com/docker/docker/api/types/container"
)

// CommitOptions say how a stopped container's file system becomes an
// image.
type CommitOptions struct {
	// Tag names the image.
	Tag string
	// Labels are the image's labels; they win over the container's.
	Labels map[string]string
	// Cmd is the image's default command (the container's own is a
	// placeholder that should not outlive it).
	Cmd []string
}

// CommitContainer makes an image of a container's file system — what
// differs from its image, outside its bind mounts and volumes — and
// returns the image's id. The container should be stopped: nothing then
// writes while the layer is read.
//
// The engine folds the container's own configuration into the image's
// (its environment, labels and user where the request leaves them out),
// so the container must be made with nothing in its configuration that
// the image may not keep: a command run in it through Exec takes its
// environment with it.
func (d *Docker) CommitContainer(ctx context.Context, id string, o CommitOptions) (string, error) {
	resp, err := d.api.ContainerCommit(ctx, id, dcontainer.CommitOptions{
		Reference: o.Tag,
		Comment:   "git sandbox: the result of a sandbox's setup",
		Pause:     false,
		Config:    &dcontainer.Config{Labels: o.Labels, Cmd: o.Cmd},
	})
	if err != nil {
		return "", fmt.Errorf("commit container: %w", sdkErr(err))
	}
	return resp.ID, nil
}
