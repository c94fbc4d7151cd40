package portfwd

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Gate says which peers may use the forwarded ports: none from the
// networks the proxy is on, but their gateway. The engine brings a
// connection to a published port from the host, so it arrives from the
// gateway of the network the port is published on (or, routed, from
// beyond every network of the proxy); a container beside the proxy (the
// agent, another proxy on the shared egress network) is refused.
type Gate struct {
	// Networks are the proxy's networks.
	Networks []netip.Prefix
	// Gateway is its default route's gateway.
	Gateway netip.Addr
}

// Admits reports whether a connection from a may be carried.
func (g Gate) Admits(a netip.Addr) bool {
	a = a.Unmap()
	if a == g.Gateway {
		return true
	}
	for _, n := range g.Networks {
		if n.Contains(a) {
			return false
		}
	}
	return true
}

// LocalGate is the gate of this process's network namespace: its
// interfaces' networks and its default gateway (from /proc/net/route). A
// namespace whose gateway cannot be read admits no neighbour.
func LocalGate() (Gate, error) {
	var g Gate
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return g, err
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() {
			continue
		}
		g.Networks = append(g.Networks, p.Masked())
	}
	if f, err := os.Open("/proc/net/route"); err == nil {
		defer f.Close()
		g.Gateway = defaultGateway(f)
	}
	return g, nil
}

// defaultGateway reads the gateway of the default route from a
// /proc/net/route table (addresses in hex, in the host's byte order,
// little-endian on every platform the engines run); the zero Addr when
// there is none.
func defaultGateway(r io.Reader) netip.Addr {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(f[2])
		if err != nil || len(b) != 4 {
			continue
		}
		var ip [4]byte
		binary.BigEndian.PutUint32(ip[:], binary.LittleEndian.Uint32(b))
		if a := netip.AddrFrom4(ip); !a.IsUnspecified() {
			return a
		}
	}
	return netip.Addr{}
}
