// Package netprobe is the two ends of the probe that finds out whether a
// Kubernetes cluster enforces NetworkPolicy: a listener in one Pod, and a
// client in another Pod that a policy denies every connection out, which
// tries to reach the listener. git sandbox runs both as a hidden command
// of itself in its egress proxy's image, the one image every cluster that
// runs allowlist sandboxes has.
package netprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"
)

// The client's exit codes: anything else is a probe that did not run.
const (
	// ExitBlocked: a connection to the listener was refused or timed out.
	ExitBlocked = 20
	// ExitConnected: every try for the whole window connected.
	ExitConnected = 21
)

// Listen accepts connections on addr and closes each at once, until ctx
// ends.
func Listen(ctx context.Context, addr string) error {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		c.Close()
	}
}

// Reach tries to connect to addr again and again for window, each try
// given timeout, and says whether every try connected. A network plugin
// needs a moment to program its rules for a new Pod, so a client that
// connects at first and is blocked a second later is blocked: one try
// that fails ends the probe. open is how long the tries connected before
// the one that failed began.
func Reach(ctx context.Context, addr string, window, timeout time.Duration) (connected bool, open time.Duration) {
	start := time.Now()
	end := start.Add(window)
	for {
		tried := time.Now()
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, tried.Sub(start)
		}
		c.Close()
		if time.Now().After(end) || ctx.Err() != nil {
			return true, time.Since(start)
		}
		select {
		case <-ctx.Done():
			return true, time.Since(start)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// BlockedLine is what the client prints when it was blocked; ParseOpen
// reads back how long it was open first.
func BlockedLine(addr string, open time.Duration) string {
	return fmt.Sprintf("blocked from %s; open for %s first", addr, open.Round(time.Millisecond))
}

var openFor = regexp.MustCompile(`; open for (\S+) first`)

// ParseOpen finds how long the client was open in its output (false when
// it says nothing of it).
func ParseOpen(out string) (time.Duration, bool) {
	m := openFor.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	return d, err == nil
}
