// Package engines is the one place that reaches a container engine by the
// name the user's config gives it: "" is the Docker daemon the environment
// names (DOCKER_HOST and friends), any other name an [[engine]] of the
// config, a Docker endpoint (container/docker) or a Kubernetes cluster
// (container/kube). Callers get a container.Engine and never learn which.
package engines

import (
	"context"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/docker"
	"github.com/git-sandbox/git-sandbox/container/kube"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Override, when set, is what Connect and ConnectTo return for every
// engine, by its name ("" for the environment's): the command's script
// tests set it, in their test binary's main, to a fake engine whose state
// persists across the processes of one script. Nothing in the product sets
// it, and no flag, file or environment variable reaches it.
var Override func(ctx context.Context, name string) (container.Engine, error)

// Connect reaches the engine called name in cfg ("" for the environment's
// Docker daemon) and checks that it answers.
func Connect(ctx context.Context, cfg *config.Loaded, name string) (container.Engine, error) {
	if Override != nil {
		if name != "" {
			if _, err := cfg.EngineNamed(name); err != nil {
				return nil, err
			}
		}
		return Override(ctx, name)
	}
	if name == "" {
		d, err := docker.Connect(ctx)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	c, err := cfg.EngineNamed(name)
	if err != nil {
		return nil, err
	}
	return ConnectTo(ctx, c)
}

// ConnectTo reaches a configured engine and checks that it answers.
func ConnectTo(ctx context.Context, c *config.Engine) (container.Engine, error) {
	if Override != nil {
		return Override(ctx, c.Name)
	}
	if c.IsKubernetes() {
		k, err := kube.Connect(ctx, KubeOptions(c))
		if err != nil {
			return nil, err
		}
		return k, nil
	}
	d, err := docker.ConnectTo(ctx, docker.Endpoint{Name: c.Name, Host: c.Host, CertPath: c.CertPath, Context: c.Context})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// KubeOptions are a Kubernetes engine's settings from the user's config.
func KubeOptions(c *config.Engine) kube.Options {
	mem, cpus := c.Requests()
	uid, gid := c.RunAs()
	return kube.Options{
		Name: c.Name, Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace,
		Image: c.Image, ProxyImage: c.ProxyImage, RuntimeClass: c.RuntimeClass, StorageClass: c.StorageClass, VolumeSize: c.VolumeSize,
		MemoryRequest: mem, CPURequest: cpus, RunAsUser: uid, RunAsGroup: gid,
		NetworkPolicy: c.NetworkPolicy, StateDir: stateDir(), WarmPods: c.WarmPods,
		ConfigFile: config.UserPath(),
	}
}

// Named is a name an engine goes by in the user's config ("" for the
// environment's Docker daemon), with what the config says of it (nil for
// "").
type Named struct {
	Name   string
	Config *config.Engine
}

// All lists the environment's engine and every configured one, in the
// config's order.
func All(cfg *config.Loaded) []Named {
	out := []Named{{}}
	for i := range cfg.Engines {
		out = append(out, Named{Name: cfg.Engines[i].Name, Config: &cfg.Engines[i]})
	}
	return out
}

// CopyMode reports whether sandboxes on the engine keep their files in
// volumes on it rather than bind-mounting this machine's: the config
// says so, or the engine cannot bind-mount at all.
func (n Named) CopyMode(a container.Abilities) bool {
	return !a.BindMounts || (n.Config != nil && n.Config.CopyMode())
}

// stateDir is where an engine keeps what it found out about its cluster
// ("" when there is no state directory: then it asks again each time).
func stateDir() string {
	root, err := worktree.StateRoot()
	if err != nil {
		return ""
	}
	return filepath.Join(root, "engines")
}
