// Package version holds the build's version, set by the Makefile through
// -ldflags "-X github.com/git-sandbox/git-sandbox/internal/version.Version=…".
package version

import "runtime/debug"

// Version is the release or the VCS revision of this build.
var Version = "dev"

// String returns the version, falling back to the VCS revision embedded by
// the Go toolchain when the Makefile did not set one.
func String() string {
	if Version != "dev" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return Version
}
