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
	fmt.Fprintf(app.Stdout, "git sandbox %s (%s, %s/%s)\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
