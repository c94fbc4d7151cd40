// Package docker is the Docker Engine backend of container.Engine, through
// the engine's Go SDK: connecting (the environment's daemon, a tcp://,
// ssh:// or unix:// endpoint, a Docker context), the spec's conversion into
// the SDK's create arguments, create, start, attach, logs, exec, wait,
// stop and remove, container events, volumes and networks, and images
// (build, build contexts, commit, save and load, list, remove). The API
// version is negotiated, so Engine API 1.41 (Docker 20.10) and current
// engines both work. It is the only package that imports the Docker SDK.
package docker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Engine is a connected Docker Engine client.
type Engine struct {
	api *client.Client
}

var _ container.Engine = (*Engine)(nil)

// Connect opens a client from the environment (DOCKER_HOST and friends),
// negotiates the API version and checks the daemon answers.
func Connect(ctx context.Context) (*Engine, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, errUnreachable(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := api.Ping(pctx)
	if err != nil {
		api.Close()
		return nil, errUnreachable(err)
	}
	api.NegotiateAPIVersionPing(ping)
	return &Engine{api: api}, nil
}

func errUnreachable(err error) error {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = client.DefaultDockerHost
	}
	return usererr.Wrap(err, "cannot reach the Docker daemon at %s", host).
		Hint("start Docker (for example: sudo systemctl start docker), or point DOCKER_HOST at a running daemon").
		Hint("git sandbox doctor checks the whole set-up")
}

// APIVersion is the negotiated Engine API version.
func (d *Engine) APIVersion() string { return d.api.ClientVersion() }

// ServerVersion returns the engine's version string.
func (d *Engine) ServerVersion(ctx context.Context) (string, error) {
	v, err := d.api.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	return v.Version, nil
}

// Check describes the engine: its version and the negotiated API version.
// Connecting has checked that it answers.
func (d *Engine) Check(ctx context.Context) (string, error) {
	sv, _ := d.ServerVersion(ctx)
	return fmt.Sprintf("engine %s, API %s", sv, d.APIVersion()), nil
}

// Abilities: a Docker engine mounts its machine's directories, makes
// volumes root's, does every image operation, and gives a network's
// member the address asked for.
func (d *Engine) Abilities() container.Abilities {
	return container.Abilities{
		Kind: container.KindDocker, BindMounts: true,
		CommitImages: true, BuildImages: true, MoveImages: true, FixedAddresses: true,
	}
}

// MemoryBytes is the engine machine's total memory.
func (d *Engine) MemoryBytes(ctx context.Context) (int64, error) {
	info, err := d.api.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("engine info: %w", sdkErr(err))
	}
	return info.MemTotal, nil
}

// Images reaches the engine's images.
func (d *Engine) Images() container.Images { return images{d} }

// Close releases the client.
func (d *Engine) Close() error { return d.api.Close() }

// sdkErr maps a Docker SDK error onto ErrNotFound or ErrConflict where it
// means one of them; other errors pass unchanged.
func sdkErr(err error) error {
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return container.WithKind(container.ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return container.WithKind(container.ErrConflict, err)
	case strings.Contains(err.Error(), "is ambiguous"):
		// Two networks of one name: the daemon keeps a container's
		// networks by name, even one it was given by id, and looks the
		// name up again at start.
		return container.WithKind(container.ErrAmbiguousName, err)
	}
	return err
}

// managedLabels returns labels with LabelManaged set, so the list calls,
// which only ever see managed objects, find it.
func managedLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	if out[container.LabelManaged] == "" {
		out[container.LabelManaged] = "1"
	}
	return out
}

// managedFilter selects objects created by git sandbox that carry every
// given label.
func managedFilter(labels []string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", container.LabelManaged))
	for _, l := range labels {
		f.Add("label", l)
	}
	return f
}
