// Command pause is the pod sandbox process of the test cluster: it holds a
// pod's namespaces open and does nothing else. It sleeps until SIGINT or
// SIGTERM, and reaps any child it inherits as PID 1. No registry is
// reachable, so the test cluster builds its pause image from this.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
