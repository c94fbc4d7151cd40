package fake

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// CreateVolume implements the engine's CreateVolume.
func (f *Engine) CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error) {
	if err := f.begin("CreateVolume", s.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.volumes[s.Name]; ok {
		return &v, nil // as an engine does: the volume of that name
	}
	v := container.Volume{Name: s.Name, Labels: withManaged(s.Labels)}
	f.volumes[s.Name] = v
	return &v, nil
}

// RemoveVolume implements the engine's RemoveVolume.
func (f *Engine) RemoveVolume(ctx context.Context, name string) error {
	if err := f.begin("RemoveVolume", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.volumes, name)
	return nil
}

// ListVolumes implements the engine's ListVolumes.
func (f *Engine) ListVolumes(ctx context.Context, labels ...string) ([]container.Volume, error) {
	if err := f.begin("ListVolumes", strings.Join(labels, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Volume
	for _, v := range f.volumes {
		if hasLabels(v.Labels, labels) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b container.Volume) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateNetwork implements the engine's CreateNetwork.
func (f *Engine) CreateNetwork(ctx context.Context, s container.NetworkSpec) (*container.Network, error) {
	if err := f.begin("CreateNetwork", s.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.networks {
		if n.Name == s.Name && !f.DuplicateNetworkNames {
			return nil, conflict("network %s exists", s.Name)
		}
		if s.Subnet != "" && f.netSpecs[id].Subnet == s.Subnet {
			return nil, fmt.Errorf("network %s: pool overlaps: %w", s.Name, container.ErrAddressInUse)
		}
	}
	if s.MemberRange != "" {
		sub, err1 := netip.ParsePrefix(s.Subnet)
		r, err2 := netip.ParsePrefix(s.MemberRange)
		if err1 != nil || err2 != nil || !sub.Contains(r.Addr()) || r.Bits() < sub.Bits() {
			return nil, fmt.Errorf("network %s: member range %s is not within subnet %s", s.Name, s.MemberRange, s.Subnet)
		}
	}
	f.seq++
	n := &container.Network{ID: fmt.Sprintf("net%061d", f.seq), Name: s.Name, Internal: s.Internal, Labels: withManaged(s.Labels), Created: time.Now()}
	f.networks[n.ID] = n
	f.netSpecs[n.ID] = s
	cp := *n
	return &cp, nil
}

// NetworkSpec is what the network with this id was made from.
func (f *Engine) NetworkSpec(id string) container.NetworkSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.netSpecs[id]
}

// sharedName reports whether name is no network's id and the name of
// more than one.
func (f *Engine) sharedName(name string) bool {
	if _, isID := f.networks[name]; isID || name == "" {
		return false
	}
	n := 0
	for _, o := range f.networks {
		if o.Name == name {
			n++
		}
	}
	return n > 1
}

// ambiguous returns the name of a network of c that another network has
// too, as an engine that resolves a container's networks by name at start
// finds it ("" when none).
func (f *Engine) ambiguous(c *Container) string {
	ids := append([]string{c.Spec.NetworkName}, c.Networks...)
	for _, id := range ids {
		n := f.network(id)
		if n == nil {
			continue
		}
		for _, o := range f.networks {
			if o.ID != n.ID && o.Name == n.Name {
				return n.Name
			}
		}
	}
	return ""
}

func (f *Engine) network(idOrName string) *container.Network {
	if n, ok := f.networks[idOrName]; ok {
		return n
	}
	for _, n := range f.networks {
		if n.Name == idOrName {
			return n
		}
	}
	return nil
}

// ConnectNetwork implements the engine's ConnectNetwork.
func (f *Engine) ConnectNetwork(ctx context.Context, networkID, containerID string, addr netip.Addr) error {
	if err := f.begin("ConnectNetwork", networkID+" "+containerID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.network(networkID)
	if n == nil {
		return notFound("network", networkID)
	}
	c := f.lookup(containerID)
	if c == nil {
		return notFound("container", containerID)
	}
	if addr.IsValid() {
		if err := f.fixedAddress(n, addr); err != nil {
			return err
		}
		if c.Addrs == nil {
			c.Addrs = map[string]netip.Addr{}
		}
		c.Addrs[n.ID] = addr
	}
	c.Networks = append(c.Networks, n.ID)
	return nil
}

// fixedAddress refuses addr on network n, as Docker does, unless it is in
// n's subnet, outside its member range and no other member's.
func (f *Engine) fixedAddress(n *container.Network, addr netip.Addr) error {
	s := f.netSpecs[n.ID]
	sub, err := netip.ParsePrefix(s.Subnet)
	if err != nil || !sub.Contains(addr) {
		return fmt.Errorf("network %s: address %v is not in its subnet %q", n.Name, addr, s.Subnet)
	}
	if r, err := netip.ParsePrefix(s.MemberRange); err == nil && r.Contains(addr) {
		return fmt.Errorf("network %s: address %v is in its member range %s", n.Name, addr, r)
	}
	for _, o := range f.containers {
		if o.Addrs[n.ID] == addr {
			return fmt.Errorf("network %s: address %v is %s's: %w", n.Name, addr, o.Name, container.ErrAddressInUse)
		}
	}
	return nil
}

// RemoveNetwork implements the engine's RemoveNetwork.
func (f *Engine) RemoveNetwork(ctx context.Context, networkID string) error {
	if err := f.begin("RemoveNetwork", networkID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.network(networkID)
	if n == nil {
		return nil
	}
	for _, c := range f.containers {
		if slices.Contains(c.Networks, n.ID) {
			return conflict("network %s has active endpoints", n.Name)
		}
	}
	delete(f.networks, n.ID)
	return nil
}

// ListNetworks implements the engine's ListNetworks.
func (f *Engine) ListNetworks(ctx context.Context, labels ...string) ([]container.Network, error) {
	if err := f.begin("ListNetworks", strings.Join(labels, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Network
	for _, n := range f.networks {
		if hasLabels(n.Labels, labels) {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b container.Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
