package e2e

// Fault tests: what git sandbox guarantees when the machine misbehaves
// (RELIABILITY.md names each guarantee and the test here that shows it).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fsckClean fails the test unless git fsck --strict finds nothing wrong
// in the user's repository.
func (e *Env) fsckClean() {
	e.t.Helper()
	if r := e.Run(e.Repo, nil, "git", "fsck", "--strict", "--no-progress"); r.Code != 0 || strings.Contains(r.Stderr, "error") {
		e.t.Errorf("git fsck --strict: %s", r)
	}
}

// killed reports whether a git sandbox command was killed by SIGKILL
// (git, which runs it, exits with 128+9 then).
func killed(r Result) bool {
	return r.Code == 137 && strings.Contains(r.Stderr, "signal 9") || r.Code == -1
}

// inParallel runs do(0..n-1), each in a goroutine of its own, all released
// at once, and returns their results in order.
func inParallel(n int, do func(i int) Result) []Result {
	out := make([]Result, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			out[i] = do(i)
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// Twenty starts and then twenty lands of different sandboxes onto one
// base, each from a process of its own at the same time: every start
// succeeds, every land lands exactly once (a land whose base moved plans
// again and swaps under the branch's land lock instead of failing), the
// base ends with all twenty commits, the checkout follows it, and the
// repository is sound.
func TestManyAtOnceStartAndLand(t *testing.T) {
	e := NewEnv(t)
	const n = 20
	branch := func(i int) string { return fmt.Sprintf("many%02d", i) }
	began := time.Now()
	starts := inParallel(n, func(i int) Result {
		return e.Sandbox("start", branch(i), "--agent", "shell", "--", "sh", "-c", fmt.Sprintf("echo %d > file%02d.txt", i, i))
	})
	t.Logf("%d parallel starts took %s", n, time.Since(began).Round(time.Millisecond))
	for i, r := range starts {
		if r.Code != 0 {
			t.Errorf("start %s: %s", branch(i), r)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	tip := e.Git("rev-parse", "main")
	began = time.Now()
	lands := inParallel(n, func(i int) Result { return e.Sandbox("land", branch(i)) })
	t.Logf("%d parallel lands took %s", n, time.Since(began).Round(time.Millisecond))
	var commits []string
	for i, r := range lands {
		if r.Code != 0 {
			t.Errorf("land %s: %s", branch(i), r)
			continue
		}
		lines := strings.Fields(r.Stdout)
		commits = append(commits, lines[len(lines)-1])
	}
	// Exactly the twenty commits, one per sandbox, in one line on main.
	chain := strings.Fields(e.Git("rev-list", "--first-parent", "main", "^"+tip))
	if len(chain) != n {
		t.Errorf("main has %d new commits, want %d", len(chain), n)
	}
	slices.Sort(chain)
	slices.Sort(commits)
	if !slices.Equal(chain, commits) {
		t.Errorf("main's new commits %v are not the ones the lands printed %v", chain, commits)
	}
	trailers := strings.Fields(e.Git("log", "--format=%(trailers:key=Sandbox,valueonly)", "main", "^"+tip))
	slices.Sort(trailers)
	for i := range n {
		if c := strings.Count(" "+strings.Join(trailers, " ")+" ", " "+branch(i)+" "); c != 1 {
			t.Errorf("%s landed %d times", branch(i), c)
		}
		name := fmt.Sprintf("file%02d.txt", i)
		if got := e.Git("show", "main:"+name); got != fmt.Sprint(i) {
			t.Errorf("main:%s = %q", name, got)
		}
		if got := readFile(e.Repo + "/" + name); strings.TrimSpace(got) != fmt.Sprint(i) {
			t.Errorf("the checkout's %s = %q", name, got)
		}
	}
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("the checkout is not clean after the lands:\n%s", st)
	}
	if ps := e.Ps(); len(ps) != 0 {
		t.Errorf("%d sandbox(es) left after landing", len(ps))
	}
	e.fsckClean()
}

// landPoints are the points at which TestKilledLand kills land: after
// each of its steps, and inside the move of the base (the commit made, the
// move written down, the checkout updated, the branch moved).
var landPoints = []string{
	"land: checks", "land: update", "land: final snapshot", "land: refusals", "land: plan", "land: verify",
	"land: commit hooks", "land: commit", "land: journal", "land: checkout", "land: moved", "land: apply",
}

// kill -9 of land at each of its points (the test hook
// GIT_SANDBOX_TEST_DIE_AT): afterwards the repository is sound, main is
// either where it was or at the land's commit, the checkout is before or
// after once doctor has repaired what it reports, and the next land lands
// the work exactly once (or finishes the land that had moved main) with
// no manual cleanup.
func TestKilledLand(t *testing.T) {
	e := NewEnv(t)
	for i, point := range landPoints {
		b := fmt.Sprintf("killed%02d", i)
		file := b + ".txt"
		e.MustSandbox("start", b, "--agent", "shell", "--", "sh", "-c", "echo "+b+" > "+file)
		before := e.Git("rev-parse", "main")
		r := e.Run(e.Repo, []string{"GIT_SANDBOX_TEST_DIE_AT=" + point}, "git", "sandbox", "land", b)
		if !killed(r) {
			t.Fatalf("%s: land was not killed: %s", point, r)
		}
		e.fsckClean()
		after := e.Git("rev-parse", "main")
		moved := after != before
		if moved && (e.Git("rev-parse", "main^") != before || e.Git("show", "main:"+file) != b) {
			t.Errorf("%s: main is %s, neither %s nor the land's commit", point, after, before)
		}
		doctor := e.Sandbox("doctor")
		fixed := strings.Contains(doctor.Stdout, "fixed ")
		if point == "land: checkout" && !strings.Contains(doctor.Stdout, "put the checkout back") {
			t.Errorf("%s: doctor did not put the checkout back:\n%s", point, doctor.Stdout)
		}
		if fixed != (point == "land: checkout" || point == "land: journal" || point == "land: moved") {
			t.Errorf("%s: doctor's repairs:\n%s", point, doctor.Stdout)
		}
		if st := e.Git("status", "--porcelain"); st != "" {
			t.Errorf("%s: the checkout is half-applied:\n%s", point, st)
		}
		if got := readFile(e.Repo + "/" + file); (got != "<absent>") != moved {
			t.Errorf("%s: main moved %v, the checkout's %s is %q", point, moved, file, got)
		}
		if point == "land: apply" {
			// Killed after its last step: nothing is left to do.
			if e.hasSandbox(b) || !moved {
				t.Errorf("%s: the land had not finished", point)
			}
		} else if land := e.MustSandbox("land", b); moved && !strings.Contains(land.Stderr, "interrupted") {
			t.Errorf("%s: the land after did not say it finished an interrupted one:\n%s", point, land.Stderr)
		}
		if n := strings.Count(e.Git("log", "--format=%(trailers:key=Sandbox,valueonly)", "main"), b); n != 1 {
			t.Errorf("%s: %s landed %d times", point, b, n)
		}
		if e.hasSandbox(b) {
			t.Errorf("%s: the sandbox is still there after the land", point)
		}
	}
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("the checkout is not clean:\n%s", st)
	}
	e.fsckClean()
}

// startPoints are the steps of start after which TestKilledStart kills it.
var startPoints = []string{
	"start: state directory", "start: worktree", "start: baseline", "start: record", "start: private repository",
	"start: home", "start: network", "start: caches", "start: warm image", "start: container", "start: setup",
}

// leftovers lists what the engine holds for a sandbox: containers,
// networks and volumes with its labels.
func (e *Env) leftovers(branch string) []string {
	e.t.Helper()
	var out []string
	for _, kind := range [][]string{{"ps", "-a"}, {"network", "ls"}, {"volume", "ls"}} {
		args := append(kind, "-q", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.branch="+branch)
		b, _ := exec.Command("docker", args...).Output()
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}

// kill -9 of start after each of its steps: afterwards the repository is
// sound and its refs are the old ones or the sandbox's; what the killed
// start made is removed, with no manual cleanup, by git sandbox doctor
// (which says so) or by the next start of that branch, which then makes
// the sandbox whole; its work lands.
func TestKilledStart(t *testing.T) {
	e := NewEnv(t)
	main := e.Git("rev-parse", "main")
	for i, point := range startPoints {
		b := fmt.Sprintf("dead%02d", i)
		file := b + ".txt"
		start := []string{"start", b, "--agent", "shell", "--", "sh", "-c", "echo " + b + " > " + file}
		r := e.Run(e.Repo, []string{"GIT_SANDBOX_TEST_DIE_AT=" + point}, "git", append([]string{"sandbox"}, start...)...)
		if !killed(r) {
			t.Fatalf("%s: start was not killed: %s", point, r)
		}
		e.fsckClean()
		if got := e.Git("rev-parse", "main"); got != main {
			t.Errorf("%s: main moved to %s", point, got)
		}
		if r := e.Run(e.Repo, nil, "git", "rev-parse", "-q", "--verify", "refs/heads/"+b); r.Code == 0 && strings.TrimSpace(r.Stdout) != main {
			t.Errorf("%s: the branch %s is at %s, not at its start", point, b, r.Stdout)
		}
		if i%2 == 0 {
			doctor := e.Sandbox("doctor")
			if !strings.Contains(doctor.Stdout, "fixed a start of "+b+" was interrupted") {
				t.Errorf("%s: doctor did not repair the start:\n%s", point, doctor.Stdout)
			}
			if left := e.leftovers(b); len(left) > 0 {
				t.Errorf("%s: doctor left %v on the engine", point, left)
			}
			if e.hasSandbox(b) || e.Run(e.Repo, nil, "git", "rev-parse", "-q", "--verify", "refs/heads/"+b).Code == 0 {
				t.Errorf("%s: doctor left the sandbox or its branch", point)
			}
			e.MustSandbox(start...)
		} else if r := e.MustSandbox(start...); !strings.Contains(r.Stderr, "was interrupted; removing what it made") {
			t.Errorf("%s: the next start did not say it removed the killed one's leftovers:\n%s", point, r.Stderr)
		}
		e.MustSandbox("land", b)
		if got := e.Git("show", "main:"+file); got != b {
			t.Errorf("%s: main:%s = %q", point, file, got)
		}
		main = e.Git("rev-parse", "main")
		if left := e.leftovers(b); len(left) > 0 {
			t.Errorf("%s: %v left on the engine after the land", point, left)
		}
	}
	if wts := e.Git("worktree", "list", "--porcelain"); strings.Count(wts, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", wts)
	}
	e.fsckClean()
}

// sandboxDiag is what a test that waited in vain on branch shows: its
// ps row, its supervisor, its snapshots and the end of its supervisor's
// log.
func (e *Env) sandboxDiag(branch string) string {
	log, _ := os.ReadFile(filepath.Join(e.State, e.RepoID(), branch, "supervisor.log"))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	lines = lines[max(0, len(lines)-30):]
	return fmt.Sprintf("%s: ps %+v; supervisor pid %d; %d snapshots; the end of its supervisor log:\n%s",
		branch, e.PsOf(branch), e.supervisorOf(branch), len(e.Snapshots(branch)), strings.Join(lines, "\n"))
}

// supervisorOf returns the pid of the test's supervisor of branch (0 when
// none runs), found by its command line and HOME.
func (e *Env) supervisorOf(branch string) int {
	for pid, b := range supervisors(e.Home) {
		if b == branch {
			return pid
		}
	}
	return 0
}

// kill -9 of a running sandbox's supervisor: the agent runs on, with no
// snapshots; the next git sandbox start of it (which says the sandbox is
// running) starts a supervisor again, and the snapshots go on; nothing
// the agent wrote is lost.
func TestKilledSupervisor(t *testing.T) {
	e := NewEnv(t)
	e.MustSandbox("start", "-d", "sup", "--agent", "shell", "--", "sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > n.txt; sleep 1; done")
	Eventually(t, time.Minute, "the supervisor", func() bool { return e.supervisorOf("sup") != 0 })
	Eventually(t, time.Minute, "an interval snapshot", func() bool { return len(e.Snapshots("sup")) >= 2 })
	must(t, syscall.Kill(e.supervisorOf("sup"), syscall.SIGKILL))
	Eventually(t, 10*time.Second, "the supervisor to be gone", func() bool { return e.supervisorOf("sup") == 0 })
	time.Sleep(2 * time.Second) // a snapshot under way when it died is written or not
	before := len(e.Snapshots("sup"))
	time.Sleep(4 * time.Second)
	if n := len(e.Snapshots("sup")); n != before {
		t.Fatalf("%d snapshots were taken without a supervisor", n-before)
	}
	r := e.Sandbox("start", "sup")
	if r.Code == 0 || !strings.Contains(r.Stderr, "started it again") {
		t.Fatalf("start of the running sandbox without its supervisor: %s", r)
	}
	Eventually(t, 10*time.Second, "a new supervisor", func() bool { return e.supervisorOf("sup") != 0 })
	Eventually(t, time.Minute, "snapshots again", func() bool { return len(e.Snapshots("sup")) > before })
	e.MustSandbox("stop", "sup")
	n := strings.TrimSpace(readFile(filepath.Join(e.Worktree("sup"), "n.txt")))
	if e.snapshotWith("sup", "n.txt", n+"\n") == "" {
		t.Errorf("the agent's last state (n.txt = %s) is in no snapshot", n)
	}
	e.MustSandbox("rm", "--force", "sup")
}

// mountSmall mounts a tmpfs of size bytes at a new directory for the test
// and unmounts it at the end.
func mountSmall(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	must(t, os.MkdirAll(dir, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs (the test needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file into dir until its filesystem is full, and returns
// the function that frees the space again.
func fill(t *testing.T, dir string) func() {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	must(t, err)
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for _, n := range []int{64 << 10, 4 << 10, 512, 1} { // the last blocks too
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	f.Close()
	return func() { must(t, os.Remove(p)) }
}

// emptyFiles lists the zero-length files under the given directories,
// but for lock files, a log nothing was written to yet, and git's own
// temporary object files (tmp_obj_*, not objects: git gc removes them).
func emptyFiles(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.Type().IsRegular() {
				// Lock files and a log nothing was written to yet are empty.
				name := filepath.Base(p)
				lock := name == "lock" || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".wait") || strings.HasSuffix(name, ".record") || strings.HasPrefix(name, "tmp_obj_")
				if fi, err := de.Info(); err == nil && fi.Size() == 0 && !lock && !strings.HasSuffix(name, ".jsonl") {
					out = append(out, p)
				}
			}
			return nil
		})
	}
	return out
}

// A full disk under the repository and the state directory, and under
// the state directory alone: a snapshot that cannot be written fails with
// a clear message and leaves the snapshots and refs as they were, land
// refuses before moving anything, no zero-length object, pack or ref
// appears; once there is room again the next snapshot holds everything
// and the work lands.
func TestFullDisk(t *testing.T) {
	t.Run("repository and state directory", func(t *testing.T) {
		small := mountSmall(t, "64m")
		fullDisk(t, newEnvAt(t, small, nil), small)
	})
	t.Run("state directory", func(t *testing.T) {
		e := NewEnv(t)
		small := mountSmall(t, "32m")
		e.State = filepath.Join(small, "state")
		e.vars = append(e.vars, "GIT_SANDBOX_STATE_DIR="+e.State)
		fullDisk(t, e, small)
	})
}

// fullDisk runs TestFullDisk in e, whose disk at dir fills up.
func fullDisk(t *testing.T, e *Env, dir string) {
	e.MustSandbox("start", "full", "--agent", "shell", "--", "sh", "-c", "echo one > one.txt")
	// The supervisor takes the exit snapshot too; it ends after it.
	Eventually(t, time.Minute, "the supervisor to end", func() bool { return e.supervisorOf("full") == 0 })
	must(t, os.WriteFile(filepath.Join(e.Worktree("full"), "two.txt"), []byte("two\n"), 0o644))
	refs := e.Git("for-each-ref", "--format=%(refname) %(objectname)")
	main := e.Git("rev-parse", "main")
	free := fill(t, dir)
	r := e.Sandbox("rescue", "snapshot", "full")
	if r.Code == 0 || !strings.Contains(r.Stderr, "no space left") || !strings.Contains(r.Stderr, "make room") {
		t.Errorf("a snapshot on a full disk: %s", r)
	}
	if got := e.Git("for-each-ref", "--format=%(refname) %(objectname)"); got != refs {
		t.Errorf("the refs changed:\n%s\nwere:\n%s", got, refs)
	}
	t.Logf("a snapshot on a full disk: %s", r.Stderr)
	r = e.Sandbox("land", "full")
	if r.Code == 0 || !strings.Contains(r.Stderr, "no space left") || !strings.Contains(r.Stderr, "make room") {
		t.Errorf("land on a full disk: %s", r)
	}
	t.Logf("land on a full disk: %s", r.Stderr)
	if got := e.Git("rev-parse", "main"); got != main {
		t.Errorf("main moved to %s on a full disk", got)
	}
	if st := e.Git("--no-optional-locks", "status", "--porcelain"); st != "" {
		t.Errorf("the checkout changed on a full disk:\n%s", st)
	}
	gitDir := filepath.Join(e.Repo, ".git")
	if empty := emptyFiles(filepath.Join(gitDir, "objects"), filepath.Join(gitDir, "refs"), filepath.Join(e.State)); len(empty) > 0 {
		t.Errorf("zero-length files after the full disk: %v", empty)
	}
	e.fsckClean()
	free()
	e.MustSandbox("rescue", "snapshot", "full")
	if e.snapshotWith("full", "two.txt", "two\n") == "" || e.snapshotWith("full", "one.txt", "one\n") == "" {
		t.Error("the snapshot after the disk was freed does not hold all the work")
	}
	e.MustSandbox("land", "full")
	if e.Git("show", "main:two.txt") != "two" || e.Git("show", "main:one.txt") != "one" {
		t.Error("the work did not land")
	}
	e.fsckClean()
}
