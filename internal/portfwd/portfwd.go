// Package portfwd carries the connections to a sandbox's published ports
// in allowlist mode. The agent's container is on an internal network, where
// the engine publishes nothing; its egress proxy's container is on that
// network and on the egress network, where the engine publishes its ports
// on 127.0.0.1. The forwarder runs in the proxy's process (git-sandbox
// __proxy --forward FILE): for each published port it listens on a port of
// the proxy's container and carries every connection there to the agent's
// port, by the agent's alias on the internal network.
//
// It is ingress only: nothing here dials anything but the agent, and the
// agent gets no route it did not have. A connection from a container of a
// network the proxy is on (the agent itself, another sandbox's proxy on the
// shared egress network) is refused: what the engine brings from this
// machine's loopback arrives from the egress network's gateway.
package portfwd

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// File is the forwarder's configuration, beside the proxy's.
const File = "forward.json"

// ListenBase is the proxy container's port of the first forwarded port;
// the i-th listens on ListenBase+i (away from the proxy's own 3128).
const ListenBase = 41000

// MaxPorts bounds how many ports one sandbox forwards.
const MaxPorts = 100

// ListenPort is the proxy container's port of the i-th forwarded port.
func ListenPort(i int) int { return ListenBase + i }

// Config is what the forwarder reads.
type Config struct {
	// Target is the agent's name on the sandbox's internal network.
	Target string `json:"target"`
	Ports  []Rule `json:"ports"`
}

// Rule forwards the proxy container's port Listen to the agent's Port.
type Rule struct {
	Listen int `json:"listen"`
	Port   int `json:"port"`
}

// Write writes c to path (mode 0600).
func Write(path string, c *Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("write port forwarding: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write port forwarding: %w", err)
	}
	return nil
}

// Load reads and checks the configuration at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load port forwarding: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("load port forwarding %s: %w", path, err)
	}
	if c.Target == "" || len(c.Ports) == 0 || len(c.Ports) > MaxPorts {
		return nil, fmt.Errorf("load port forwarding %s: want a target and 1 to %d ports", path, MaxPorts)
	}
	for _, r := range c.Ports {
		if r.Listen < 0 || r.Listen > 65535 || r.Port < 1 || r.Port > 65535 {
			return nil, fmt.Errorf("load port forwarding %s: port %d -> %d out of range", path, r.Listen, r.Port)
		}
	}
	return &c, nil
}
