package main

import (
	"net"
	"os"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
)

// ProxyCmd runs a sandbox's egress proxy. start runs it as the command of
// the sandbox's proxy container, with this binary mounted read-only; it
// serves until SIGTERM or SIGINT.
type ProxyCmd struct {
	Config string `required:"" placeholder:"FILE" help:"The proxy's configuration (JSON, mode 0600)."`
}

// Run serves until the process is told to stop.
func (c *ProxyCmd) Run(app *App) error {
	cfg, err := egress.LoadConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt)
	defer stop()
	return egress.Run(ctx, cfg, app.Stderr, func(a net.Addr) {
		app.UI.Infof("proxy listening on %s", a)
	})
}
