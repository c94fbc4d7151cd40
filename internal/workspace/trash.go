package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/internal/proc"
)

// PurgeCommand is the hidden command that deletes a repository's trash.
const PurgeCommand = "__purge"

// EmptyTrash deletes what removed sandboxes left in the trash, with purge
// (nil: a detached process of this binary), so the command that removed
// them returns at once; a crash before it ran is finished by the next rm,
// land or ps. When no process can be started it deletes them itself,
// after warn.
func EmptyTrash(trash string, purge func(string) error, warn func(string, ...any)) {
	entries, err := os.ReadDir(trash)
	if err != nil || len(entries) == 0 {
		return
	}
	if purge != nil {
		_ = purge(trash)
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = proc.SpawnDetached(proc.SpawnOptions{
			Path: exe, Args: []string{"git-sandbox", PurgeCommand, "--", trash}, Dir: "/", Env: os.Environ(),
		})
	}
	if err != nil {
		warn("cannot delete %s in the background (%v); deleting it now", trash, err)
		_ = Purge(trash)
	}
}

// Purge deletes a trash directory's entries.
func Purge(trash string) error {
	if filepath.Base(trash) != ".trash" {
		return fmt.Errorf("purge: %s is not a trash directory", trash)
	}
	entries, err := os.ReadDir(trash)
	if err != nil {
		return err
	}
	var errs []error
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(trash, en.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
