package egress

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// QuietMonitor puts the process's second thread, the runtime's monitor,
// in SCHED_BATCH, and no other thread.
func TestQuietMonitorBatchesTheMonitorAlone(t *testing.T) {
	tid, ok := monitorThread()
	if !ok {
		t.Fatal("no second thread")
	}
	if tid == os.Getpid() {
		t.Fatalf("the monitor thread is the main thread %d", tid)
	}
	before, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetAttr(tid, before, 0)
	QuietMonitor()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		id, _ := strconv.Atoi(e.Name())
		a, err := unix.SchedGetAttr(id, 0)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		if got, want := a.Policy == unix.SCHED_BATCH, id == tid; got != want {
			t.Errorf("thread %d (monitor %v): policy %d", id, want, a.Policy)
		}
	}
}
