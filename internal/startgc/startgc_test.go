package startgc

import (
	"runtime/debug"
	"testing"
)

// The collector is off from this package's initialisation until Resume,
// which puts back what GOGC and GOMEMLIMIT said.
func TestResumePutsTheCollectorBack(t *testing.T) {
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("the collector was on before Resume (GOGC %d)", p)
	}
	if l := debug.SetMemoryLimit(-1); l > startLimit {
		t.Errorf("no memory limit bounds the heap while the collector is off: %d", l)
	}
	Resume()
	if p := debug.SetGCPercent(percent); p != percent {
		t.Errorf("after Resume GOGC = %d, want %d", p, percent)
	}
	if l := debug.SetMemoryLimit(-1); l != limit {
		t.Errorf("after Resume GOMEMLIMIT = %d, want %d", l, limit)
	}
}
