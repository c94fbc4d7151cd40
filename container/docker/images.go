package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// images are a Docker engine's image operations: all of them.
type images struct{ d *Engine }

// Exists reports whether an image is present locally.
func (m images) Exists(ctx context.Context, ref string) (bool, error) {
	_, err := m.d.api.ImageInspect(ctx, ref)
	err = sdkErr(err)
	if err == nil {
		return true, nil
	}
	if container.IsNotFound(err) {
		return false, nil
	}
	return false, fmt.Errorf("inspect image %s: %w", ref, err)
}

// Build builds the default image from the embedded Dockerfile. It never
// pulls a base that is present locally, so it works offline from a local
// base image.
func (m images) Build(ctx context.Context, o container.BuildOptions) error {
	haveBase, err := m.Exists(ctx, o.Base)
	if err != nil {
		return err
	}
	var agents []string
	if !o.NoAgents {
		for _, name := range slices.Sorted(maps.Keys(o.Agents)) {
			agents = append(agents, name+"="+o.Agents[name])
		}
	}
	// Through BuildContext: on a terminal the engine's progress is drawn in
	// place; otherwise one line per step (and the last lines of a failure).
	_, err = m.BuildContext(ctx, container.ContextBuild{
		Context:    container.DockerfileContext(container.LayerDockerfile()),
		Dockerfile: "Dockerfile",
		Tags:       []string{o.Tag},
		Args:       map[string]string{"BASE": o.Base, "AGENT_PACKAGES": strings.Join(agents, " ")},
		Labels:     map[string]string{container.LabelImage: "1", container.LabelImage + ".base": o.Base},
		NoCache:    o.NoCache,
		Progress:   o.Progress,
		TerminalFd: o.TerminalFd,
		IsTerminal: o.IsTerminal,
	})
	if err != nil {
		return buildError(o, haveBase, err)
	}
	return m.labelAgents(ctx, o)
}

// labelAgents stamps LabelAgents on a freshly built image: which agent CLIs
// it has is known only once its build ran, so the list is read from the
// image and a label-only image of the same tag is built on top (its parent
// goes with it). Later checks are then an inspect, not a container run.
func (m images) labelAgents(ctx context.Context, o container.BuildOptions) error {
	info, ok, err := m.Inspect(ctx, o.Tag)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("image %s vanished right after it was built", o.Tag)
	}
	have, err := m.ProbeAgents(ctx, o.Tag)
	if err != nil {
		return err
	}
	labels := maps.Clone(info.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[container.LabelImage] = "1"
	labels[container.LabelImage+".base"] = o.Base
	labels[container.LabelAgents] = strings.Join(have, ",")
	_, err = m.BuildContext(ctx, container.ContextBuild{
		Context:    container.DockerfileContext([]byte("FROM " + info.ID + "\n")),
		Dockerfile: "Dockerfile",
		Tags:       []string{o.Tag},
		Labels:     labels,
		Progress:   io.Discard,
	})
	if err != nil {
		return fmt.Errorf("label %s with its agent CLIs: %w", o.Tag, err)
	}
	return nil
}

func buildError(o container.BuildOptions, haveBase bool, err error) error {
	cause := err.Error()
	if ue, ok := usererr.As(err); ok {
		cause = strings.TrimPrefix(ue.Msg, "image build failed: ")
	}
	if !haveBase {
		return usererr.Wrap(err, "base image %s is not present locally and could not be pulled: %s", o.Base, cause).
			Hint("build from an image you have: git sandbox image build --base IMAGE (docker images lists them)")
	}
	return usererr.Wrap(err, "image build failed: %s", cause).
		Hint("the output above shows the failing step; rerun with --no-cache after fixing it")
}

// Agents lists the agent CLIs the image says it has installed: the
// LabelAgents label when the image carries it (an inspect), else the list
// the build wrote to /etc/git-sandbox-agents, read by a throwaway,
// hardened, network-less container of it (images built before the label).
func (m images) Agents(ctx context.Context, image string) ([]string, error) {
	info, ok, err := m.Inspect(ctx, image)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, container.ErrImageMissing(image, false)
	}
	if v, labelled := info.Labels[container.LabelAgents]; labelled {
		return container.SplitAgents(v), nil
	}
	return m.ProbeAgents(ctx, image)
}

// ProbeAgents reads the list of agent CLIs the build wrote to
// /etc/git-sandbox-agents, whatever labels the image inherited.
func (m images) ProbeAgents(ctx context.Context, image string) ([]string, error) {
	spec := &container.Spec{
		Name:    "",
		Image:   image,
		Argv:    []string{"cat", "/etc/git-sandbox-agents"},
		User:    "65534:65534",
		Network: container.NetworkNone,
		Limits:  container.Limits{Pids: 16, MemoryBytes: 64 << 20},
		Labels:  map[string]string{container.LabelManaged: "1", container.LabelRole: "probe"},
	}
	spec.Harden()
	var out bytes.Buffer
	res, err := container.Run(ctx, m.d, spec, container.RunOptions{Streams: container.Streams{Stdout: &out}})
	if err != nil {
		return nil, err
	}
	if res.Err != nil || res.Code != 0 {
		return nil, fmt.Errorf("read the image's agent list: exit %d %v", res.Code, res.Err)
	}
	return strings.Fields(out.String()), nil
}

// Inspect returns a local image's id, labels and environment; ok is false
// when no image has that reference.
func (m images) Inspect(ctx context.Context, ref string) (info container.ImageInfo, ok bool, err error) {
	return m.d.inspectImage(ctx, ref)
}

func (d *Engine) inspectImage(ctx context.Context, ref string) (info container.ImageInfo, ok bool, err error) {
	img, err := d.api.ImageInspect(ctx, ref)
	err = sdkErr(err)
	if err != nil {
		if container.IsNotFound(err) {
			return container.ImageInfo{}, false, nil
		}
		return container.ImageInfo{}, false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	info.ID = img.ID
	if img.Config != nil {
		info.Labels = img.Config.Labels
		info.Env = img.Config.Env
		info.Cmd = img.Config.Cmd
	}
	info.Created, _ = time.Parse(time.RFC3339Nano, img.Created)
	return info, true, nil
}

// List returns the local images carrying every given label (key=value).
func (m images) List(ctx context.Context, labels ...string) ([]container.Image, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := m.d.api.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", sdkErr(err))
	}
	out := make([]container.Image, 0, len(list))
	for _, i := range list {
		out = append(out, container.Image{ID: i.ID, Tags: i.RepoTags, Labels: i.Labels, Created: time.Unix(i.Created, 0)})
	}
	return out, nil
}

// Remove removes a tag (or an image by id) and the untagged parents only
// it had; an image a container uses is ErrConflict, a missing one is not
// an error.
func (m images) Remove(ctx context.Context, ref string) error {
	_, err := m.d.api.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	err = sdkErr(err)
	if err != nil && !container.IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// Commit makes an image of a container's file system — what differs from
// its image, outside its bind mounts and volumes — and returns the image's
// id. The container should be stopped: nothing then writes while the
// layer is read.
//
// The engine folds the container's own configuration into the image's
// (its environment, labels and user where the request leaves them out),
// so the container must be made with nothing in its configuration that
// the image may not keep: a command run in it through Exec takes its
// environment with it.
func (m images) Commit(ctx context.Context, id string, o container.CommitOptions) (string, error) {
	resp, err := m.d.api.ContainerCommit(ctx, id, dcontainer.CommitOptions{
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

// Save streams an image as `docker save` writes it; the caller closes
// the stream.
func (m images) Save(ctx context.Context, ref string) (io.ReadCloser, error) {
	r, err := m.d.api.ImageSave(ctx, []string{ref})
	if err != nil {
		return nil, fmt.Errorf("save image %s: %w", ref, sdkErr(err))
	}
	return r, nil
}

// Load loads an image stream `docker save` wrote.
func (m images) Load(ctx context.Context, r io.Reader) error {
	resp, err := m.d.api.ImageLoad(ctx, r, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load image: %w", sdkErr(err))
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg engineMessage
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("load image: %w", err)
		}
		if msg.Error != "" {
			return fmt.Errorf("load image: %s", msg.Error)
		}
	}
}
