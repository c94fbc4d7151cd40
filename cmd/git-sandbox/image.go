package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// ImageCmd groups the image commands.
type ImageCmd struct {
	Build ImageBuildCmd `cmd:"" help:"Build the default sandbox image."`
}

// ImageBuildCmd is git sandbox image build.
type ImageBuildCmd struct {
	Base     string `help:"Image to build from; a local image works offline (default from config: ${default_base})." placeholder:"IMAGE"`
	Tag      string `help:"Tag of the built image (default from config: ${default_image})." placeholder:"T"`
	NoAgents bool   `help:"Do not try to install the ${image_agents} CLIs."`
	NoCache  bool   `help:"Build every step again."`
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
	d, err := container.Connect(app.Ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	name := termsafe.String(tag)
	app.UI.Infof("building %s from %s", name, termsafe.String(base))
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
