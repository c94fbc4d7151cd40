package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up a host name's addresses. *net.Resolver is one; tests
// pass their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer reaches a destination the way the policy allows: it checks the
// name, resolves it itself, keeps only the addresses the policy lets that
// entry reach, and connects to one of those very addresses, so a name cannot
// resolve to something else between the check and the connection.
type dialer struct {
	policy   func() *Policy // the policy now
	resolver Resolver
	timeout  time.Duration
	net      net.Dialer
	// connect, when set, replaces net.DialContext (tests).
	connect func(ctx context.Context, network, addr string) (net.Conn, error)
}

// dial connects to t for kind. A refusal is a *DeniedError; anything else
// is a failure to reach an allowed destination.
func (d *dialer) dial(ctx context.Context, t Target, kind Kind) (net.Conn, netip.Addr, error) {
	pol := d.policy()
	dec, err := pol.Check(t, kind)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	c, a, err := d.dialChecked(ctx, pol, dec, t, kind)
	if err == nil {
		keepAlive(c)
	}
	return c, a, err
}

// upstreamKeepAlive is how an upstream connection is probed when idle, so
// that one a middlebox forgot ends rather than hangs. The dialer sets
// none itself (its net.Dialer's KeepAlive is -1): a tunnel sets it once
// the agent was told the tunnel is open, four system calls that would
// otherwise come before that answer.
var upstreamKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 15 * time.Second, Count: 9}

// keepAlive turns upstreamKeepAlive on for c.
func keepAlive(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(upstreamKeepAlive)
	}
}

// dialChecked is dial once the name is checked: dec is pol's decision on
// t for kind.
func (d *dialer) dialChecked(ctx context.Context, pol *Policy, dec Decision, t Target, kind Kind) (net.Conn, netip.Addr, error) {
	var err error
	addrs := []netip.Addr{t.Addr}
	if !t.Addr.IsValid() {
		rctx, cancel := context.WithTimeout(ctx, d.timeout)
		addrs, err = d.resolver.LookupNetIP(rctx, "ip", lookupName(t.Host))
		cancel()
		if err != nil {
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
				return nil, netip.Addr{}, fmt.Errorf("resolve %s: no such host", t.Host)
			}
			return nil, netip.Addr{}, fmt.Errorf("resolve %s: %w", t.Host, err)
		}
	}
	kept, err := pol.Vet(dec, t, kind, addrs)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	var last error
	for _, a := range kept {
		cctx, cancel := context.WithTimeout(ctx, d.timeout)
		connect := d.net.DialContext
		if d.connect != nil {
			connect = d.connect
		}
		c, err := connect(cctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(int(t.Port))))
		cancel()
		if err == nil {
			return c, a, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.Addr{}, fmt.Errorf("connect %s: %w", t, last)
}

// lookupName is the name asked of the resolver for an allowed host. A name
// with a dot is asked as an absolute name (a trailing dot), so that no
// search domain of the proxy's resolv.conf is appended to it: the one name
// any resolver is ever asked is the name the allow list allowed. A
// single-label name, which only an exact entry of the user's allows (a
// short name of their network), is asked as the system would ask it.
func lookupName(host string) string {
	if strings.Contains(host, ".") {
		return host + "."
	}
	return host
}

// dialFunc is d.dial for an http.Transport, which names the destination
// as host:port.
func (d *dialer) dialFunc(kind Kind) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		t, err := ParseTarget(addr, kind)
		if err != nil {
			return nil, err
		}
		c, _, err := d.dial(ctx, t, kind)
		return c, err
	}
}
