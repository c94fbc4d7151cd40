package container

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/network"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

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

// CreateNetwork creates a bridge network, stamped as managed by git
// sandbox, and returns it.
func (d *Docker) CreateNetwork(ctx context.Context, s NetworkSpec) (*Network, error) {
	o := network.CreateOptions{Driver: "bridge", Internal: s.Internal, Labels: managedLabels(s.Labels), Options: map[string]string{}}
	if s.HostUnreachable {
		o.Options["com.docker.network.bridge.inhibit_ipv4"] = "true"
	}
	if s.Isolated {
		o.Options["com.docker.network.bridge.enable_icc"] = "false"
	}
	if s.Subnet != "" {
		o.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: s.Subnet}}}
	}
	resp, err := d.api.NetworkCreate(ctx, s.Name, o)
	if err != nil {
		err = sdkErr(err)
		switch msg := err.Error(); {
		case strings.Contains(msg, "overlaps"):
			return nil, &kindError{kind: ErrAddressInUse, err: fmt.Errorf("create network %s: %w", s.Name, err)}
		case strings.Contains(msg, "non-overlapping IPv4 address pool"):
			return nil, usererr.Wrap(err, "create network %s: the engine has no address range left for a new network", s.Name).
				Hint("docker network prune removes networks no container uses; default-address-pools in the engine's daemon.json gives it more")
		}
		return nil, fmt.Errorf("create network %s: %w", s.Name, err)
	}
	return &Network{ID: resp.ID, Name: s.Name, Internal: s.Internal, Labels: managedLabels(s.Labels)}, nil
}

// ConnectNetwork attaches a container to a network.
func (d *Docker) ConnectNetwork(ctx context.Context, networkID, containerID string) error {
	if err := d.api.NetworkConnect(ctx, networkID, containerID, nil); err != nil {
		return fmt.Errorf("connect %s to network %s: %w", containerID, networkID, sdkErr(err))
	}
	return nil
}

// RemoveNetwork removes a network; a missing one is not an error, one with
// containers attached is ErrConflict (or the engine's refusal).
func (d *Docker) RemoveNetwork(ctx context.Context, networkID string) error {
	err := sdkErr(d.api.NetworkRemove(ctx, networkID))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove network %s: %w", networkID, err)
	}
	return nil
}

// ListNetworks returns the managed networks carrying every given label.
func (d *Docker) ListNetworks(ctx context.Context, labels ...string) ([]Network, error) {
	list, err := d.api.NetworkList(ctx, network.ListOptions{Filters: managedFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", sdkErr(err))
	}
	out := make([]Network, 0, len(list))
	for _, n := range list {
		nw := Network{ID: n.ID, Name: n.Name, Internal: n.Internal, Labels: n.Labels, Created: n.Created}
		for _, c := range n.IPAM.Config {
			if c.Gateway != "" {
				nw.Gateways = append(nw.Gateways, c.Gateway)
			}
		}
		out = append(out, nw)
	}
	return out, nil
}
