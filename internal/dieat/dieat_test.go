package dieat

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The process dies of SIGKILL at the point named, and passes any other.
func TestPointKillsAtTheNamedPointOnly(t *testing.T) {
	if p := os.Getenv("DIEAT_TEST_PASS"); p != "" {
		Point(p)
		os.Exit(0)
	}
	for _, c := range []struct {
		pass   string
		killed bool
	}{{"land: apply", true}, {"land: plan", false}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPointKillsAtTheNamedPointOnly$")
		cmd.Env = append(os.Environ(), Var+"=land: apply", "DIEAT_TEST_PASS="+c.pass)
		err := cmd.Run()
		var ee *exec.ExitError
		got := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if got != c.killed || (!c.killed && err != nil) {
			t.Errorf("at %q: %v, want killed %v", c.pass, err, c.killed)
		}
	}
}

// Without the variable, no point kills: the test process goes on.
func TestPointWithoutTheVariable(t *testing.T) {
	if os.Getenv(Var) != "" {
		t.Skip("the variable is set for this process")
	}
	Point("land: apply")
}
