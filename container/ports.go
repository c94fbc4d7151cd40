package container

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Loopback is the only host address a sandbox's ports are published on.
const Loopback = "127.0.0.1"

// LabelPorts records a sandbox's published ports at creation:
// "127.0.0.1:HOST->PORT", comma-separated.
const LabelPorts = "git-sandbox.ports"

// Port is a container port published on the host's loopback interface.
type Port struct {
	HostIP string `json:"host_ip"`
	// HostPort is the host's port; 0 in a plan means one is chosen when
	// the sandbox is created.
	HostPort int `json:"host_port"`
	// Port is the container's TCP port.
	Port int `json:"port"`
}

// String is "127.0.0.1:HOST->PORT".
func (p Port) String() string {
	host := "auto"
	if p.HostPort > 0 {
		host = strconv.Itoa(p.HostPort)
	}
	return fmt.Sprintf("%s:%s->%d", p.HostIP, host, p.Port)
}

// ParsePublish reads a --publish value: PORT (a free host port is chosen)
// or HOST_PORT:PORT, TCP, always on the loopback interface. An address
// ("0.0.0.0:8080:80") is refused: nothing of a sandbox is reachable from
// another machine.
func ParsePublish(s string) (Port, error) {
	parts := strings.Split(s, ":")
	var host, ctr string
	switch len(parts) {
	case 1:
		ctr = parts[0]
	case 2:
		host, ctr = parts[0], parts[1]
	default:
		return Port{}, fmt.Errorf("%q: want PORT or HOST_PORT:PORT (ports are published on %s only)", s, Loopback)
	}
	ctr = strings.TrimSuffix(ctr, "/tcp")
	p := Port{HostIP: Loopback}
	var err error
	if p.Port, err = portNumber(ctr); err != nil {
		return Port{}, fmt.Errorf("%q: %v", s, err)
	}
	if host != "" {
		if p.HostPort, err = portNumber(host); err != nil {
			return Port{}, fmt.Errorf("%q: host %v", s, err)
		}
	}
	return p, nil
}

func portNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return n, nil
}

// FreeLoopbackPort returns a TCP port of the host's loopback interface that
// nothing listens on right now.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PortsLabel is LabelPorts' value for ports.
func PortsLabel(ports []Port) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
