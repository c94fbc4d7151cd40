package container

import (
	"fmt"
	"slices"
	"strings"
)

// NetworkMode is the network a sandbox's container is given. Every mode is
// listed in networkModes; the config, the flags and the spec all validate
// through ParseNetworkMode, so adding a mode is a change here (and in the
// spec's conversion, which must know what the mode means).
type NetworkMode string

// The network modes.
const (
	// NetworkNone: no network at all.
	NetworkNone NetworkMode = "none"
	// NetworkAllowlist: the container joins only a network of its own with
	// no route out, where an egress proxy lets through the hosts its allow
	// list names (Spec.NetworkName is that network).
	NetworkAllowlist NetworkMode = "allowlist"
	// NetworkOpen: a bridge network of the sandbox's own (Spec.NetworkName)
	// with a route out to anything, this machine's ports included; no
	// other sandbox is on it.
	NetworkOpen NetworkMode = "open"
)

// networkModes lists every mode, the most closed first.
var networkModes = []NetworkMode{NetworkNone, NetworkAllowlist, NetworkOpen}

// NetworkModes returns the valid modes, the most closed first.
func NetworkModes() []NetworkMode { return append([]NetworkMode(nil), networkModes...) }

// NetworkModeNames is the valid modes as words for messages: "none or bridge".
func NetworkModeNames() string {
	names := make([]string, len(networkModes))
	for i, m := range networkModes {
		names[i] = string(m)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ParseNetworkMode returns the mode s names, or an error listing the valid
// ones. Host networking is never a mode: it would give the agent the
// host's services.
func ParseNetworkMode(s string) (NetworkMode, error) {
	for _, m := range networkModes {
		if string(m) == s {
			return m, nil
		}
	}
	if s == "bridge" {
		return "", fmt.Errorf("network %q: must be %s (\"bridge\" is now called \"open\")", s, NetworkModeNames())
	}
	return "", fmt.Errorf("network %q: must be %s", s, NetworkModeNames())
}

// Validate reports whether m is a valid mode.
func (m NetworkMode) Validate() error {
	_, err := ParseNetworkMode(string(m))
	return err
}

// AtMostAsOpenAs reports whether m gives the agent no more network than o
// does (modes are ordered in networkModes). An invalid mode is never.
func (m NetworkMode) AtMostAsOpenAs(o NetworkMode) bool {
	i, j := slices.Index(networkModes, m), slices.Index(networkModes, o)
	return i >= 0 && j >= 0 && i <= j
}
