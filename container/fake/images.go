package fake

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// Committer is the fake with what keeping a container's file system as an
// image needs (Abilities().CommitImages, Images().Commit), for tests of
// warm starts. An Engine alone has neither, so code that needs them takes
// the path of an engine that cannot commit.
type Committer struct{ *Engine }

// Commit is one Images().Commit call: the container as it was committed.
type Commit struct {
	Container Container
	Options   container.CommitOptions
}

// WithCommit returns the fake with image commits.
func (f *Engine) WithCommit() *Committer { return &Committer{f} }

// Abilities are the fake's, with image commits.
func (c *Committer) Abilities() container.Abilities {
	a := c.Engine.Abilities()
	a.CommitImages = true
	return a
}

// Images are the fake's, with image commits.
func (c *Committer) Images() container.Images { return images{f: c.Engine, commit: true} }

// Commits returns the Images().Commit calls so far.
func (f *Engine) Commits() []Commit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commits)
}

func imageID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// images are the fake's images: present or not, with the agent CLIs each
// says it has, and what a commit made. Calls are recorded under the names
// the engine's methods had before images were an interface of their own
// (ImageExists, ImageAgents, Build, InspectImage, CommitContainer), which
// tests fail and count by.
type images struct {
	f      *Engine
	commit bool
}

// Images implements the engine's Images.
func (f *Engine) Images() container.Images { return images{f: f} }

// Exists implements Images.Exists.
func (m images) Exists(ctx context.Context, ref string) (bool, error) {
	f := m.f
	if err := f.begin("ImageExists", ref); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.images[ref]
	return ok, nil
}

// Agents implements Images.Agents.
func (m images) Agents(ctx context.Context, image string) ([]string, error) {
	f := m.f
	if err := f.begin("ImageAgents", image); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	agents, ok := f.images[image]
	if !ok {
		return nil, notFound("image", image)
	}
	return slices.Clone(agents), nil
}

// ProbeAgents implements Images.ProbeAgents: what the image says it has.
func (m images) ProbeAgents(ctx context.Context, image string) ([]string, error) {
	return m.Agents(ctx, image)
}

// Build implements Images.Build: the tag becomes present.
func (m images) Build(ctx context.Context, o container.BuildOptions) error {
	f := m.f
	if err := f.begin("Build", o.Tag); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[o.Base]; !ok {
		return notFound("image", o.Base)
	}
	f.images[o.Tag] = nil
	return nil
}

// Inspect implements Images.Inspect: an image present (AddImage, New,
// Build or a commit) has a made-up id and the labels a commit gave it.
func (m images) Inspect(ctx context.Context, ref string) (container.ImageInfo, bool, error) {
	f := m.f
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

// Commit implements Images.Commit (a Committer's only): the tag becomes an
// image with the container's image's agent CLIs and the given labels.
// Like the engine, it commits a running container too; tests check the
// state it was in through Commits.
func (m images) Commit(ctx context.Context, id string, o container.CommitOptions) (string, error) {
	if !m.commit {
		return "", container.NotSupported("this fake engine does not commit containers (WithCommit does)")
	}
	f := m.f
	if err := f.begin("CommitContainer", id); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ct := f.lookup(id)
	if ct == nil {
		return "", notFound("container", id)
	}
	f.commits = append(f.commits, Commit{Container: ct.copy(), Options: o})
	f.images[o.Tag] = slices.Clone(f.images[ct.Spec.Image])
	if f.imageInfo == nil {
		f.imageInfo = map[string]container.ImageInfo{}
	}
	newID := imageID(o.Tag + time.Now().String())
	f.imageInfo[o.Tag] = container.ImageInfo{ID: newID, Labels: maps.Clone(o.Labels), Cmd: slices.Clone(o.Cmd), Created: time.Now()}
	return newID, nil
}

// BuildContext implements Images.BuildContext: the fake builds nothing.
func (m images) BuildContext(ctx context.Context, o container.ContextBuild) (string, error) {
	return "", container.NotSupported("the fake engine does not build images")
}

// Save implements Images.Save: with MovesImages, an archive whose
// manifest names the image (nothing else of it: the fake keeps no
// layers); without, the fake moves no images.
func (m images) Save(ctx context.Context, ref string) (io.ReadCloser, error) {
	f := m.f
	if !f.Abilities().MoveImages {
		return nil, container.NotSupported("the fake engine does not save images")
	}
	if err := f.begin("SaveImage", ref); err != nil {
		return nil, err
	}
	f.mu.Lock()
	_, ok := f.images[ref]
	f.mu.Unlock()
	if !ok {
		return nil, notFound("image", ref)
	}
	manifest, _ := json.Marshal([]map[string]any{{"RepoTags": []string{ref}}})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(manifest)
	_ = tw.Close()
	return io.NopCloser(&b), nil
}

// Load implements Images.Load: with MovesImages, every tag the archive's
// manifest.json names becomes present (the archive is read to its end, as
// an engine would); without, the fake moves no images.
func (m images) Load(ctx context.Context, r io.Reader) error {
	f := m.f
	if !f.Abilities().MoveImages {
		return container.NotSupported("the fake engine does not load images")
	}
	if err := f.begin("LoadImage", ""); err != nil {
		return err
	}
	var tags []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("load image: %w", err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var man []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&man); err != nil {
			return fmt.Errorf("load image: manifest.json: %w", err)
		}
		for _, img := range man {
			tags = append(tags, img.RepoTags...)
		}
	}
	if len(tags) == 0 {
		return fmt.Errorf("load image: no manifest.json naming a tag")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tags {
		f.images[t] = nil
	}
	return nil
}

// List implements Images.List: the present images whose labels (a
// commit's) carry every key=value given.
func (m images) List(ctx context.Context, labels ...string) ([]container.Image, error) {
	f := m.f
	if err := f.begin("ListImages", strings.Join(labels, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Image
	for ref := range f.images {
		info := f.imageInfo[ref]
		if !hasEvery(info.Labels, labels) {
			continue
		}
		id := info.ID
		if id == "" {
			id = imageID(ref)
		}
		out = append(out, container.Image{ID: id, Tags: []string{ref}, Labels: maps.Clone(info.Labels), Created: info.Created})
	}
	slices.SortFunc(out, func(a, b container.Image) int { return strings.Compare(a.Tags[0], b.Tags[0]) })
	return out, nil
}

// Remove implements Images.Remove: a tag or an id; a missing one is not an
// error, one a container was made from is ErrConflict.
func (m images) Remove(ctx context.Context, ref string) error {
	f := m.f
	if err := f.begin("RemoveImage", ref); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for tag := range f.images {
		info := f.imageInfo[tag]
		if tag != ref && info.ID != ref && imageID(tag) != ref {
			continue
		}
		for _, c := range f.containers {
			if c.Spec.Image == tag {
				return conflict("image %s is used by container %s", ref, c.Name)
			}
		}
		delete(f.images, tag)
		delete(f.imageInfo, tag)
	}
	return nil
}

// hasEvery reports whether labels carry every key=value (or key) given;
// unlike hasLabels it does not ask for the managed label.
func hasEvery(labels map[string]string, filter []string) bool {
	for _, l := range filter {
		k, v, withValue := strings.Cut(l, "=")
		got, ok := labels[k]
		if !ok || withValue && got != v {
			return false
		}
	}
	return true
}

// Push implements Images.Push: source gets the name ref (as a tag of the
// fake) and ref is recorded as pushed (Pushed).
func (m images) Push(ctx context.Context, source, ref string, progress io.Writer) error {
	f := m.f
	if err := f.begin("PushImage", source+" "+ref); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	agents, ok := f.images[source]
	if !ok {
		return notFound("image", source)
	}
	f.images[ref] = agents
	f.pushed = append(f.pushed, ref)
	if progress != nil {
		fmt.Fprintf(progress, "pushed %s\n", ref)
	}
	return nil
}

// Pushed returns the references pushed so far, in order.
func (f *Engine) Pushed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pushed)
}
