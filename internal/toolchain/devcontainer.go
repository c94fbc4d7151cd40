package toolchain

// A repository's devcontainer.json as the sandbox's image: read from the
// commit the sandbox starts at, and built (or found, built from the same
// inputs) on the sandbox's own network.

import (
	"context"
	"io"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// LoadDevcontainer returns the repository's devcontainer at commit when it
// gives the sandbox its image: no image asked for (imageFlag ""), none in
// the user's or the repository's config, and a file that names an image or
// a build. What the file asks for and does not get is printed, one line
// each.
func (e *Env) LoadDevcontainer(ctx context.Context, imageFlag, commit string) (*devcontainer.Config, error) {
	if imageFlag != "" || e.Config.Image != config.DefaultImage() {
		return nil, nil
	}
	dc, err := devcontainer.Load(ctx, devcontainer.Source{Git: e.Repo.Git(), Commit: commit})
	if err != nil || dc == nil {
		return nil, err
	}
	if !dc.HasBase() {
		e.UI.Infof("%s names no image and no build; using %s", dc.Path, termsafe.String(e.Config.Image))
		return nil, nil
	}
	for _, ig := range dc.Ignored {
		e.UI.Warnf("%s: %s", dc.Path, ig.String())
	}
	return dc, nil
}

// DevBuild is one devcontainer image for a sandbox.
type DevBuild struct {
	Config *devcontainer.Config
	// Commit is the commit the sandbox starts at, whose files are built.
	Commit string
	// NoAgents leaves the agent CLIs out (an agent that needs none).
	NoAgents bool
	// Mode is the sandbox's network mode.
	Mode container.NetworkMode
	// Network gives a build its network (the sandbox's own, made for it);
	// called only when the image has to be built.
	Network func(bo *devcontainer.BuildOptions) error
	// Denied reads what the sandbox's proxy refused since then.
	Denied func(since time.Time) []network.Denied
	// Out receives the build's output.
	Out io.Writer
}

// DevImage builds a sandbox's devcontainer image, or finds the one built
// from the same inputs, and returns it with the destinations the build
// was denied.
func (e *Env) DevImage(ctx context.Context, d container.Engine, b DevBuild) (*devcontainer.Image, []network.Denied, error) {
	if !d.Abilities().BuildImages {
		return nil, nil, usererr.New("this container engine cannot build the image %s describes", b.Config.Path).
			Hint("pick an image with --image")
	}
	de := d.Images()
	src := devcontainer.Source{Git: e.Repo.Git(), Commit: b.Commit}
	plan, err := devcontainer.PlanImage(ctx, de, src, b.Config, devcontainer.ImageOptions{
		RepoName: e.Repo.Name, RepoID: e.Repo.ID, NoAgents: b.NoAgents,
	})
	if err != nil {
		return nil, nil, err
	}
	img, found, err := devcontainer.Existing(ctx, de, plan)
	if err != nil || found {
		if found {
			e.UI.Infof("image %s (from %s, unchanged)", img.Tag, b.Config.Path)
		}
		return img, nil, err
	}
	bo := devcontainer.BuildOptions{Out: b.Out}
	bo.TerminalFd, bo.IsTerminal = ui.TerminalFd(b.Out)
	if err := b.Network(&bo); err != nil {
		return nil, nil, err
	}
	began := time.Now()
	img, err = devcontainer.EnsureImage(ctx, de, src, plan, bo)
	denied := b.Denied(began)
	if err != nil {
		return nil, denied, network.BuildDenied(err, b.Mode, denied)
	}
	return img, denied, nil
}
