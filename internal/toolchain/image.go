package toolchain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// The sandbox's image: the default one built when it is missing, the
// repository's choices asked about, the agent's CLI checked for.

// EnsureImage makes sure the image exists, building the default one when
// it is missing.
func (e *Env) EnsureImage(ctx context.Context, d container.Engine, image string, progress io.Writer) error {
	ok, err := d.Images().Exists(ctx, image)
	if err != nil || ok {
		return err
	}
	if image != config.DefaultImage() {
		return container.ErrImageMissing(image, false)
	}
	e.UI.Infof("image %s is missing; building it from %s", termsafe.String(image), termsafe.String(e.Config.BaseImage))
	bo := container.BuildOptions{Tag: image, Base: e.Config.BaseImage, Agents: agent.Packages(), Progress: progress}
	bo.TerminalFd, bo.IsTerminal = ui.TerminalFd(progress)
	return d.Images().Build(ctx, bo)
}

// CheckAgentCLI refuses, before anything is created, an agent whose CLI
// the image does not have: its container would only exit with "exec
// failed". The image says which agent CLIs it has (container.LabelAgents,
// or the list its build wrote); an image that says nothing — one git
// sandbox did not build — is given the benefit of the doubt, with a
// warning.
//
// denied are the hosts the sandbox's proxy refused while the image was
// built (the agent CLIs are installed then): named with how to allow them.
func (e *Env) CheckAgentCLI(ctx context.Context, d container.Engine, image string, adapter agent.Adapter, denied []network.Denied) error {
	if adapter.Package() == "" {
		return nil
	}
	have, err := d.Images().Agents(ctx, image)
	if err != nil {
		e.UI.Warnf("cannot tell whether image %s has the %s CLI: %v", termsafe.String(image), adapter.Name(), err)
		return nil
	}
	if slices.Contains(have, adapter.Name()) {
		return nil
	}
	said := "none"
	if len(have) > 0 {
		said = strings.Join(have, ", ")
	}
	ue := usererr.New("image %s has no %s CLI (agent CLIs it has: %s); nothing was created", termsafe.String(image), adapter.Name(), said)
	if len(denied) > 0 {
		var entries []string
		for _, h := range denied {
			entries = append(entries, termsafe.String(h.Entry()))
		}
		ue = ue.Hint("its build was denied %s by the sandbox's network policy", strings.Join(entries, ", ")).Hint("%s", network.DeniedHint(entries))
	} else if image == config.DefaultImage() {
		ue = ue.Hint("rebuild it with network access so npm can install %s: git sandbox image build", adapter.Package())
	} else {
		ue = ue.Hint("build %s with network access so npm can install %s, or pick another image with --image", termsafe.String(image), adapter.Package())
	}
	return ue.Hint("or pick another agent with --agent (%s)", strings.Join(agentsIn(have), ", "))
}

// agentsIn lists the agents an image with the given CLIs can run.
func agentsIn(have []string) []string {
	var out []string
	for _, n := range agent.Names() {
		if a, _ := agent.Get(n); a.Package() == "" || slices.Contains(have, n) {
			out = append(out, n)
		}
	}
	return out
}

// AllowRepoImages asks the user, on a terminal, whether the images the
// repository chose (p.RepoImages) and the user's policy does not allow
// may be built from and run; without a terminal it refuses. Any local
// image can be named, one with secrets baked in too, and the agent (and
// whoever wrote the repository) would read them.
func (e *Env) AllowRepoImages(t Terminal, choices []config.ImageChoice) error {
	refused := e.Config.RefusedImages(choices)
	if len(refused) == 0 {
		return nil
	}
	if !t.IsTerminal || t.In == nil {
		return config.RefuseImages("not started", refused).Hint("or choose the image yourself with --image")
	}
	for _, c := range refused {
		fmt.Fprintf(t.Err, "%s names the image %s, which is not in your allowed_images.\n", c.Where(), termsafe.String(c.Image))
	}
	fmt.Fprintf(t.Err, "Use %s for this sandbox (its build and its agent)? [y/N] ", map[bool]string{true: "it", false: "them"}[len(refused) == 1])
	answer, _ := readLine(t.In)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return config.RefuseImages("not started, as you answered", refused).Hint("or choose the image yourself with --image")
}

// readLine reads up to a newline one byte at a time, so nothing after it
// is taken from a terminal the agent reads next.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() < 256 {
		n, err := r.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			b.WriteByte(buf[0])
		}
		if err != nil {
			return b.String(), err
		}
	}
	return b.String(), nil
}

// Terminal is where a question to the user goes, and its answer comes
// from.
type Terminal struct {
	In         io.Reader
	IsTerminal bool
	Err        io.Writer
}
