package fake

import (
	"context"
	"io"
	"net/netip"

	"github.com/git-sandbox/git-sandbox/container"
)

// CreateVolume implements the engine's CreateVolume.
func (s *Shared) CreateVolume(ctx context.Context, spec container.VolumeSpec) (v *container.Volume, err error) {
	err = s.do(func(f *Engine) error {
		v, err = f.CreateVolume(ctx, spec)
		return err
	})
	return v, err
}

// RemoveVolume implements the engine's RemoveVolume.
func (s *Shared) RemoveVolume(ctx context.Context, name string) error {
	return s.do(func(f *Engine) error { return f.RemoveVolume(ctx, name) })
}

// ListVolumes implements the engine's ListVolumes.
func (s *Shared) ListVolumes(ctx context.Context, labels ...string) (out []container.Volume, err error) {
	err = s.read(func(f *Engine) error {
		out, err = f.ListVolumes(ctx, labels...)
		return err
	})
	return out, err
}

// CreateNetwork implements the engine's CreateNetwork.
func (s *Shared) CreateNetwork(ctx context.Context, spec container.NetworkSpec) (n *container.Network, err error) {
	err = s.do(func(f *Engine) error {
		n, err = f.CreateNetwork(ctx, spec)
		return err
	})
	return n, err
}

// ConnectNetwork implements the engine's ConnectNetwork.
func (s *Shared) ConnectNetwork(ctx context.Context, networkID, containerID string, addr netip.Addr) error {
	return s.do(func(f *Engine) error { return f.ConnectNetwork(ctx, networkID, containerID, addr) })
}

// RemoveNetwork implements the engine's RemoveNetwork.
func (s *Shared) RemoveNetwork(ctx context.Context, networkID string) error {
	return s.do(func(f *Engine) error { return f.RemoveNetwork(ctx, networkID) })
}

// ListNetworks implements the engine's ListNetworks.
func (s *Shared) ListNetworks(ctx context.Context, labels ...string) (out []container.Network, err error) {
	err = s.read(func(f *Engine) error {
		out, err = f.ListNetworks(ctx, labels...)
		return err
	})
	return out, err
}

// Abilities implements the engine's Abilities: it mounts anything, keeps
// no images of containers, and loads images (their tags: the egress
// proxy's image is loaded on the first allowlist start).
func (s *Shared) Abilities() container.Abilities {
	return container.Abilities{Kind: container.KindFake, BindMounts: true, MoveImages: true, FixedAddresses: true}
}

// Check implements the engine's Check.
func (s *Shared) Check(ctx context.Context) (line string, err error) {
	err = s.read(func(f *Engine) error {
		line, err = f.Check(ctx)
		return err
	})
	return line, err
}

// MemoryBytes implements the engine's MemoryBytes: the fake has no size.
func (s *Shared) MemoryBytes(ctx context.Context) (int64, error) {
	return 0, container.NotSupported("the fake engine has no memory size")
}

// Close implements the engine's Close: there is no connection.
func (s *Shared) Close() error { return nil }

// Images implements the engine's Images: the fake's, kept in the state.
func (s *Shared) Images() container.Images { return sharedImages{s} }

// sharedImages are a Shared engine's images: Engine's, call by call.
type sharedImages struct{ s *Shared }

// Exists implements Images.Exists.
func (m sharedImages) Exists(ctx context.Context, ref string) (ok bool, err error) {
	err = m.s.read(func(f *Engine) error {
		ok, err = f.Images().Exists(ctx, ref)
		return err
	})
	return ok, err
}

// Agents implements Images.Agents.
func (m sharedImages) Agents(ctx context.Context, image string) (out []string, err error) {
	err = m.s.read(func(f *Engine) error {
		out, err = f.Images().Agents(ctx, image)
		return err
	})
	return out, err
}

// ProbeAgents implements Images.ProbeAgents.
func (m sharedImages) ProbeAgents(ctx context.Context, image string) ([]string, error) {
	return m.Agents(ctx, image)
}

// Inspect implements Images.Inspect.
func (m sharedImages) Inspect(ctx context.Context, ref string) (info container.ImageInfo, ok bool, err error) {
	err = m.s.read(func(f *Engine) error {
		info, ok, err = f.Images().Inspect(ctx, ref)
		return err
	})
	return info, ok, err
}

// Build implements Images.Build.
func (m sharedImages) Build(ctx context.Context, o container.BuildOptions) error {
	return m.s.do(func(f *Engine) error { return f.Images().Build(ctx, o) })
}

// BuildContext implements Images.BuildContext: the fake builds nothing.
func (m sharedImages) BuildContext(ctx context.Context, o container.ContextBuild) (string, error) {
	return "", container.NotSupported("the fake engine does not build images")
}

// Commit implements Images.Commit: a Shared engine keeps no containers as images.
func (m sharedImages) Commit(ctx context.Context, id string, o container.CommitOptions) (string, error) {
	return "", container.NotSupported("this fake engine does not commit containers")
}

// Save implements Images.Save: an archive naming the image, as Engine's.
func (m sharedImages) Save(ctx context.Context, ref string) (rc io.ReadCloser, err error) {
	err = m.s.read(func(f *Engine) error {
		f.MovesImages = true
		rc, err = f.Images().Save(ctx, ref)
		return err
	})
	return rc, err
}

// Load implements Images.Load: the tags the archive names become present,
// as Engine's.
func (m sharedImages) Load(ctx context.Context, r io.Reader) error {
	return m.s.do(func(f *Engine) error {
		f.MovesImages = true
		return f.Images().Load(ctx, r)
	})
}

// List implements Images.List.
func (m sharedImages) List(ctx context.Context, labels ...string) (out []container.Image, err error) {
	err = m.s.read(func(f *Engine) error {
		out, err = f.Images().List(ctx, labels...)
		return err
	})
	return out, err
}

// Remove implements Images.Remove.
func (m sharedImages) Remove(ctx context.Context, ref string) error {
	return m.s.do(func(f *Engine) error { return f.Images().Remove(ctx, ref) })
}

func (m sharedImages) Push(ctx context.Context, source, ref string, progress io.Writer) error {
	return m.s.do(func(f *Engine) error { return f.Images().Push(ctx, source, ref, progress) })
}
