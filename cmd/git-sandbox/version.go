package main

import (
	"fmt"
	"runtime"

	"github.com/git-sandbox/git-sandbox/internal/version"
)

// VersionCmd is git sandbox version.
type VersionCmd struct{}

// Run prints the version.
func (c *VersionCmd) Run(app *App) error {
	fmt.Fprintln(app.Stdout, versionLine())
	return nil
}

// versionLine is what version and --version print.
func versionLine() string {
	return fmt.Sprintf("git sandbox %s (%s, %s/%s)", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
