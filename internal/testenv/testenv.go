// Package testenv is the environment unit tests that run git start in:
// away from the user's and the system's git configuration and git
// sandbox's state. The tool's own git processes drop every GIT_*
// variable, so the identity and defaults live where git looks without
// them: a $HOME of the tests' own.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// gitConfig is the tests' global git configuration.
const gitConfig = "[user]\n\tname = Test User\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n"

// dropped are the variables of the caller's environment the tests must
// not see.
var dropped = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
	"GIT_SANDBOX_TRACE", "GIT_SANDBOX_CONFIG", "GIT_SANDBOX_STATE_DIR", "XDG_STATE_HOME",
}

// Main runs m's tests in the environment and exits with their status.
func Main(m *testing.M, name string) { os.Exit(Run(m, name, nil)) }

// Run runs m's tests in a temporary root whose home holds the tests' git
// configuration, after prepare (when given) made what else the tests
// need in that root, and removes the root; it returns the tests' status.
func Run(m *testing.M, name string, prepare func(root string) error) int {
	root, err := os.MkdirTemp("", name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(root)
	home := filepath.Join(root, "home")
	global := filepath.Join(home, ".gitconfig")
	err = os.MkdirAll(home, 0o755)
	if err == nil {
		err = os.WriteFile(global, []byte(gitConfig), 0o644)
	}
	if err == nil && prepare != nil {
		err = prepare(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	os.Setenv("GIT_CONFIG_GLOBAL", global)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range dropped {
		os.Unsetenv(k)
	}
	return m.Run()
}
