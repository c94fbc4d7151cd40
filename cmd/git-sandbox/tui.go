package main

// Output rules, for every command, are those of package ui: results go to
// stdout, and every message, warning, error and hint goes through the
// App's printer (app.UI), which writes them to stderr.

import (
	"io"
	"os"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && ui.IsTerminal(f)
}

// The shared helpers of package cliapp, by their names here.
var (
	table           = cliapp.Table
	selfProxyBinary = cliapp.SelfProxyBinary
)
