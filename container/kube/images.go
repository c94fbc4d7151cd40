package kube

import (
	"context"
	"io"

	"github.com/git-sandbox/git-sandbox/container"
)

// images are what a cluster does with images for git sandbox: nothing but
// run them. The engine's image setting replaces every container's image
// but git sandbox's own proxy image (which proxy_image replaces); the
// nodes pull them or have them.
type images struct{ e *Engine }

// Images reaches the engine's images.
func (e *Engine) Images() container.Images { return images{e} }

// Exists cannot be answered from here: what a node has or can pull shows
// when a Pod starts (Start says it plainly then).
func (m images) Exists(ctx context.Context, ref string) (bool, error) { return true, nil }

// Agents cannot read an image's labels through the cluster.
func (m images) Agents(ctx context.Context, image string) ([]string, error) {
	return nil, container.NotSupported("a Kubernetes engine cannot read an image's labels")
}

// ProbeAgents cannot run a probe of an image the nodes may not have.
func (m images) ProbeAgents(ctx context.Context, image string) ([]string, error) {
	return nil, container.NotSupported("a Kubernetes engine cannot read an image's labels")
}

// Inspect cannot read an image through the cluster.
func (m images) Inspect(ctx context.Context, ref string) (container.ImageInfo, bool, error) {
	return container.ImageInfo{}, false, m.unsupported("read images")
}

// Build is not something a cluster does for git sandbox.
func (m images) Build(ctx context.Context, o container.BuildOptions) error {
	return m.unsupported("build images")
}

// BuildContext is not something a cluster does for git sandbox.
func (m images) BuildContext(ctx context.Context, o container.ContextBuild) (string, error) {
	return "", m.unsupported("build images")
}

// Commit is not something a cluster does.
func (m images) Commit(ctx context.Context, id string, o container.CommitOptions) (string, error) {
	return "", m.unsupported("keep a container as an image")
}

// Save cannot read an image out of the cluster.
func (m images) Save(ctx context.Context, ref string) (io.ReadCloser, error) {
	return nil, m.unsupported("save images")
}

// Load cannot put an image onto the cluster's nodes.
func (m images) Load(ctx context.Context, r io.Reader) error {
	return m.unsupported("load images")
}

// List cannot list the images of the cluster's nodes.
func (m images) List(ctx context.Context, labels ...string) ([]container.Image, error) {
	return nil, m.unsupported("list images")
}

// Remove cannot remove an image from the cluster's nodes.
func (m images) Remove(ctx context.Context, ref string) error {
	return m.unsupported("remove images")
}

// Push cannot push from a cluster's nodes.
func (m images) Push(ctx context.Context, source, ref string, progress io.Writer) error {
	return m.unsupported("push images")
}

// unsupported is the error of an image operation a cluster does not do,
// with what to do instead.
func (m images) unsupported(what string) error {
	name := m.e.opts.Name
	return container.NotSupported("engine %s (Kubernetes) does not %s", name, what).
		Hint("build the image with git sandbox image build on a Docker engine, set image = \"REGISTRY/…\" in [[engine]] %s, and push it there with git sandbox image push --engine %s", name, name)
}
