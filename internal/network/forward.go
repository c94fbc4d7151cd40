package network

import (
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/portfwd"
)

// AgentAlias is the agent's name on its internal network when its proxy
// forwards published ports to it: short (a DNS label, which the agent's
// container name may not be) and the same for every sandbox, each on a
// network of its own.
const AgentAlias = "git-sandbox-agent"

// SetForward makes the proxy carry the agent's published ports: the engine
// publishes the proxy's container (on the egress network, which has a
// route to this machine) at each port's host address, and the proxy's
// forwarder carries what arrives there to the agent's port (portfwd). No
// port: the proxy forwards nothing.
func (p *EgressPlan) SetForward(ports []container.Port) {
	p.Forward = append([]container.Port(nil), ports...)
	p.Proxy.Ports = nil
	p.Proxy.Argv = proxyArgv(len(ports) > 0)
	for i, pt := range ports {
		p.Proxy.Ports = append(p.Proxy.Ports, container.Port{HostIP: pt.HostIP, HostPort: pt.HostPort, Port: portfwd.ListenPort(i)})
	}
}

// proxyArgv is the proxy's command, with the forwarder's file when it
// forwards ports.
func proxyArgv(forward bool) []string {
	argv := []string{"__proxy", "--config", ProxyConfigDir + "/" + ProxyConfigFile}
	if forward {
		argv = append(argv, "--forward", ProxyConfigDir+"/"+portfwd.File)
	}
	return argv
}

// writeForward writes the forwarder's file beside the proxy's
// configuration when the plan forwards ports.
func writeForward(p *EgressPlan) error {
	if len(p.Forward) == 0 {
		return nil
	}
	c := &portfwd.Config{Target: AgentAlias}
	for i, pt := range p.Forward {
		c.Ports = append(c.Ports, portfwd.Rule{Listen: portfwd.ListenPort(i), Port: pt.Port})
	}
	return portfwd.Write(filepath.Join(p.configDir, portfwd.File), c)
}
