package holdat

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The process holds at the point named, says so, and goes on once
// released; it passes any other point at once.
func TestPointHoldsAtTheNamedPointUntilReleased(t *testing.T) {
	if p := os.Getenv("HOLDAT_TEST_PASS"); p != "" {
		Point(p)
		os.Exit(0)
	}
	dir := t.TempDir()
	run := func(pass string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPointHoldsAtTheNamedPointUntilReleased$")
		cmd.Env = append(os.Environ(), Var+"=snapshot: paused", DirVar+"="+dir, "HOLDAT_TEST_PASS="+pass)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	// Another point: no hold, no file.
	if err := run("land: apply").Wait(); err != nil {
		t.Fatalf("at another point: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, Arrived)); err == nil {
		t.Fatal("a process passing another point said it arrived")
	}
	cmd := run("snapshot: paused")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(filepath.Join(dir, Arrived))
		if err == nil {
			if got := strings.TrimSpace(string(b)); got != fmt.Sprint(cmd.Process.Pid) {
				t.Errorf("arrived says %q, want the pid %d", got, cmd.Process.Pid)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process never said it arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the process went on before it was released: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(dir, Release), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("released: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the process still holds a minute after it was released")
	}
}

// Without the variable, no point holds: the test process goes on.
func TestPointWithoutTheVariable(t *testing.T) {
	if os.Getenv(Var) != "" {
		t.Skip("the variable is set for this process")
	}
	Point("snapshot: paused")
}
