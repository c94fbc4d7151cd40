package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// ImageCmd groups the image commands.
type ImageCmd struct {
	Build ImageBuildCmd `cmd:"" help:"Build the default sandbox image."`
	Prune ImagePruneCmd `cmd:"" help:"Remove this repository's unused and old images (and caches)."`
}

// ImagePruneCmd is git sandbox image prune.
type ImagePruneCmd struct {
	Caches bool `help:"Also remove this repository's cache volumes ([[cache]] in your config)."`
}

// Help is image prune's long help.
func (c *ImagePruneCmd) Help() string {
	return `Removes the images git sandbox built from this repository's devcontainer,
except those a sandbox's container still uses; the next start builds the one it
needs again (one a kept warm image was made on stays). Removes the repository's
warm images (setup's kept result) but the newest, except those a sandbox's
container still uses. With --caches, also the
repository's cache volumes no sandbox uses: the next sandbox starts with empty
caches. Your default image (git sandbox image build) and other images are never
touched.`
}

// Run prunes.
func (c *ImagePruneCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	d, err := container.Connect(app.Ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	removed, kept := 0, 0
	remove := func(ref, what, user string) error {
		switch err := d.RemoveImage(app.Ctx, ref); {
		case container.IsConflict(err):
			kept++
			app.UI.Infof("kept %s: %s uses it", termsafe.String(what), user)
		case err != nil:
			return err
		default:
			removed++
			app.UI.Infof("removed image %s", termsafe.String(what))
		}
		return nil
	}
	// Warm images first: a devcontainer image they were made from is
	// their parent, and goes only after them.
	warm, err := d.ListImages(app.Ctx, sandbox.LabelWarm+"=1", sandbox.LabelWarmRepo+"="+env.Repo.ID)
	if err != nil {
		return err
	}
	stale := sandbox.StaleWarmImages(warm)
	gone := map[string]bool{}
	for _, img := range stale {
		before := removed
		if err := remove(img.ID, warmName(img), "a sandbox"); err != nil {
			return err
		}
		gone[img.ID] = removed > before
	}
	// The images the remaining warm images were made on stay: removing
	// their tag would free nothing.
	parentOf := map[string]string{}
	for _, img := range warm {
		if !gone[img.ID] {
			parentOf[img.Labels[sandbox.LabelWarmBase]] = warmName(img)
		}
	}
	imgs, err := d.ListImages(app.Ctx, devcontainer.LabelRepo+"="+env.Repo.ID)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if img.Labels[sandbox.LabelWarm] != "" {
			continue // a warm image inherits its devcontainer image's labels
		}
		if child, ok := parentOf[img.ID]; ok {
			for _, tag := range img.Tags {
				kept++
				app.UI.Infof("kept %s: the warm image %s is made from it", termsafe.String(tag), termsafe.String(child))
			}
			continue
		}
		for _, tag := range img.Tags {
			if err := remove(tag, tag, "a sandbox"); err != nil {
				return err
			}
		}
	}
	if c.Caches {
		caches, err := env.Caches(app.Ctx)
		if err != nil {
			return err
		}
		for _, cc := range caches {
			switch err := d.RemoveVolume(app.Ctx, cc.Volume); {
			case container.IsConflict(err):
				kept++
				app.UI.Infof("kept cache %s (%s): a sandbox uses it", cc.Volume, termsafe.String(cc.Target))
			case err != nil:
				return err
			default:
				removed++
				app.UI.Infof("removed cache %s (%s)", cc.Volume, termsafe.String(cc.Target))
			}
		}
	}
	if removed == 0 && kept == 0 {
		app.UI.Infof("nothing to remove")
	}
	if kept > 0 {
		app.UI.Hintf("git sandbox rm BRANCH removes a sandbox you no longer need; prune again then")
	}
	return nil
}

// warmName is how a warm image is named in messages: its tag, or its
// short id once a newer image took the tag.
func warmName(img container.Image) string {
	for _, t := range img.Tags {
		if t != "<none>:<none>" {
			return t
		}
	}
	id := strings.TrimPrefix(img.ID, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return "(untagged) " + id
}

// ImageBuildCmd is git sandbox image build.
type ImageBuildCmd struct {
	Base     string `help:"Image to build from; a local image works offline (default from config: ${default_base})." placeholder:"IMAGE"`
	Tag      string `help:"Tag of the built image (default from config: ${default_image})." placeholder:"T"`
	NoAgents bool   `help:"Do not try to install the ${image_agents} CLIs."`
	NoCache  bool   `help:"Build every step again."`
	Engine   string `help:"Build on this engine of your config ([[engine]] name) instead of the default one." placeholder:"NAME"`
}

// Help is image build's long help.
func (c *ImageBuildCmd) Help() string {
	return fmt.Sprintf(`Builds the image sandboxes run, from an embedded Dockerfile: git and a shell on
top of --base, plus the %s CLIs, each installed with npm within a time
limit. The build says which agent CLIs the image has; the shell agent works
either way. A --base image that is present locally is never pulled.`, andList(agent.Installable()))
}

// Run builds the image.
func (c *ImageBuildCmd) Run(app *App) error {
	cfg, err := config.Load("")
	if err != nil {
		return err
	}
	base := firstSet(c.Base, cfg.BaseImage)
	tag := firstSet(c.Tag, cfg.Image)
	var d *container.Docker
	where := ""
	if c.Engine != "" {
		e, err := cfg.EngineNamed(c.Engine)
		if err != nil {
			return err
		}
		d, err = container.ConnectTo(app.Ctx, container.Endpoint{Name: e.Name, Host: e.Host, CertPath: e.CertPath, Context: e.Context})
		if err != nil {
			return err
		}
		where = " on engine " + termsafe.String(e.Name)
	} else if d, err = container.Connect(app.Ctx); err != nil {
		return err
	}
	defer d.Close()
	name := termsafe.String(tag)
	app.UI.Infof("building %s from %s%s", name, termsafe.String(base), where)
	o := container.BuildOptions{Tag: tag, Base: base, Agents: agent.Packages(), NoAgents: c.NoAgents, NoCache: c.NoCache, Progress: app.UI.Writer()}
	if f := app.UI.File(); f != nil && ui.IsTerminal(f) {
		o.TerminalFd, o.IsTerminal = f.Fd(), true
	}
	if err := d.Build(app.Ctx, o); err != nil {
		return err
	}
	app.UI.Infof("built %s", name)
	// Read from the image itself, so it is also true when every step came
	// from the build cache.
	have, err := d.ImageAgents(app.Ctx, tag)
	if err != nil {
		app.UI.Warnf("cannot tell which agent CLIs %s has: %v", name, err)
		return nil
	}
	reportAgents(app.UI, name, have, agent.Installable(), c.NoAgents)
	return nil
}

// reportAgents says which agent CLIs an image has and which of those the
// build tries to install it lacks.
func reportAgents(p *ui.Printer, image string, have, wanted []string, noAgents bool) {
	var missing []string
	for _, a := range wanted {
		if !slices.Contains(have, a) {
			missing = append(missing, a)
		}
	}
	switch {
	case len(have) == 0 && noAgents:
		p.Infof("%s has no agent CLIs (--no-agents): only the shell agent works", image)
	case len(have) == 0:
		p.Infof("%s has no agent CLIs (they could not be installed; the build output above says why): only the shell agent works", image)
	default:
		p.Infof("agent CLIs in %s: %s", image, termsafe.String(strings.Join(have, ", ")))
	}
	if len(missing) > 0 && !noAgents {
		if len(have) > 0 {
			p.Infof("not installed: %s", strings.Join(missing, ", "))
		}
		p.Hintf("run git sandbox image build --no-cache again where npm can reach its registry to add %s", andList(missing))
	}
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
