package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Speed targets are ratios against the raw git and Docker commands doing
// the same work, measured in the same run (make bench). They are reported,
// never asserted: a loaded machine must not fail a build.

// benchRounds is how many paired rounds a benchmark runs; it reports the
// medians.
const benchRounds = 5

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func timeIt(t testing.TB, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	return time.Since(start)
}

func report(b *testing.B, what string, ours, raw time.Duration, target float64) {
	ratio := float64(ours) / float64(raw)
	verdict := "within"
	if ratio > target {
		verdict = "OVER"
	}
	fmt.Printf("bench: %-32s ours %8.1f ms  raw %8.1f ms  ratio %.2fx  (target <= %.2fx: %s)\n",
		what, ms(ours), ms(raw), ratio, target, verdict)
	b.ReportMetric(ratio, "x-vs-raw")
	b.ReportMetric(ms(ours), "ms-ours")
	b.ReportMetric(ms(raw), "ms-raw")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runOK(t testing.TB, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// BenchmarkStartOverhead: `git sandbox start -d --agent shell --network
// none -- true` in a repository of 5,000 files until the container runs,
// against `git worktree add` plus `docker run -d --network none` of the
// same image with the same mounts and hardening. (Allowlist mode, the
// default, adds networks and a proxy: BenchmarkStartAllowlist compares it
// with the same made by hand.)
func BenchmarkStartOverhead(b *testing.B) {
	e := NewEnv(b)
	bigRepo(b, e, 5000)
	ours, raw := startRounds(b, e, benchRounds)
	report(b, "start -d network none, 5k files", median(ours), median(raw), 1.5)
}

// startRounds measures, in rounds, start -d --network none against the
// same by hand.
func startRounds(b testing.TB, e *Env, rounds int) (ours, raw []time.Duration) {
	hostGit := filepath.Join(e.Repo, ".git")
	for i := 0; i < rounds; i++ {
		branch := "bench-" + strconv.Itoa(i)
		ours = append(ours, timeIt(b, func() {
			e.MustSandbox("start", "-d", branch, "--agent", "shell", "--network", "none", "--", "true")
		}))

		// The same by hand.
		dir := filepath.Join(e.Root, "raw", strconv.Itoa(i))
		wt := filepath.Join(dir, "worktree")
		priv := filepath.Join(dir, "git")
		home := filepath.Join(dir, "home")
		gitfile := filepath.Join(dir, "gitfile")
		must(b, os.MkdirAll(priv, 0o755))
		must(b, os.MkdirAll(home, 0o755))
		must(b, os.WriteFile(gitfile, []byte("gitdir: "+priv+"\n"), 0o644))
		name := fmt.Sprintf("git-sandbox-bench-raw-%s-%d", e.RepoID(), i)
		raw = append(raw, timeIt(b, func() {
			runOK(b, e.Repo, nil, "git", "worktree", "add", "-q", "-b", "raw-"+strconv.Itoa(i), wt)
			runOK(b, e.Repo, nil, "docker", "run", "-d", "--name", name,
				"--label", "git-sandbox.repo="+e.RepoID(),
				"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
				"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "256",
				"--memory", "1g", "--init", "-w", "/workspace", "--network", "none",
				"-v", wt+":/workspace", "-v", gitfile+":/workspace/.git:ro",
				"-v", priv+":"+priv, "-v", filepath.Join(hostGit, "objects")+":"+filepath.Join(hostGit, "objects")+":ro",
				"-v", filepath.Join(hostGit, "hooks")+":"+filepath.Join(hostGit, "hooks")+":ro",
				"-v", home+":/home/sandbox",
				testImage, "true")
		}))
	}
	return ours, raw
}

// BenchmarkStartLarge: start -d in allowlist mode in a repository of
// tldr-pages/tldr's shape (38,000 files, 23,000 commits, generated: no
// network), against the same by hand; and a first start in the repository
// (the visible store packed from nothing: it is removed before each)
// against a later one. Every agent sleeps, so no exit snapshot runs
// beside the next round.
func BenchmarkStartLarge(b *testing.B) {
	e := NewEnv(b)
	historyRepo(b, e, tldrShape)
	e.WriteConfig("allow = [\"api.allowed.test\"]\negress_network = %q\nbase_image = %q\n[rescue]\ninterval = \"1h\"\n[limits]\nmemory = \"1g\"\npids = 256\n",
		e.egressNetwork(), baseImage)
	byHand := newAllowlistByHand(b, e)
	visible := filepath.Join(e.State, e.RepoID(), ".visible")
	var first, later, raw []time.Duration
	for i := 0; i < benchRounds; i++ {
		must(b, os.RemoveAll(visible))
		first = append(first, timeIt(b, func() {
			e.MustSandbox("start", "-d", "first-"+strconv.Itoa(i), "--agent", "shell", "--", "sleep", "600")
		}))
		later = append(later, timeIt(b, func() {
			e.MustSandbox("start", "-d", "later-"+strconv.Itoa(i), "--agent", "shell", "--", "sleep", "600")
		}))
		raw = append(raw, byHand.start(b, i, "sleep", "600"))
	}
	report(b, "start -d allowlist, tldr's shape", median(later), median(raw), 1.5)
	report(b, "first start vs a later one, tldr", median(first), median(later), 2)

	// The same when no pack of the repository can be reused as it is: a
	// remote-tracking branch's commit, which agents must not read, packed
	// in with the history (as a clone's pack holds every remote branch).
	remote := e.Git("commit-tree", "-m", "remote only", "-p", "main", "main^{tree}")
	e.Git("update-ref", "refs/remotes/origin/other", remote)
	e.Git("-c", "gc.auto=0", "repack", "-adq")
	first, later = nil, nil
	for i := 0; i < benchRounds; i++ {
		must(b, os.RemoveAll(visible))
		first = append(first, timeIt(b, func() {
			e.MustSandbox("start", "-d", "nofill-"+strconv.Itoa(i), "--agent", "shell", "--", "sleep", "600")
		}))
		later = append(later, timeIt(b, func() {
			e.MustSandbox("start", "-d", "nolater-"+strconv.Itoa(i), "--agent", "shell", "--", "sleep", "600")
		}))
	}
	report(b, "first start, no pack reusable", median(first), median(later), 2)
}

// bigRepo fills the test repository with n small files in 1,000
// directories and commits them.
func bigRepo(b testing.TB, e *Env, n int) {
	b.Helper()
	for i := 0; i < n; i++ {
		dir := filepath.Join(e.Repo, "src", fmt.Sprintf("d%03d", i%1000))
		if i < 1000 {
			must(b, os.MkdirAll(dir, 0o755))
		}
		must(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644))
	}
	e.Git("add", "-A")
	e.Git("-c", "gc.auto=0", "commit", "-q", "-m", "big")
	// Packed, as a real repository of this size is; and no background gc
	// competing with the measurements.
	e.Git("gc", "-q")
}

// touchFiles rewrites 100 tracked files (starting at offset) and writes 100
// new ones named after tag, with content that differs every round.
func touchFiles(b testing.TB, wt, tag string, round, offset int) {
	b.Helper()
	for i := 0; i < 100; i++ {
		n := (i*7 + offset) % 100_000
		p := filepath.Join(wt, "src", fmt.Sprintf("d%03d", n%1000), fmt.Sprintf("f%06d.txt", n))
		must(b, os.WriteFile(p, []byte(fmt.Sprintf("changed %d %d\n", i, round)), 0o644))
		must(b, os.WriteFile(filepath.Join(wt, "added", fmt.Sprintf("%s-n%03d.txt", tag, i)), []byte(fmt.Sprintf("new %d %d\n", i, round)), 0o644))
	}
}

func maxRSS(cmd *exec.Cmd) int64 {
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss // KiB on Linux
	}
	return 0
}

// BenchmarkSnapshot: an incremental snapshot of a 100,000-file worktree
// with 200 changed and added files, against C git doing the same by hand
// (git add -A into a temporary index copied from the real one, then git
// write-tree); and a snapshot with nothing changed, whose target is a time
// (150 ms), printed beside the same by hand. Also the first snapshot after
// start and peak memory.
func BenchmarkSnapshot(b *testing.B) {
	e := NewEnv(b)
	// No periodic snapshots competing for the two cores while measuring.
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n", baseImage)
	bigRepo(b, e, 100_000)
	r := snapshotRounds(b, e, benchRounds)
	report(b, "snapshot, 100k files, 200 changed", median(r.ours), median(r.raw), 1.25)
	reportTime(b, "snapshot, 100k files, unchanged", median(r.unchanged), median(r.unchangedRaw), 150*time.Millisecond)
	fmt.Printf("bench: first snapshot after start, 100k files: %.1f ms; peak RSS of the snapshot process tree: %d MiB\n", ms(r.first), r.rss/1024)
	b.ReportMetric(ms(r.first), "ms-first")
	b.ReportMetric(float64(r.rss)/1024, "MiB-peak")
}

// snapshotResult is what snapshotRounds measured.
type snapshotResult struct {
	ours, raw []time.Duration
	// cpu is the CPU time (user and system, the process and what it ran)
	// of each snapshot and each round by hand, in order: less moved by
	// a loaded machine than the wall clock.
	cpu, rawCPU             []time.Duration
	unchanged, unchangedRaw []time.Duration
	first                   time.Duration
	rss                     int64
}

// snapshotRounds starts a sandbox on the test repository and measures, in
// rounds, a snapshot of 200 changed and added files against git add -A and
// write-tree with a copy of the worktree's index, and a snapshot with
// nothing changed against the same by hand.
func snapshotRounds(tb testing.TB, e *Env, rounds int) snapshotResult {
	tb.Helper()
	return snapshotRoundsAfter(tb, e, rounds, func() {})
}

// snapshotRoundsAfter is snapshotRounds, calling ready once the sandbox
// started.
func snapshotRoundsAfter(tb testing.TB, e *Env, rounds int, ready func()) snapshotResult {
	tb.Helper()
	e.MustSandbox("start", "-d", "snap", "--agent", "shell", "--", "sleep", "600")
	ready()
	wt := e.Worktree("snap")
	must(tb, os.MkdirAll(filepath.Join(wt, "added"), 0o755))
	admin := e.GitIn(wt, "rev-parse", "--absolute-git-dir")
	realIndex := filepath.Join(admin, "index")
	var r snapshotResult
	r.first = timeIt(tb, func() { e.MustSandbox("rescue", "snapshot", "snap") })
	snapshot := func() {
		cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "rescue", "snapshot", "snap")
		cmd.Dir, cmd.Env = e.Repo, append(e.vars, os.Getenv("BENCH_TRACE"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			tb.Fatalf("snapshot: %v\n%s", err, out)
		}
		if os.Getenv("BENCH_TRACE") != "" {
			fmt.Printf("%s", out)
		}
		r.rss = max(r.rss, maxRSS(cmd))
		r.cpu = append(r.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	tmp := filepath.Join(e.Root, "raw.index")
	gitEnv := append(os.Environ(), "GIT_DIR="+admin, "GIT_WORK_TREE="+wt, "GIT_INDEX_FILE="+tmp)
	byHand := func() {
		runOK(tb, "", nil, "cp", realIndex, tmp)
		var cpu time.Duration
		for _, args := range [][]string{{"add", "-A"}, {"write-tree"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir, cmd.Env = wt, gitEnv
			if out, err := cmd.CombinedOutput(); err != nil {
				tb.Fatalf("git %v: %v\n%s", args, err, out)
			}
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		r.rawCPU = append(r.rawCPU, cpu)
	}
	for round := 0; round < rounds; round++ {
		// Fresh content for each side, so both write 200 new objects.
		touchFiles(tb, wt, "snap", 2*round, 0)
		r.ours = append(r.ours, timeIt(tb, snapshot))
		touchFiles(tb, wt, "snap", 2*round+1, 0)
		r.raw = append(r.raw, timeIt(tb, byHand))
	}
	// Nothing changed: the by-hand side's index copy already holds what
	// its last add wrote, so it only looks too.
	snapshot()
	runOK(tb, wt, gitEnv, "git", "add", "-A")
	runOK(tb, "", nil, "cp", tmp, realIndex+".bench")
	realIndex += ".bench"
	for round := 0; round < rounds; round++ {
		r.unchanged = append(r.unchanged, timeIt(tb, snapshot))
		r.unchangedRaw = append(r.unchangedRaw, timeIt(tb, byHand))
	}
	return r
}

// benchSandbox runs git sandbox for a benchmark; with BENCH_TRACE set
// (to GIT_SANDBOX_TRACE=1), traced, and what it printed is shown.
func benchSandbox(tb testing.TB, e *Env, args ...string) {
	tb.Helper()
	var extra []string
	if v := os.Getenv("BENCH_TRACE"); v != "" {
		extra = []string{v}
	}
	r := e.Run(e.Repo, extra, "git", append([]string{"sandbox"}, args...)...)
	if r.Code != 0 {
		tb.Fatalf("git sandbox %s: %s", strings.Join(args, " "), r)
	}
	if extra != nil {
		fmt.Print(r.Stderr)
	}
}

// reportTime prints a figure whose target is a time, with the same work
// by hand beside it for scale.
func reportTime(b *testing.B, what string, ours, raw, target time.Duration) {
	verdict := "within"
	if ours > target {
		verdict = "OVER"
	}
	fmt.Printf("bench: %-32s ours %8.1f ms  raw %8.1f ms  ratio %.2fx  (target <= %.0f ms: %s)\n",
		what, ms(ours), ms(raw), float64(ours)/float64(raw), ms(target), verdict)
	b.ReportMetric(ms(ours), "ms-unchanged")
}

// BenchmarkLand: landing 200 changed and added files in the 100,000-file
// repository with --keep onto the checked-out branch, against the same
// work done with git plumbing by hand (snapshot through a temporary index,
// merge-tree, commit-tree, update-ref, read-tree -m -u in a checkout of its
// own); and the full default land (checkout updated, sandbox removed)
// against commit, merge --no-ff and worktree remove.
func BenchmarkLand(b *testing.B) {
	e := NewEnv(b)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n", baseImage)
	bigRepo(b, e, 100_000)
	ours, raw := landRounds(b, e, benchRounds)
	report(b, "land --keep, 100k files, 200 changed", median(ours), median(raw), 1.5)

	// The full default land (checkout updated, sandbox removed) against
	// the same by hand: commit in a worktree, merge --no-ff into the
	// checkout, remove the worktree. The removal happens in the
	// background: the worktree must be gone soon after.
	wt := e.Worktree("land")
	touchFiles(b, wt, "full", 99, 30_001)
	full := timeIt(b, func() { e.MustSandbox("land", "land", "-m", "bench") })
	hand := filepath.Join(e.Root, "hand")
	e.Git("worktree", "add", "-q", "-b", "hand", hand)
	must(b, os.MkdirAll(filepath.Join(hand, "added"), 0o755))
	touchFiles(b, hand, "hand", 98, 60_001)
	byHand := timeIt(b, func() {
		e.GitIn(hand, "add", "-A")
		e.GitIn(hand, "commit", "-q", "-m", "by hand")
		e.Git("merge", "-q", "--no-ff", "-m", "merge by hand", "hand")
		e.Git("worktree", "remove", "--force", hand)
	})
	report(b, "full land (sandbox removed)", full, byHand, 1.5)
	start := time.Now()
	trash := filepath.Join(e.State, e.RepoID(), ".trash")
	Eventually(b, 30*time.Second, "the landed worktree to be deleted", func() bool {
		entries, err := os.ReadDir(trash)
		_, werr := os.Stat(wt)
		return (err != nil || len(entries) == 0) && os.IsNotExist(werr)
	})
	fmt.Printf("bench: the landed worktree was gone %.1f s after land returned (or less)\n", time.Since(start).Seconds())
}

// landRounds starts sandbox "land" on the test repository and measures,
// in rounds, land --keep of 200 changed and added files onto the
// checked-out branch against the same by hand with plumbing onto a branch
// checked out in a worktree of its own.
func landRounds(tb testing.TB, e *Env, rounds int) (ours, raw []time.Duration) {
	tb.Helper()
	e.MustSandbox("start", "land", "--agent", "shell", "--", "mkdir", "-p", "added")
	wt := e.Worktree("land")
	admin := e.GitIn(wt, "rev-parse", "--absolute-git-dir")
	hostGit := filepath.Join(e.Repo, ".git")
	rawCo := filepath.Join(e.Root, "raw-checkout")
	e.Git("worktree", "add", "-q", "-b", "raw-target", rawCo)
	rawEnv := append(os.Environ(), "GIT_DIR="+filepath.Join(hostGit, "worktrees", filepath.Base(rawCo)), "GIT_WORK_TREE="+rawCo)
	for round := 0; round < rounds; round++ {
		// Each side changes its own files every round, so no round
		// conflicts with an earlier one.
		touchFiles(tb, wt, fmt.Sprintf("ours%d", round), 2*round, 1+1000*round)
		ours = append(ours, timeIt(tb, func() {
			if tr := os.Getenv("BENCH_TRACE"); tr != "" {
				r := e.Run(e.Repo, []string{tr}, filepath.Join(binDir, "git-sandbox"), "land", "land", "--keep", "-m", "bench")
				fmt.Printf("%s", r.Stderr)
				return
			}
			e.MustSandbox("land", "land", "--keep", "-m", "bench")
		}))

		touchFiles(tb, wt, fmt.Sprintf("raw%d", round), 2*round+1, 50_001+1000*round)
		tmp := filepath.Join(e.Root, "raw.index")
		gitEnv := append(os.Environ(), "GIT_DIR="+admin, "GIT_WORK_TREE="+wt, "GIT_INDEX_FILE="+tmp)
		hostEnv := append(os.Environ(), "GIT_DIR="+hostGit)
		raw = append(raw, timeIt(tb, func() {
			runOK(tb, "", nil, "cp", filepath.Join(admin, "index"), tmp)
			runOK(tb, wt, gitEnv, "git", "add", "-A")
			tree := gitOut(tb, wt, gitEnv, "write-tree")
			snap := gitOut(tb, wt, gitEnv, "commit-tree", tree, "-p", "HEAD", "-m", "snapshot")
			tip := gitOut(tb, "", hostEnv, "rev-parse", "raw-target")
			merged := gitOut(tb, "", hostEnv, "merge-tree", "--write-tree", "raw-target", snap)
			commit := gitOut(tb, "", hostEnv, "commit-tree", merged, "-p", tip, "-m", "bench")
			runOK(tb, "", hostEnv, "git", "update-ref", "refs/heads/raw-target", commit, tip)
			runOK(tb, rawCo, rawEnv, "git", "read-tree", "-m", "-u", tip, commit)
		}))
	}
	return ours, raw
}

func gitOut(b testing.TB, dir string, env []string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git %v: %v", args, err)
	}
	return strings.Fields(string(out))[0]
}

// BenchmarkPs: `git sandbox ps` with five sandboxes against `docker ps -a`
// filtered to the same containers.
func BenchmarkPs(b *testing.B) {
	e := NewEnv(b)
	for i := 0; i < 5; i++ {
		e.MustSandbox("start", "-d", "ps-"+strconv.Itoa(i), "--agent", "shell", "--", "sleep", "300")
	}
	var ours, raw []time.Duration
	for round := 0; round < benchRounds; round++ {
		ours = append(ours, timeIt(b, func() { e.MustSandbox("ps") }))
		raw = append(raw, timeIt(b, func() {
			runOK(b, "", nil, "docker", "ps", "-a", "--filter", "label=git-sandbox.repo="+e.RepoID())
		}))
	}
	report(b, "ps, 5 sandboxes", median(ours), median(raw), 1.5)
}

// forecastFleet makes 20 finished sandboxes that all edit one shared file
// (each its own line, so every pair must really be merged) and a file of
// their own.
func forecastFleet(b *testing.B) *Env {
	e := NewEnv(b)
	var lines strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	e.WriteFile("shared.txt", lines.String())
	e.Git("add", "shared.txt")
	e.Git("commit", "-q", "-m", "shared")
	for i := 0; i < 20; i++ {
		n := strconv.Itoa(i)
		// No network: 20 allowlist sandboxes would hold 40 networks.
		e.MustSandbox("start", "fc-"+n, "--network", "none", "--agent", "shell", "--", "sh", "-c",
			fmt.Sprintf("sed -i 's/^line %d$/line %d by fc-%s/' shared.txt; echo %s > own-%s.txt", i*10, i*10, n, n, n))
	}
	return e
}

// BenchmarkPsForecast: ps of 20 sandboxes with the conflict forecast
// answered from a warm cache, against docker ps; and the first forecast
// (cache removed) against the 190 pairwise `git merge-tree` runs a person
// would type.
func BenchmarkPsForecast(b *testing.B) {
	e := forecastFleet(b)
	cache := filepath.Join(e.State, e.RepoID(), ".forecast.json")
	e.MustSandbox("ps") // warms the cache
	var ours, raw []time.Duration
	for round := 0; round < benchRounds; round++ {
		ours = append(ours, timeIt(b, func() { e.MustSandbox("ps") }))
		raw = append(raw, timeIt(b, func() {
			runOK(b, "", nil, "docker", "ps", "-a", "--filter", "label=git-sandbox.repo="+e.RepoID())
		}))
	}
	report(b, "ps, 20 sandboxes, warm forecast", median(ours), median(raw), 2)

	var refs []string
	for i := 0; i < 20; i++ {
		refs = append(refs, "refs/sandbox/fc-"+strconv.Itoa(i)+"/rescue")
	}
	ours, raw = nil, nil
	for round := 0; round < 3; round++ {
		must(b, os.Remove(cache))
		ours = append(ours, timeIt(b, func() { e.MustSandbox("conflicts") }))
		raw = append(raw, timeIt(b, func() {
			for i := range refs {
				for j := i + 1; j < len(refs); j++ {
					cmd := exec.Command("git", "merge-tree", "--write-tree", refs[i], refs[j])
					cmd.Dir = e.Repo
					cmd.Env = e.vars
					_ = cmd.Run() // exit 1 is a conflict, still a merge
				}
			}
		}))
	}
	report(b, "first forecast, 20 sandboxes", median(ours), median(raw), 1.2)
}

// BenchmarkWarmStart: a second `git sandbox start -d` of a repository whose
// setup takes 20 s (a sleep plus 12 MB of writes outside /workspace), which
// starts from the warm image the first start kept, against a plain start
// of a repository with no setup. The first (cold) start is printed for
// scale.
func BenchmarkWarmStart(b *testing.B) {
	e := NewEnv(b)
	e.WriteFile("go.sum", "example.com/a v1.0.0 h1:one\n")
	e.WriteFile(".sandbox.toml", `setup = "sleep 20; mkdir -p /var/tmp/deps && for i in $(seq 1 200); do head -c 65536 /dev/urandom > /var/tmp/deps/f$i; done"
setup_inputs = ["go.sum"]
`)
	e.Git("add", ".")
	e.Git("commit", "-qm", "setup")
	plain := NewEnv(b)
	plain.MustSandbox("start", "-d", "warm-up", "--agent", "shell", "--", "true")

	cold := timeIt(b, func() { e.MustSandbox("start", "-d", "cold", "--agent", "shell", "--", "true") })
	var r Result
	warm := timeIt(b, func() { r = e.MustSandbox("start", "-d", "warm", "--agent", "shell", "--", "true") })
	if !strings.Contains(r.Stderr, "setup skipped") {
		b.Fatalf("the second start did not start warm: %s", r)
	}
	raw := timeIt(b, func() { plain.MustSandbox("start", "-d", "plain", "--agent", "shell", "--", "true") })
	fmt.Printf("bench: %-32s %8.1f ms\n", "cold start (setup 20 s)", ms(cold))
	report(b, "warm start vs start, no setup", warm, raw, 1.5)
}
