package main

import "github.com/git-sandbox/git-sandbox/internal/workspace"

// PurgeCmd deletes what removed sandboxes left (spawned by rm and land).
type PurgeCmd struct {
	Trash string `arg:""`
}

// Run deletes the trash directory's entries.
func (c *PurgeCmd) Run(app *App) error { return workspace.Purge(c.Trash) }
