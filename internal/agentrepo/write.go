package agentrepo

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
)

// WriteRef points a ref of the agent's repository at a commit the user's
// object store holds (the agent's repository reaches it through its
// alternates). The ref is written as a loose ref, which git prefers to a
// packed one, by plain file writes confined beneath gitDir: no git process
// opens the agent's repository. Only call it while the agent is not
// running.
func WriteRef(gitDir, ref, id string) error {
	if ref != "HEAD" && !validRef(ref) {
		return fmt.Errorf("write agent ref %q: not a valid ref name", ref)
	}
	if !hexID.MatchString(id) {
		return fmt.Errorf("write agent ref %s: %q is not a commit id", ref, id)
	}
	return WriteFile(gitDir, ref, []byte(id+"\n"))
}

// WriteFile replaces a file of the agent's repository (its index, a ref,
// MERGE_HEAD) atomically: written beside it under a fresh name, then
// renamed over it, confined beneath gitDir so a symlink the agent planted
// is replaced, never followed out of it.
func WriteFile(gitDir, name string, content []byte) error {
	name = path.Clean(name)
	if path.IsAbs(name) || name == "." || name == ".." || len(name) > 3 && name[:3] == "../" {
		return fmt.Errorf("write agent file %q: outside the repository", name)
	}
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return fmt.Errorf("open agent repository: %w", err)
	}
	defer root.Close()
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write agent %s: %w", name, err)
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := name + ".sandbox-" + hex.EncodeToString(rnd[:])
	if err := root.WriteFile(tmp, content, 0o644); err != nil {
		return fmt.Errorf("write agent %s: %w", name, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write agent %s: %w", name, err)
	}
	return nil
}

// RemoveFile removes a file of the agent's repository (MERGE_HEAD after the
// merge it named was resolved), confined beneath gitDir; a missing one is
// not an error.
func RemoveFile(gitDir, name string) error {
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return fmt.Errorf("open agent repository: %w", err)
	}
	defer root.Close()
	if err := root.Remove(path.Clean(name)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove agent %s: %w", name, err)
	}
	return nil
}
