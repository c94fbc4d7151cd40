package network

import (
	"fmt"
	"io"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Describe writes allowlist mode's proxy, networks and policy as start
// --dry-run shows them, each allow entry with where it came from.
func (eg *EgressPlan) Describe(w io.Writer) {
	fmt.Fprintf(w, "\negress proxy %s (%s)\n", eg.Proxy.Name, eg.ProxyURL)
	fmt.Fprintf(w, "  image     %s (git sandbox's own: this binary alone; entrypoint %s, no healthcheck)\n", eg.Proxy.Image, strings.Join(eg.Proxy.Entrypoint, " "))
	fmt.Fprintf(w, "  networks  %s (internal, the agent's), %s (the proxy's way out)\n", eg.InternalNetwork, eg.EgressNetwork)
	fmt.Fprintf(w, "  log       %s\n", eg.Log)
	for _, p := range eg.Forward {
		fmt.Fprintf(w, "  publish   %s (carried to the agent, %s)\n", p, AgentAlias)
	}
	fmt.Fprintf(w, "  allow\n")
	for _, r := range eg.Allow {
		fmt.Fprintf(w, "    %-32s %s\n", termsafe.String(r.Entry), r.Source)
	}
	for _, r := range eg.Remove {
		fmt.Fprintf(w, "    -%-31s %s\n", termsafe.String(r.Entry), r.Source)
	}
	for _, h := range eg.Inspect {
		fmt.Fprintf(w, "  inspect   %s (TLS terminated with the sandbox's CA: its rules apply to HTTPS)\n", termsafe.String(h))
	}
	container.DescribeMounts(w, eg.Proxy.Mounts)
}
