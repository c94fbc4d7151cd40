package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// ImageCmd groups the image commands.
type ImageCmd struct {
	Build ImageBuildCmd `cmd:"" help:"Build the default sandbox image."`
	Prune ImagePruneCmd `cmd:"" help:"Remove this repository's unused and old images (and caches)."`
	Proxy ImageProxyCmd `cmd:"" help:"Make the egress proxy's image (git-sandbox alone) and print its tag."`
	Push  ImagePushCmd  `cmd:"" help:"Push the images a Kubernetes engine's Pods pull to the registry its config names."`
}

// ImagePushCmd is git sandbox image push.
type ImagePushCmd struct {
	Engine string `required:"" help:"The engine of your config ([[engine]] name) whose image (and proxy_image) to push to." placeholder:"NAME"`
	Image  string `help:"The local image to push (default from config: ${default_image})." placeholder:"IMAGE"`
}

// Help is image push's long help.
func (c *ImagePushCmd) Help() string {
	return `Pushes, from the local Docker engine (the one DOCKER_HOST names), the image
sandboxes run to where the engine's image setting names, and, when the engine
sets proxy_image, git sandbox's egress proxy image there too (made first if
need be): the registry the cluster's nodes pull from. The credentials are those
docker login stored for the registry; a registry on localhost may be plain
HTTP. Run it again after git sandbox image build, or after an upgrade of git
sandbox when the engine pulls its proxy image.`
}

// Run pushes.
func (c *ImagePushCmd) Run(app *App) error {
	cfg, err := config.Load("")
	if err != nil {
		return err
	}
	eng, err := cfg.EngineNamed(c.Engine)
	if err != nil {
		return err
	}
	d, err := engines.Connect(app.Ctx, cfg, "")
	if err != nil {
		return err
	}
	defer d.Close()
	proxyTag := ""
	if eng.ProxyImage != "" {
		b, err := thisProxyBinary()
		if err != nil {
			return err
		}
		if proxyTag, err = network.EnsureProxyImage(app.Ctx, d, b, app.UI); err != nil {
			return err
		}
	}
	pushes, err := engines.PushesFor(eng, firstSet(c.Image, cfg.Image), proxyTag)
	if err != nil {
		return err
	}
	if err := engines.PushAll(app.Ctx, d.Images(), pushes, app.UI.Writer()); err != nil {
		return err
	}
	for _, p := range pushes {
		app.UI.Infof("pushed %s as %s", termsafe.String(p.Source), termsafe.String(p.Ref))
	}
	return nil
}

// ImageProxyCmd is git sandbox image proxy.
type ImageProxyCmd struct {
	Engine string `help:"Make it on this Docker engine of your config ([[engine]] name) instead of the default one." placeholder:"NAME"`
}

// Help is image proxy's long help.
func (c *ImageProxyCmd) Help() string {
	return `Makes the image the egress proxy of allowlist sandboxes runs from, unless the
engine has it, and prints its tag. The image holds this git-sandbox binary and
nothing else; its tag names the binary's version and content. start makes it
by itself the first time a Docker engine needs it. A Kubernetes engine's
nodes pull it from where you push it (proxy_image of its [[engine]]) or have
it loaded into their runtime: make it here, then push it or load it there.`
}

// Run makes the image.
func (c *ImageProxyCmd) Run(app *App) error {
	cfg, err := config.Load("")
	if err != nil {
		return err
	}
	b, err := thisProxyBinary()
	if err != nil {
		return err
	}
	d, err := engines.Connect(app.Ctx, cfg, c.Engine)
	if err != nil {
		return err
	}
	if !d.Abilities().MoveImages {
		d.Close()
		return usererr.New("engine %s does not load images: git sandbox cannot make the proxy's image there", termsafe.String(c.Engine)).
			Hint("make it on a local Docker engine (git sandbox image proxy), push %s to a registry the nodes pull from and set proxy_image in [[engine]] %s", b.Tag(), termsafe.String(c.Engine))
	}
	defer d.Close()
	tag, err := network.EnsureProxyImage(app.Ctx, d, b, app.UI)
	if err != nil {
		return err
	}
	fmt.Fprintln(app.Stdout, tag)
	return nil
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
touched. It prunes the engine the environment names and every engine of your
config that keeps images (a Kubernetes cluster keeps none), naming the engine.`
}

// Run prunes, on the engine the environment names and on every engine of
// the user's config that keeps images (a cluster keeps none of git
// sandbox's).
func (c *ImagePruneCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	p := &toolchain.Pruner{Env: env.Toolchain(), Caches: c.Caches}
	for _, n := range engines.All(env.Config) {
		d, err := env.EngineNamed(app.Ctx, n.Name)
		if err != nil {
			if n.Name == "" {
				return err
			}
			app.UI.Warnf("engine %s: not pruned: %v", termsafe.String(n.Name), err)
			continue
		}
		if err := p.On(app.Ctx, d, n.Name); err != nil {
			return err
		}
	}
	if p.Removed == 0 && p.Kept == 0 {
		app.UI.Infof("nothing to remove")
	}
	if p.Kept > 0 {
		app.UI.Hintf("git sandbox rm BRANCH removes a sandbox you no longer need; prune again then")
	}
	return nil
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
either way. A --base image that is present locally is never pulled. Offline,
give --no-agents: npm would wait for its registry before it gives up.`, andList(agent.Installable()))
}

// Run builds the image.
func (c *ImageBuildCmd) Run(app *App) error {
	cfg, err := config.Load("")
	if err != nil {
		return err
	}
	base := firstSet(c.Base, cfg.BaseImage)
	tag := firstSet(c.Tag, cfg.Image)
	where := ""
	if c.Engine != "" {
		where = " on engine " + termsafe.String(c.Engine)
	}
	d, err := engines.Connect(app.Ctx, cfg, c.Engine)
	if err != nil {
		return err
	}
	defer d.Close()
	name := termsafe.String(tag)
	app.UI.Infof("building %s from %s%s", name, termsafe.String(base), where)
	o := container.BuildOptions{Tag: tag, Base: base, Agents: agent.Packages(), NoAgents: c.NoAgents, NoCache: c.NoCache, Progress: app.UI.Writer()}
	if f := app.UI.File(); f != nil && ui.IsTerminal(f) {
		o.TerminalFd, o.IsTerminal = f.Fd(), true
	}
	if err := d.Images().Build(app.Ctx, o); err != nil {
		return err
	}
	app.UI.Infof("built %s", name)
	// Read from the image itself, so it is also true when every step came
	// from the build cache.
	have, err := d.Images().Agents(app.Ctx, tag)
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

// thisProxyBinary is this git-sandbox as the egress proxy's image holds
// it.
func thisProxyBinary() (proxyimage.Binary, error) {
	root, err := worktree.StateRoot()
	if err != nil {
		return proxyimage.Binary{}, err
	}
	return selfProxyBinary(root)
}
