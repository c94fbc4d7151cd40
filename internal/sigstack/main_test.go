package sigstack

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// childIgnoring is set in the child TestIgnoredAtStartStaysIgnored starts.
const childIgnoring = "SIGSTACK_TEST_IGNORING_CHILD"

// TestMain: the tests raise SIGHUP, which a run started under nohup
// ignores, and a stack keeps what the process was started ignoring
// ignored. The test process itself takes SIGHUP back (a channel of its
// own keeps the handler in place for the whole run); how a stack treats
// an ignored signal is shown in a child started ignoring it.
func TestMain(m *testing.M) {
	if os.Getenv(childIgnoring) == "" && signal.Ignored(syscall.SIGHUP) {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	os.Exit(m.Run())
}

// A process started ignoring SIGHUP (nohup) goes on ignoring it: a
// handler pushed for it is not called, and the process is not ended.
func TestIgnoredAtStartStaysIgnored(t *testing.T) {
	if os.Getenv(childIgnoring) != "" {
		if !signal.Ignored(syscall.SIGHUP) {
			t.Fatal("the child was not started ignoring SIGHUP")
		}
		got := make(chan os.Signal, 1)
		pop := New().Push(func(sig os.Signal) { got <- sig }, syscall.SIGHUP)
		defer pop()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case sig := <-got:
			t.Fatalf("a handler got %v, which the process was started ignoring", sig)
		case <-time.After(300 * time.Millisecond):
		}
		return
	}
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup here to start a child ignoring SIGHUP")
	}
	cmd := exec.Command(nohup, os.Args[0], "-test.run=^TestIgnoredAtStartStaysIgnored$", "-test.v")
	cmd.Env = append(os.Environ(), childIgnoring+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child started ignoring SIGHUP: %v\n%s", err, out)
	}
}
