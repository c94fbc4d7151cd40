package portfwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// maxConns bounds the connections carried at once, per forwarder: a
// browser opens a handful; the proxy's container has little memory.
const maxConns = 512

// dialTimeout bounds each connection to the agent's port.
const dialTimeout = 5 * time.Second

// Forwarder listens on the proxy's ports and carries connections to the
// agent's.
type Forwarder struct {
	target    string
	listeners []net.Listener
	ports     []int
	gate      Gate
	slots     chan struct{}
	errs      io.Writer
	mu        sync.Mutex
}

// Listen binds every port of c (all of them or none) and admits
// connections through gate.
func Listen(c *Config, gate Gate, errs io.Writer) (*Forwarder, error) {
	f := &Forwarder{target: c.Target, gate: gate, slots: make(chan struct{}, maxConns), errs: errs}
	for _, r := range c.Ports {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(r.Listen))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("port forwarding: %w", err)
		}
		f.listeners = append(f.listeners, l)
		f.ports = append(f.ports, r.Port)
	}
	return f, nil
}

// Addrs are the addresses listened on, in the configuration's order.
func (f *Forwarder) Addrs() []net.Addr {
	out := make([]net.Addr, len(f.listeners))
	for i, l := range f.listeners {
		out[i] = l.Addr()
	}
	return out
}

// Close stops listening; connections under way go on until they end.
func (f *Forwarder) Close() {
	for _, l := range f.listeners {
		_ = l.Close()
	}
}

// Serve carries connections until ctx is done, then stops listening.
func (f *Forwarder) Serve(ctx context.Context) {
	var wg sync.WaitGroup
	for i, l := range f.listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.accept(ctx, l, f.ports[i])
		}()
	}
	<-ctx.Done()
	f.Close()
	wg.Wait()
}

// accept takes the connections of one listener until it is closed.
func (f *Forwarder) accept(ctx context.Context, l net.Listener, port int) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // out of descriptors: let some close
			continue
		}
		if !f.admit(c) {
			continue
		}
		select {
		case f.slots <- struct{}{}:
			go func() {
				defer func() { <-f.slots }()
				f.carry(ctx, c, port)
			}()
		default:
			f.logf("port %d: %d connections already, one refused", port, maxConns)
			_ = c.Close()
		}
	}
}

// admit closes a connection its gate refuses, and says so.
func (f *Forwarder) admit(c net.Conn) bool {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err == nil && f.gate.Admits(ap.Addr()) {
		return true
	}
	f.logf("refused a connection from %s: not from this machine", c.RemoteAddr())
	_ = c.Close()
	return false
}

// carry joins c to the agent's port until both directions end.
func (f *Forwarder) carry(ctx context.Context, c net.Conn, port int) {
	defer c.Close()
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(ctx, "tcp", net.JoinHostPort(f.target, strconv.Itoa(port)))
	if err != nil {
		f.logf("port %d: %v (is the server listening on 0.0.0.0:%d in the sandbox?)", port, err, port)
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(up, c)
	}()
	pipe(c, up)
	<-done
}

// pipe copies src to dst, then ends dst's writing side.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

func (f *Forwarder) logf(format string, args ...any) {
	if f.errs == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.errs, "port forwarding: "+format+"\n", args...)
}

// Start loads the forwarding configuration at path, listens, and serves
// in the background until ctx ends (the proxy's --forward).
func Start(ctx context.Context, path string, errs io.Writer) error {
	c, err := Load(path)
	if err != nil {
		return err
	}
	gate, err := LocalGate()
	if err != nil {
		return err
	}
	f, err := Listen(c, gate, errs)
	if err != nil {
		return err
	}
	go f.Serve(ctx)
	return nil
}
