package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/git-sandbox/git-sandbox/internal/holdat"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// The Docker engine of five running sandboxes restarts (a private second
// engine the test owns, its dockerd stopped with SIGTERM as a service
// manager does and started again; copy mode): two attached (each start
// streaming the agent), three detached, and one of the detached caught in
// the middle of a snapshot — its agent paused, its files not yet read —
// by the hold test hook (internal/holdat), so the restart lands there
// every time. Afterwards ps shows each exited, nothing paused; the newest
// snapshot of each is at most a few seconds (the interval) of work behind
// what the agent wrote; the snapshot caught midway ended with a clear
// error or a snapshot, left the refs at their old or a new value and the
// repository clean; no process holds a lock of any sandbox; start resumes
// each with a supervisor of its own and the snapshots go on; rm leaves no
// container, volume, network or supervisor behind.
func TestEngineRestart(t *testing.T) {
	t.Setenv("ENGINE2_DATA_TMPFS", "no") // the data-root must outlive dockerd
	eng := newEngine2(t, baseImage)
	e := NewEnv(t)
	copyEngineConfig(e, eng.Host)
	detached, attachedNames, mid := []string{"up1", "up2", "mid"}, []string{"att1", "att2"}, "mid"
	names := append(append([]string{}, detached...), attachedNames...)
	loop := []string{"--engine", "two", "--agent", "shell", "--network", "none"}
	// The counter is written whole (a new file renamed over it): the engine
	// stopping an agent between the truncation and the write of an echo
	// would leave it empty.
	agent := []string{"--", "sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > n.new; mv n.new n.txt; sleep 1; done"}
	for _, n := range detached {
		e.MustSandbox(append(append([]string{"start", n, "-d"}, loop...), agent...)...)
	}
	// The attached: each start streams its agent until the engine goes.
	attached := make(chan Result, len(attachedNames))
	for _, n := range attachedNames {
		go func() { attached <- e.Sandbox(append(append([]string{"start", n}, loop...), agent...)...) }()
	}
	supervisors := map[string]int{}
	for _, n := range names {
		Eventually(t, 2*time.Minute, n+"'s interval snapshots", func() bool { return len(e.Snapshots(n)) >= 3 })
		supervisors[n] = e.supervisorOf(n)
	}
	snapped, release := holdSnapshot(t, e, mid)
	began := time.Now()
	if err := runEngine2(nil, "restart", eng.Dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("the engine restarted in %s", time.Since(began).Round(time.Millisecond))
	release()
	for range attachedNames {
		select {
		case r := <-attached:
			t.Logf("an attached start ended with exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
		case <-time.After(time.Minute):
			t.Fatal("an attached start still runs a minute after the engine restarted")
		}
	}
	midSnapshotEnded(t, e, mid, <-snapped)
	counts := map[string]int{}
	for _, n := range names {
		counts[n] = e.restartedWithItsWork(t, eng.Host, n)
	}
	for _, n := range names {
		// The old supervisor takes the exit snapshot (or fails to) and
		// ends: none is left waiting for an engine that forgot its run.
		EventuallyOr(t, 2*time.Minute, n+"'s supervisor to end", func() bool { return e.supervisorOf(n) == 0 }, func() string { return e.sandboxDiag(n) })
		t.Logf("%s: its supervisor (%d) ended", n, supervisors[n])
		e.noLockHeld(t, n)
	}
	// The sandbox caught midway takes a snapshot again, with no cleanup.
	r := e.MustSandbox("rescue", "snapshot", mid)
	t.Logf("%s: a snapshot after the restart: %s", mid, strings.TrimSpace(r.Stderr))
	for _, n := range names {
		// The shell agent's task once more (an agent CLI would go on with
		// its conversation), detached.
		e.MustSandbox("start", n, "--rerun", "-d")
	}
	for _, n := range names {
		e.snapshotsAfter(t, n, counts[n]+1)
		// ps says paused while a snapshot reads the agent's files.
		Eventually(t, 30*time.Second, n+" running after start", func() bool { return e.PsOf(n).State == "running" })
		pid := e.supervisorOf(n)
		if pid == 0 || pid == supervisors[n] {
			t.Errorf("%s: supervisor %d after start (%d before the restart), want a new one", n, pid, supervisors[n])
		}
		t.Logf("%s: running again, with supervisor %d and new snapshots", n, pid)
	}
	for _, n := range names {
		e.MustSandbox("rm", "--force", n)
	}
	if left := containersOn(t, eng.Host, e.RepoID()); len(left) > 0 {
		t.Errorf("containers left: %v", left)
	}
	for _, kind := range []string{"volume", "network"} {
		if left := strings.Fields(dockerAt(t, eng.Host, kind, "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID())); len(left) > 0 {
			t.Errorf("%ss left: %v", kind, left)
		}
	}
	for _, n := range names {
		if pid := e.supervisorOf(n); pid != 0 {
			t.Errorf("%s: a supervisor (%d) still runs after rm", n, pid)
		}
	}
	e.fsckClean()
}

// midSnapshot is a snapshot command caught midway, and the refs of its
// sandbox when it began.
type midSnapshot struct {
	Result
	rescue string // the sandbox's newest snapshot then
}

// holdSnapshot runs git sandbox rescue snapshot of branch held at the
// moment its agent is paused (holdat's "snapshot: paused"), and returns
// once it is there, with what the command will end with and the function
// that lets it go on.
func holdSnapshot(t *testing.T, e *Env, branch string) (<-chan midSnapshot, func()) {
	t.Helper()
	dir := t.TempDir()
	if e.Cred != nil {
		must(t, os.Chown(dir, int(e.Cred.uid), int(e.Cred.gid)))
	}
	before := e.Git("rev-parse", "refs/sandbox/"+branch+"/rescue")
	done := make(chan midSnapshot, 1)
	go func() {
		r := e.Run(e.Repo, []string{holdat.Var + "=snapshot: paused", holdat.DirVar + "=" + dir}, "git", "sandbox", "rescue", "snapshot", branch)
		done <- midSnapshot{Result: r, rescue: before}
	}()
	EventuallyOr(t, 2*time.Minute, "the snapshot of "+branch+" held with its agent paused", func() bool {
		_, err := os.Stat(filepath.Join(dir, holdat.Arrived))
		return err == nil
	}, func() string { return e.sandboxDiag(branch) })
	if st := e.PsOf(branch).State; st != "paused" {
		t.Errorf("%s: ps says %s while its snapshot is held, want paused", branch, st)
	}
	released := false
	release := func() {
		if !released {
			released = true
			must(t, os.WriteFile(filepath.Join(dir, holdat.Release), nil, 0o644))
		}
	}
	t.Cleanup(release)
	return done, release
}

// midSnapshotEnded checks how the snapshot caught by the restart ended: a
// snapshot, or an error a user can read (no crash), the refs at their old
// value or a snapshot after it, and the repository clean.
func midSnapshotEnded(t *testing.T, e *Env, branch string, m midSnapshot) {
	t.Helper()
	if m.Code == 0 {
		t.Logf("%s: the snapshot caught by the restart succeeded: %s %s", branch, strings.TrimSpace(m.Stdout), strings.TrimSpace(m.Stderr))
	} else {
		t.Logf("%s: the snapshot caught by the restart failed (exit %d): %s", branch, m.Code, strings.TrimSpace(m.Stderr))
		_, msg, ok := strings.Cut(m.Stderr, "git sandbox: error: ")
		if msg, _, _ = strings.Cut(msg, "\n"); !ok || strings.HasSuffix(strings.TrimSpace(msg), ":") {
			t.Errorf("%s: the failed snapshot says no error, or half of one: %s", branch, m)
		}
	}
	if strings.Contains(m.Stderr, "panic") || strings.Contains(m.Stderr, "goroutine ") || m.Code != 0 && m.Code != 1 {
		t.Errorf("%s: the snapshot caught by the restart crashed: %s", branch, m)
	}
	if i := strings.IndexFunc(m.Stderr, func(r rune) bool {
		return r == unicode.ReplacementChar || !unicode.IsPrint(r) && r != '\n' && r != '\t'
	}); i >= 0 {
		t.Errorf("%s: the snapshot's message is garbled at byte %d: %q", branch, i, m.Stderr)
	}
	now := e.Git("rev-parse", "refs/sandbox/"+branch+"/rescue")
	if r := e.Run(e.Repo, nil, "git", "merge-base", "--is-ancestor", m.rescue, now); now != m.rescue && r.Code != 0 {
		t.Errorf("%s: the newest snapshot is %s, which does not follow %s (before the restart)", branch, now, m.rescue)
	}
	e.fsckClean()
}

// restartedWithItsWork checks a sandbox after the engine restarted: ps
// shows it exited (not paused), the engine does not hold its container
// paused, and its newest snapshot is at most a few seconds of work behind
// what the agent wrote; it returns its number of snapshots.
func (e *Env) restartedWithItsWork(t *testing.T, host, n string) int {
	t.Helper()
	Eventually(t, time.Minute, n+" not running in ps", func() bool { s := e.PsOf(n).State; return s != "running" && s != "paused" })
	if paused := dockerAt(t, host, "inspect", "--format", "{{.State.Paused}}", e.PsOf(n).Container); paused != "false" {
		t.Errorf("%s: the engine holds its container paused (%s)", n, paused)
	}
	wrote, err := strconv.Atoi(strings.TrimSpace(e.MustSandbox("exec", n, "--", "cat", "n.txt").Stdout))
	if err != nil {
		t.Fatalf("%s: %v", n, err)
	}
	snapped, err := strconv.Atoi(e.Git("show", "refs/sandbox/"+n+"/rescue:n.txt"))
	if err != nil {
		t.Fatalf("%s: %v", n, err)
	}
	t.Logf("%s: ps %s; the agent wrote %d, the newest snapshot holds %d", n, e.PsOf(n).State, wrote, snapped)
	if wrote-snapped > 5 {
		t.Errorf("%s: the newest snapshot holds %d, the agent had written %d", n, snapped, wrote)
	}
	return len(e.Snapshots(n))
}

// noLockHeld fails the test when a process holds a lock of the sandbox's
// (its snapshot, record, supervisor and verify locks, the waiters of
// each): each is a flock on a file of its state directory, taken and let
// go here at once.
func (e *Env) noLockHeld(t *testing.T, branch string) {
	t.Helper()
	dir := worktree.Layout{Root: e.State, RepoID: e.RepoID()}.Dir(branch)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held, seen []string
	for _, ent := range ents {
		name := ent.Name()
		if !ent.Type().IsRegular() || !(name == "lock" || strings.HasPrefix(name, "lock.") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".lock.wait")) {
			continue
		}
		seen = append(seen, name)
		if err := tryFlock(filepath.Join(dir, name)); err != nil {
			held = append(held, fmt.Sprintf("%s (%v)", name, err))
		}
	}
	if len(held) > 0 {
		t.Errorf("%s: locks held after the restart: %v\n%s", branch, held, e.sandboxDiag(branch))
	}
	if len(seen) == 0 {
		t.Errorf("%s: no lock file in %s", branch, dir)
	}
	t.Logf("%s: no process holds %s", branch, strings.Join(seen, ", "))
}

// tryFlock takes an exclusive flock on path without waiting, and lets it
// go.
func tryFlock(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return err
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
