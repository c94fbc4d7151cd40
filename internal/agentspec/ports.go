package agentspec

import (
	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Ports reads --publish (publish) and adds the devcontainer's forwardPorts (forward)
// not published already; every port is on the host's loopback interface.
// Outside a dry run, a free host port is chosen for each that names none,
// so the mapping is fixed at creation (labels, record) and the same on
// every resume.
func Ports(publish []string, forward []int, network container.NetworkMode, dryRun bool) ([]container.Port, error) {
	var ports []container.Port
	seen := map[int]bool{}
	hostSeen := map[int]bool{}
	for _, s := range publish {
		p, err := container.ParsePublish(s)
		if err != nil {
			return nil, usererr.New("--publish %v", err).
				Hint("--publish 3000 publishes port 3000 on a free port of 127.0.0.1; --publish 8080:3000 on 127.0.0.1:8080")
		}
		if seen[p.Port] {
			return nil, usererr.New("--publish: port %d is published twice", p.Port)
		}
		if p.HostPort > 0 && hostSeen[p.HostPort] {
			return nil, usererr.New("--publish: host port %d is used twice", p.HostPort)
		}
		seen[p.Port], hostSeen[p.HostPort] = true, true
		ports = append(ports, p)
	}
	for _, n := range forward {
		if !seen[n] {
			seen[n] = true
			ports = append(ports, container.Port{HostIP: container.Loopback, Port: n})
		}
	}
	// With no network at all nothing can reach a server in the sandbox.
	// (Allowlist mode's ports are published by its proxy.)
	if len(ports) > 0 && network == container.NetworkNone {
		if len(publish) == 0 {
			return nil, nil // forwardPorts only: nothing to reach from the host
		}
		return nil, usererr.New("--publish needs a network: the sandbox's network is %s, which nothing can reach", network).
			Hint("leave out --network %s: the default, %s, publishes the port on 127.0.0.1 through the sandbox's proxy while the agent reaches only the hosts you allow", network, container.NetworkAllowlist)
	}
	if dryRun {
		return ports, nil
	}
	for i := range ports {
		if ports[i].HostPort > 0 {
			continue
		}
		for {
			n, err := container.FreeLoopbackPort()
			if err != nil {
				return nil, err
			}
			if !hostSeen[n] {
				hostSeen[n] = true
				ports[i].HostPort = n
				break
			}
		}
	}
	return ports, nil
}
