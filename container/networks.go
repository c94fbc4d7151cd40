package container

import "time"

// NetworkSpec describes a network of the engine's own (not a NetworkMode:
// that is what a sandbox is allowed; this is a network object made for it).
type NetworkSpec struct {
	Name string
	// Internal networks have no route out: their containers reach each
	// other and nothing else.
	Internal bool
	// HostUnreachable gives the host no address on the network, so its
	// containers cannot reach the host's ports through the gateway (an
	// internal network alone still lets them).
	HostUnreachable bool
	// Subnet, when set, is the network's IPv4 range (CIDR) instead of one
	// the engine picks from its address pools (a few dozen at most).
	Subnet string
	// MemberRange, within Subnet, is where the engine numbers the
	// network's members; the rest of Subnet is kept for members connected
	// at an address of their own (ConnectNetwork's addr), which no other
	// member can then take.
	MemberRange string
	// Isolated turns off traffic between the network's containers
	// (inter-container communication): a container on it reaches the
	// world and nothing else on the network.
	Isolated bool
	Labels   map[string]string
}

// Network is a network that exists.
type Network struct {
	ID       string
	Name     string
	Internal bool
	Labels   map[string]string
	// Gateways are the host's addresses on the network.
	Gateways []string
	// Created is when the engine made it.
	Created time.Time
}
