// Package dieat is a test hook for the fault tests: a process started with
// GIT_SANDBOX_TEST_DIE_AT set to the name of a point it passes kills itself
// there with SIGKILL, exactly as kill -9 would, so a test can stop a flow
// at each of its steps and check what is left. The points are the steps of
// start, resume and land ("start: worktree", "land: apply"; see
// internal/steps) and the moments inside land's move of the base ("land:
// journal", "land: checkout", "land: moved"). Unset, as it always is
// outside the tests, the hook does nothing.
package dieat

import (
	"os"
	"sync"
	"syscall"
)

// Var is the environment variable that names the point to die at.
const Var = "GIT_SANDBOX_TEST_DIE_AT"

var at = sync.OnceValue(func() string { return os.Getenv(Var) })

// Point kills the process when Var names this point.
func Point(name string) {
	if want := at(); want != "" && want == name {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
