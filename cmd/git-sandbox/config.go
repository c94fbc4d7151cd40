package main

import (
	"fmt"

	"github.com/BurntSushi/toml"

	"github.com/git-sandbox/git-sandbox/internal/config"
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
	fmt.Fprintf(app.Stdout, "# repository config (may only choose agent, image, setup, verify and tighten limits): %s\n\n", orNone(cfg.RepoFile, config.RepoFile))
	return toml.NewEncoder(app.Stdout).Encode(cfg.Config)
}

func orNone(found, wanted string) string {
	if found != "" {
		return found
	}
	return wanted + " (absent)"
}
