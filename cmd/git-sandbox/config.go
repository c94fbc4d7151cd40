package main

import (
	"bytes"
	"fmt"

	"github.com/BurntSushi/toml"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/kube"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// ConfigCmd groups the config commands.
type ConfigCmd struct {
	Show ConfigShowCmd `cmd:"" default:"1" help:"Print the effective configuration and where it came from."`
}

// ConfigShowCmd is git sandbox config show.
type ConfigShowCmd struct{}

// Run prints the configuration.
func (c *ConfigShowCmd) Run(app *App) error {
	var cfg *config.Loaded
	if env, err := app.Env(); err == nil {
		cfg = env.Config
	} else {
		app.UI.Warnf("%v (showing your own config only)", err)
		if cfg, err = config.Load(""); err != nil {
			return err
		}
	}
	fmt.Fprintf(app.Stdout, "# user config (trusted): %s\n", orNone(cfg.UserFile, config.UserPath()))
	fmt.Fprintf(app.Stdout, "# repository config (may only choose agent, image, setup, setup_inputs, verify, its own caches, tighten limits, deny hosts or choose network none): %s\n\n", orNone(cfg.RepoFile, config.RepoFile))
	// A repository's setup, verify and image are its own text: escaped
	// inside their strings, as JSON output is.
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(cfg.Config); err != nil {
		return err
	}
	if _, err := app.Stdout.Write(termsafe.TOML(b.Bytes())); err != nil {
		return err
	}
	for _, e := range cfg.Engines {
		if e.IsKubernetes() {
			fmt.Fprintf(app.Stdout, "# engine %s: warm_pods = %d reserves %s\n", termsafe.String(e.Name), e.WarmPods, kube.PoolCost(e.WarmPods, e.VolumeSize))
		}
	}
	return printAllowList(app, cfg)
}

// printAllowList prints the effective allow list of a sandbox of the
// configured agent, each entry with where it came from, as TOML comments.
func printAllowList(app *App, cfg *config.Loaded) error {
	w := app.Stdout
	pol, err := network.EgressPolicy(cfg, cfg.Agent, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n# effective allow list (network = %q, agent %s); --allow adds to it\n", cfg.Network, termsafe.String(cfg.Agent))
	if cfg.Network != container.NetworkAllowlist {
		fmt.Fprintf(w, "#   (not used: the network is %s)\n", cfg.Network)
	}
	if len(pol.Allow) == 0 {
		fmt.Fprintf(w, "#   (empty: the agent reaches nothing)\n")
	}
	for _, e := range pol.Allow {
		line := fmt.Sprintf("#   %-36s from %s", termsafe.String(e.String()), e.Source)
		if r, ok := pol.Removed(e); ok {
			line += fmt.Sprintf("; removed by %s (deny %s)", r.Source, termsafe.String(r.String()))
		}
		fmt.Fprintln(w, line)
	}
	for _, r := range pol.Remove {
		fmt.Fprintf(w, "#   deny %-31s from %s\n", termsafe.String(r.String()), r.Source)
	}
	return nil
}

func orNone(found, wanted string) string {
	if found != "" {
		return found
	}
	return wanted + " (absent)"
}
