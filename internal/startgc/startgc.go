// Package startgc keeps the garbage collector out of a process's start.
//
// The packages git sandbox links (the Kubernetes client's type registry
// above all) allocate a few megabytes as they initialise, all of it live,
// and the collector ran over that heap twice in the first milliseconds of
// every command: about a seventh of a short command such as ps, which is
// mostly start. This package, which allocates nothing, is initialised
// before those and turns the collector off, with a memory limit as the
// bound meanwhile; main turns it back on as GOGC and GOMEMLIMIT say
// (ResumeAfter) once the start is over, so that a command that ends
// quickly never collects and one that runs on collects as usual.
package startgc

import (
	"runtime/debug"
	"time"
)

// startLimit bounds the heap while the collector is off: past it, the
// runtime collects anyway.
const startLimit = 128 << 20

// Grace is how long a process runs before the collector is back.
const Grace = 200 * time.Millisecond

var (
	// percent and limit are GOGC and GOMEMLIMIT as the runtime read them.
	percent = debug.SetGCPercent(-1)
	limit   = debug.SetMemoryLimit(min(startLimit, debug.SetMemoryLimit(-1)))
)

// Resume turns the collector back on as GOGC and GOMEMLIMIT set it.
func Resume() {
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(percent)
}

// ResumeAfter calls Resume once the process has run for d.
func ResumeAfter(d time.Duration) { time.AfterFunc(d, Resume) }
