package egress

import (
	"net/netip"
)

// Class is how far an address is from the public internet.
type Class string

const (
	// Public is any address not listed below.
	Public Class = "public"
	// Private is RFC 1918, IPv6 unique local, carrier-grade NAT, the
	// benchmarking range, and the Docker host's own addresses: other
	// machines and containers near the sandbox.
	Private Class = "private"
	// DockerHost is one of the Docker host's own addresses; it is treated
	// as private even when it is public.
	DockerHost Class = "Docker host"
	// Local is loopback, link-local (with the cloud metadata address
	// 169.254.169.254), unspecified, multicast, broadcast and reserved
	// addresses: the proxy's own machine and its link.
	Local Class = "local"
)

var (
	privatePrefixes = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
		netip.MustParsePrefix("fc00::/7"),      // unique local
		netip.MustParsePrefix("fec0::/10"),     // deprecated site-local
	}
	localPrefixes = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),   // "this network"
		netip.MustParsePrefix("240.0.0.0/4"), // reserved, and broadcast
		netip.MustParsePrefix("100::/64"),    // discard
	}
	// nat64 prefixes embed an IPv4 address that a NAT64 gateway reaches.
	nat64Prefixes = []netip.Prefix{
		netip.MustParsePrefix("64:ff9b::/96"),
		netip.MustParsePrefix("64:ff9b:1::/48"),
	}
)

// Classify says whether a is public, private or local. IPv4-mapped IPv6
// addresses and NAT64 addresses are judged by the IPv4 address they carry.
func Classify(a netip.Addr) Class {
	a = a.WithZone("").Unmap()
	if !a.IsValid() {
		return Local
	}
	if a.Is6() {
		for _, p := range nat64Prefixes {
			if p.Contains(a) {
				b := a.As16()
				v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
				if c := Classify(v4); c != Public {
					return c
				}
			}
		}
	}
	switch {
	case a.IsLoopback(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(),
		a.IsInterfaceLocalMulticast(), a.IsMulticast(), a.IsUnspecified():
		return Local
	}
	for _, p := range localPrefixes {
		if p.Contains(a) {
			return Local
		}
	}
	for _, p := range privatePrefixes {
		if p.Contains(a) {
			return Private
		}
	}
	return Public
}

// classify is Classify with the Docker host's addresses told apart.
func (p *Policy) classify(a netip.Addr) Class {
	c := Classify(a)
	if c == Local {
		return c
	}
	for _, h := range p.HostAddrs {
		if h.WithZone("").Unmap() == a {
			return DockerHost
		}
	}
	return c
}
