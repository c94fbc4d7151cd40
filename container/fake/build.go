package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/git-sandbox/git-sandbox/container"
)

// Builder is the fake with what building a devcontainer image needs
// (Abilities().BuildImages: Images().BuildContext, Inspect and
// ProbeAgents; commits too), for tests of the builds start runs. A build
// reads its context to the end, records its options, and makes an image
// (tagged with its tags); OnBuild decides whether it fails.
type Builder struct {
	*Committer
	// OnBuild, when set, runs as a build starts (outside the lock), with
	// the engine's state as the build would find it; an error fails the
	// build.
	OnBuild func(o container.ContextBuild) error
}

// WithBuild returns the fake with image builds (and commits).
func (f *Engine) WithBuild() *Builder { return &Builder{Committer: f.WithCommit()} }

// Abilities are the fake's, with image builds and commits.
func (b *Builder) Abilities() container.Abilities {
	a := b.Committer.Abilities()
	a.BuildImages = true
	return a
}

// Images are the fake's, with image builds and commits.
func (b *Builder) Images() container.Images {
	return buildImages{images: images{f: b.Engine, commit: true}, b: b}
}

// Builds returns the options of every BuildContext call so far (their
// contexts already read).
func (f *Engine) Builds() []container.ContextBuild {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.builds)
}

// buildImages are a Builder's images.
type buildImages struct {
	images
	b *Builder
}

// BuildContext implements Images.BuildContext.
func (m buildImages) BuildContext(ctx context.Context, o container.ContextBuild) (string, error) {
	f := m.f
	if err := f.begin("BuildContext", o.Network); err != nil {
		return "", err
	}
	if o.Context != nil {
		if _, err := io.Copy(io.Discard, o.Context); err != nil {
			return "", err
		}
	}
	o.Context, o.Progress = nil, nil
	o.Args = maps.Clone(o.Args)
	var err error
	if m.b.OnBuild != nil {
		err = m.b.OnBuild(o)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, o)
	if err != nil {
		return "", err
	}
	id := imageID(fmt.Sprintf("build %d", len(f.builds)))
	f.images[id] = nil
	if f.imageInfo == nil {
		f.imageInfo = map[string]container.ImageInfo{}
	}
	f.imageInfo[id] = container.ImageInfo{ID: id, Labels: maps.Clone(o.Labels)}
	for _, t := range o.Tags {
		f.images[t] = nil
		f.imageInfo[t] = f.imageInfo[id]
	}
	return id, nil
}
