package container

import (
	"fmt"
	"io"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Describe writes the container s asks for, as start --dry-run shows it:
// image, command, user, network, limits, hardening, mounts (each with why
// it is there), environment and labels. What an agent or a repository
// chose is escaped.
func (s *Spec) Describe(w io.Writer) {
	fmt.Fprintf(w, "\ncontainer %s\n", s.Name)
	fmt.Fprintf(w, "  image    %s\n", termsafe.String(s.Image))
	fmt.Fprintf(w, "  argv     %s\n", termsafe.String(fmt.Sprintf("%q", s.Argv)))
	fmt.Fprintf(w, "  user     %s\n", s.User)
	fmt.Fprintf(w, "  network  %s\n", s.Network)
	if s.NetworkName != "" {
		fmt.Fprintf(w, "  joins    %s\n", s.NetworkName)
	}
	if s.Runtime != "" {
		fmt.Fprintf(w, "  runtime  %s\n", s.Runtime)
	}
	fmt.Fprintf(w, "  limits   memory=%d bytes cpus=%g pids=%d\n", s.Limits.MemoryBytes, s.Limits.CPUs, s.Limits.Pids)
	fmt.Fprintf(w, "  hardening cap-drop=%v security-opt=%v init=%v\n", s.CapDrop, s.Security, s.Init)
	fmt.Fprintf(w, "  tty      %v (stdin %v)\n", s.TTY, s.OpenStdin)
	for _, p := range s.Ports {
		fmt.Fprintf(w, "  publish  %s\n", p)
	}
	DescribeMounts(w, s.Mounts)
	fmt.Fprintf(w, "  env\n")
	for _, e := range s.Env {
		fmt.Fprintf(w, "    %s\n", termsafe.String(e))
	}
	fmt.Fprintf(w, "  labels\n")
	for _, k := range SortedLabels(s.Labels) {
		fmt.Fprintf(w, "    %s=%s\n", k, termsafe.String(s.Labels[k]))
	}
}

// DescribeMounts writes mounts, each with why it is there.
func DescribeMounts(w io.Writer, mounts []Mount) {
	fmt.Fprintf(w, "  mounts\n")
	for _, m := range mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(w, "    %s %s -> %s  (%s)\n", mode, m.Source, m.Target, m.Why)
	}
}
