package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
)

// ImageCmd groups the image commands.
type ImageCmd struct {
	Build ImageBuildCmd `cmd:"" help:"Build the default sandbox image."`
}

// ImageBuildCmd is git sandbox image build.
type ImageBuildCmd struct {
	Base     string `help:"Image to build from; a local image works offline (default from config: debian:bookworm-slim)." placeholder:"IMAGE"`
	Tag      string `help:"Tag of the built image (default from config: git-sandbox:latest)." placeholder:"T"`
	NoAgents bool   `help:"Do not try to install the claude and codex CLIs."`
	NoCache  bool   `help:"Build every step again."`
}

// Help is image build's long help.
func (c *ImageBuildCmd) Help() string {
	return `Builds the image sandboxes run, from an embedded Dockerfile: git and a shell on
top of --base, plus the claude and codex CLIs when the npm registry can be
reached (the build says so when it cannot; the shell agent works either way).
A --base image that is present locally is never pulled.`
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
	infof(app.Stderr, "building %s from %s", tag, base)
	o := container.BuildOptions{Tag: tag, Base: base, NoAgents: c.NoAgents, NoCache: c.NoCache, Progress: app.Stderr}
	if f, ok := app.Stderr.(*os.File); ok && isTerminal(f) {
		o.TerminalFd, o.IsTerminal = f.Fd(), true
	}
	if err := d.Build(app.Ctx, o); err != nil {
		return err
	}
	infof(app.Stderr, "built %s", tag)
	agents, err := d.ImageAgents(app.Ctx, tag)
	switch {
	case err != nil:
		warnf(app.Stderr, "cannot tell which agent CLIs %s has: %v", tag, err)
	case len(agents) == 0:
		infof(app.Stderr, "%s has no agent CLIs (the npm registry could not be reached, or --no-agents): only the shell agent works", tag)
		fmt.Fprintln(app.Stderr, "hint: run git sandbox image build --no-cache again with network access to add claude and codex")
	default:
		infof(app.Stderr, "agent CLIs in %s: %s", tag, strings.Join(agents, ", "))
	}
	return nil
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
