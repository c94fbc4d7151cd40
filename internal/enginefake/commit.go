package enginefake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// Committer is the fake with what keeping a container's file system as an
// image needs (InspectImage, CommitContainer), for tests of warm starts.
// An Engine alone has neither, so code that needs them takes the path of
// an engine that cannot commit.
type Committer struct{ *Engine }

// Commit is one CommitContainer call: the container as it was committed.
type Commit struct {
	Container Container
	Options   container.CommitOptions
}

// WithCommit returns the fake with image commits.
func (f *Engine) WithCommit() *Committer { return &Committer{f} }

// Commits returns the CommitContainer calls so far.
func (f *Engine) Commits() []Commit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commits)
}

func imageID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// InspectImage reports an image present (AddImage, New, Build or a
// commit) with a made-up id and the labels a commit gave it.
func (c *Committer) InspectImage(ctx context.Context, ref string) (container.ImageInfo, bool, error) {
	f := c.Engine
	if err := f.begin("InspectImage", ref); err != nil {
		return container.ImageInfo{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[ref]; !ok {
		return container.ImageInfo{}, false, nil
	}
	info := f.imageInfo[ref]
	if info.ID == "" {
		info.ID = imageID(ref)
	}
	info.Labels = maps.Clone(info.Labels)
	return info, true, nil
}

// CommitContainer makes the tag an image with the container's image's
// agent CLIs and the given labels. Like the engine, it commits a running
// container too; tests check the state it was in through Commits.
func (c *Committer) CommitContainer(ctx context.Context, id string, o container.CommitOptions) (string, error) {
	f := c.Engine
	if err := f.begin("CommitContainer", id); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ct := f.lookup(id)
	if ct == nil {
		return "", notFound("container", id)
	}
	cp := *ct
	cp.waiters = nil
	f.commits = append(f.commits, Commit{Container: cp, Options: o})
	f.images[o.Tag] = slices.Clone(f.images[ct.Spec.Image])
	if f.imageInfo == nil {
		f.imageInfo = map[string]container.ImageInfo{}
	}
	newID := imageID(o.Tag + time.Now().String())
	f.imageInfo[o.Tag] = container.ImageInfo{ID: newID, Labels: maps.Clone(o.Labels), Cmd: slices.Clone(o.Cmd), Created: time.Now()}
	return newID, nil
}
