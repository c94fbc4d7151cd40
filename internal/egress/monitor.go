package egress

import (
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// QuietMonitor makes the runtime's monitor thread (sysmon) of this
// process one that never preempts on waking, at no cost to its share of
// the CPU: SCHED_BATCH. It is for the proxy, whose every new tunnel woke
// the monitor (the first system call after a wait does, on a quiet
// proxy), and the kernel then ran the monitor at once in place of the
// proxy's thread, on the path of the request that woke it: about 10 us a
// new tunnel, measured against squid. As a batch thread the monitor runs
// when a core is free or at the next tick, and still retakes, preempts and
// polls as before.
//
// The monitor is the process's second thread: the runtime starts it
// before any goroutine runs, and a thread's ID in a new PID namespace (a
// container's) is never one reused. Where that does not hold the policy
// goes to another of the runtime's threads, which loses the same
// preemption and nothing else. It does what it can: a runtime that
// refuses (gVisor may) leaves the monitor as it was.
func QuietMonitor() {
	tid, ok := monitorThread()
	if !ok {
		return
	}
	_ = unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_BATCH}, 0)
}

// monitorThread is the ID of the process's second thread.
func monitorThread() (int, bool) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) < 2 {
		return 0, false
	}
	slices.Sort(tids)
	return tids[1], true
}
