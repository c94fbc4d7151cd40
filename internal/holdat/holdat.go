// Package holdat is a test hook for the fault tests, beside dieat: a
// process started with GIT_SANDBOX_TEST_HOLD_AT set to the name of a point
// it passes stops there until the test lets it go, so a test can make a
// fault happen at that moment and no other — deterministically, not by
// luck. GIT_SANDBOX_TEST_HOLD_DIR names a directory the test made: at the
// point the process writes its pid into the file "arrived" there, then
// waits until a file "release" appears beside it, and goes on.
//
// The points are the moments inside a snapshot a fault test aims at:
// "snapshot: paused" (the agent's container has just been paused, before
// its files are read). Unset, as it always is outside the tests, the hook
// does nothing.
package holdat

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Var names the point to hold at; DirVar the directory of its files.
const (
	Var    = "GIT_SANDBOX_TEST_HOLD_AT"
	DirVar = "GIT_SANDBOX_TEST_HOLD_DIR"
)

// The files in DirVar's directory: written by the process when it
// arrives, and by the test to let it go.
const (
	Arrived = "arrived"
	Release = "release"
)

var at = sync.OnceValues(func() (string, string) { return os.Getenv(Var), os.Getenv(DirVar) })

// poll is how often a held process looks for the release file.
const poll = 20 * time.Millisecond

// Point holds the process when Var names this point, until the test
// releases it. A directory it cannot write into holds nothing.
func Point(name string) {
	want, dir := at()
	if want == "" || want != name || dir == "" {
		return
	}
	tmp := filepath.Join(dir, Arrived+".tmp")
	if os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600) != nil || os.Rename(tmp, filepath.Join(dir, Arrived)) != nil {
		return
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, Release)); err == nil {
			return
		}
		time.Sleep(poll)
	}
}
