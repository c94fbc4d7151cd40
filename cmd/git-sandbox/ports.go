package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// PortsCmd is git sandbox ports.
type PortsCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	JSON   bool   `help:"Print a JSON array."`
}

// Help is ports' long help.
func (c *PortsCmd) Help() string {
	return `Prints the container ports the sandbox publishes (start --publish, and the
devcontainer's forwardPorts), one per line: the container's port, then the
host address that reaches it. Ports are published on 127.0.0.1 only, and the
mapping is fixed when the sandbox is created. In allowlist mode the sandbox's
proxy publishes them and carries each connection to the agent's port; they
answer while the sandbox runs (stop takes them away, start brings them back).`
}

// Run prints the mapping.
func (c *PortsCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	if c.JSON {
		ports := sb.Ports()
		if ports == nil {
			ports = []container.Port{}
		}
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ports)
	}
	if len(sb.Ports()) == 0 {
		app.UI.Infof("sandbox %s publishes no ports", termsafe.String(c.Branch))
		app.UI.Hintf("start a sandbox with --publish PORT to reach a server in it from this machine")
		return nil
	}
	for _, p := range sb.Ports() {
		fmt.Fprintf(app.Stdout, "%d -> %s\n", p.Port, net.JoinHostPort(p.HostIP, strconv.Itoa(p.HostPort)))
	}
	return nil
}
