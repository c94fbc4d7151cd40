package docker

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/docker/docker/api/types/network"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// CreateNetwork creates a bridge network, stamped as managed by git
// sandbox, and returns it.
func (d *Engine) CreateNetwork(ctx context.Context, s container.NetworkSpec) (*container.Network, error) {
	o := network.CreateOptions{Driver: "bridge", Internal: s.Internal, Labels: managedLabels(s.Labels), Options: map[string]string{}}
	if s.HostUnreachable {
		o.Options["com.docker.network.bridge.inhibit_ipv4"] = "true"
	}
	if s.Isolated {
		o.Options["com.docker.network.bridge.enable_icc"] = "false"
	}
	if s.Subnet != "" {
		o.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: s.Subnet, IPRange: s.MemberRange}}}
	}
	resp, err := d.api.NetworkCreate(ctx, s.Name, o)
	if err != nil {
		err = sdkErr(err)
		switch msg := err.Error(); {
		case strings.Contains(msg, "overlaps"):
			return nil, container.WithKind(container.ErrAddressInUse, fmt.Errorf("create network %s: %w", s.Name, err))
		case strings.Contains(msg, "non-overlapping IPv4 address pool"):
			return nil, usererr.Wrap(err, "create network %s: the engine has no address range left for a new network", s.Name).
				Hint("docker network prune removes networks no container uses; default-address-pools in the engine's daemon.json gives it more")
		}
		return nil, fmt.Errorf("create network %s: %w", s.Name, err)
	}
	return &container.Network{ID: resp.ID, Name: s.Name, Internal: s.Internal, Labels: managedLabels(s.Labels)}, nil
}

// ConnectNetwork attaches a container to a network, at addr when it is
// valid.
func (d *Engine) ConnectNetwork(ctx context.Context, networkID, containerID string, addr netip.Addr) error {
	var ep *network.EndpointSettings
	if addr.IsValid() {
		ep = &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: addr.String()}}
	}
	if err := d.api.NetworkConnect(ctx, networkID, containerID, ep); err != nil {
		err = sdkErr(err)
		if addr.IsValid() && strings.Contains(strings.ToLower(err.Error()), "already in use") {
			err = container.WithKind(container.ErrAddressInUse, err)
		}
		return fmt.Errorf("connect %s to network %s: %w", containerID, networkID, err)
	}
	return nil
}

// RemoveNetwork removes a network; a missing one is not an error, one with
// containers attached is ErrConflict (or the engine's refusal).
func (d *Engine) RemoveNetwork(ctx context.Context, networkID string) error {
	err := sdkErr(d.api.NetworkRemove(ctx, networkID))
	if err != nil && !container.IsNotFound(err) {
		return fmt.Errorf("remove network %s: %w", networkID, err)
	}
	return nil
}

// ListNetworks returns the managed networks carrying every given label.
func (d *Engine) ListNetworks(ctx context.Context, labels ...string) ([]container.Network, error) {
	list, err := d.api.NetworkList(ctx, network.ListOptions{Filters: managedFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", sdkErr(err))
	}
	out := make([]container.Network, 0, len(list))
	for _, n := range list {
		nw := container.Network{ID: n.ID, Name: n.Name, Internal: n.Internal, Labels: n.Labels, Created: n.Created}
		for _, c := range n.IPAM.Config {
			if c.Gateway != "" {
				nw.Gateways = append(nw.Gateways, c.Gateway)
			}
		}
		out = append(out, nw)
	}
	return out, nil
}
