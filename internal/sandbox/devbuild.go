package sandbox

// The devcontainer image is built from the repository's files, so its
// build is the repository's code running: every step runs under the
// sandbox's network policy, on the sandbox's own networks (made, and the
// proxy started, before the build rather than with the container), never
// on the engine's default bridge.

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/agentspec"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
)

// devImage builds the plan's devcontainer image (or finds the one built from
// the same inputs) and points the plan's container at it, with the file's
// environment. The agent CLIs are tried only for an agent that needs one.
// A build gets the sandbox's networks first (buildNetwork); what that makes
// is added to p.made.
func (e *Env) devImage(ctx context.Context, d Engine, p *Plan, adapter agent.Adapter, io IO) error {
	img, denied, err := e.Toolchain().DevImage(ctx, d, toolchain.DevBuild{
		Config: p.Devcontainer, Commit: p.BaseCommit, NoAgents: adapter.Package() == "", Mode: p.Network,
		Network: func(bo *devcontainer.BuildOptions) error { return e.buildNetwork(ctx, d, p, bo) },
		Denied:  p.denied,
		Out:     io.Stderr,
	})
	p.buildDenied = denied
	if err != nil {
		return err
	}
	in := p.in
	in.Image = img.Tag
	in.ImageEnv = p.Devcontainer.Environ(img.Env)
	spec, err := agentspec.Build(in)
	if err != nil {
		return err
	}
	p.in, p.Container = in, spec
	return nil
}

// buildNetwork sets the network a devcontainer build runs on from the
// sandbox's: none; in allowlist mode its internal network, where nothing
// but its egress proxy answers, with HTTP_PROXY and the like pointing
// there; in open mode its own open network. The networks and the proxy are
// made now, for the build, and create finds them made.
func (e *Env) buildNetwork(ctx context.Context, d Engine, p *Plan, bo *devcontainer.BuildOptions) error {
	switch p.Network {
	case container.NetworkNone:
		bo.Network = string(container.NetworkNone)
		return nil
	case container.NetworkOpen:
		bo.Network = p.OpenNetwork
	case container.NetworkAllowlist:
		bo.Network = p.Egress.InternalNetwork
		// The proxy runs from its own image (planned with it), never the
		// one being built nor any other a repository names.
	default:
		return errors.New("no network for the build")
	}
	dir := e.Layout.Dir(p.Branch)
	p.made.Add(func() { os.RemoveAll(dir) })
	if err := e.network().Make(ctx, d, network.Networks{Branch: p.Branch, Egress: p.Egress, OpenNetwork: p.OpenNetwork}, &p.made); err != nil {
		return err
	}
	p.networksMade = true
	if p.Network == container.NetworkAllowlist {
		// Made, the proxy has its address: the build reaches it there.
		bo.ProxyArgs = map[string]string{}
		for _, kv := range network.ProxyEnv(p.Egress.ProxyURL) {
			k, v, _ := strings.Cut(kv, "=")
			bo.ProxyArgs[k] = v
		}
	}
	return nil
}

// denied are the destinations the sandbox's proxy denied since then, once
// the networks were made for the build.
func (p *Plan) denied(since time.Time) []network.Denied {
	if !p.networksMade {
		return nil
	}
	return p.Egress.DeniedSince(since)
}
