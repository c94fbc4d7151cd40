package e2e

// The soak: a fleet of agents editing files for a long time (RELIABILITY.md,
// "Hours of running").

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/sandbox"
)

// soakDuration is how long TestSoak runs its fleet: GIT_SANDBOX_SOAK (a
// Go duration such as 5m or 1h), five minutes when unset.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("GIT_SANDBOX_SOAK")
	if v == "" {
		return 5 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 2*time.Minute {
		t.Fatalf("GIT_SANDBOX_SOAK=%q: want a duration of at least 2m, such as 5m or 1h", v)
	}
	return d
}

const (
	soakAgents   = 10
	soakInterval = 5 * time.Second
	// soakRSSLimit is the most memory any git sandbox process may hold.
	soakRSSLimit = 64 << 20
	// soakSampleEvery is how often the test samples the processes and
	// the disk.
	soakSampleEvery = 15 * time.Second
)

// soakScript is each agent: it writes a counter every second, rewrites
// one of sixteen files with it, and every fifth second fetches a page
// through its egress proxy (bash's /dev/tcp: the image has no curl),
// keeping the response's status line. The counter and the status are
// written whole (a new file renamed over the old): the stop at the end
// may come between an echo's truncation and its write.
const soakScript = `p=${http_proxy#http://}; ph=${p%:*}; pp=${p##*:}
i=0
while :; do
	i=$((i+1))
	echo $i > n.new; mv n.new n.txt
	echo "$i $(date +%s)" > f$((i % 16)).txt
	if [ $((i % 5)) -eq 0 ] && exec 3<>/dev/tcp/$ph/$pp; then
		printf 'GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n' >&3
		timeout 10 head -n 1 <&3 | tr -d '\r' > status.new; mv status.new status.txt
		exec 3<&-
	fi
	sleep 1
done
`

// soakProc is one long-lived process the soak watches: a supervisor, the
// fleet runner, or a sandbox's egress proxy.
type soakProc struct {
	name string
	pid  int
}

// soakSample is what one look at the machine saw.
type soakSample struct {
	at time.Duration
	// fds and rss of each watched process by name; rss also of every
	// other git sandbox process running at that moment.
	fds map[string]int
	rss map[string]int64
	// state and repo are the bytes in the state directory and in the
	// repository's .git; snaps the interval snapshots taken so far.
	state, repo int64
	snaps       int
}

// A fleet of ten shell agents edits files continuously (and goes through
// its egress proxies) for GIT_SANDBOX_SOAK (five minutes unless set), with
// a snapshot every five seconds: every git sandbox process stays under 64
// MiB of memory, the open descriptors of the supervisors, the fleet runner
// and the proxies stay flat, the state directory and the repository grow
// in proportion to the snapshots taken, snapshot latency is reported, and
// at the end every agent's last state is in a snapshot.
func TestSoak(t *testing.T) {
	t.Parallel()
	d := soakDuration(t)
	e := NewEnv(t)
	e.WriteConfig("allow = [\"api.allowed.test\"]\negress_network = %q\nbase_image = %q\n[rescue]\ninterval = \"5s\"\n[limits]\nmemory = \"128m\"\npids = 64\n",
		e.egressNetwork(), baseImage)
	// The proxies leave by the test's own egress network; the server the
	// agents fetch from is on it before they start.
	runOK(t, e.Root, nil, "docker", "network", "create", e.egressNetwork())
	startUpstream(t, e.egressNetwork(), "api.allowed.test")
	e.WriteFile("soak.sh", soakScript)
	e.Git("add", "soak.sh")
	e.Git("commit", "-q", "-m", "soak agent")
	branches := make([]string, soakAgents)
	var tasks strings.Builder
	fmt.Fprintf(&tasks, "max_parallel = %d\n", soakAgents)
	for i := range branches {
		branches[i] = fmt.Sprintf("soak%02d", i)
		fmt.Fprintf(&tasks, "\n[[task]]\nbranch = %q\ncommand = [\"bash\", \"soak.sh\"]\n", branches[i])
	}
	e.MustSandbox("fleet", "start", e.writeTasks("soak.toml", tasks.String()))
	// Each supervisor's log, where each interval snapshot says how long
	// it took.
	logs := map[string]string{}
	for _, b := range branches {
		Eventually(t, 3*time.Minute, b+" in ps", func() bool { return e.hasSandbox(b) })
		logs[b] = filepath.Join(filepath.Dir(e.Worktree(b)), "supervisor.log")
		Eventually(t, 3*time.Minute, b+"'s first interval snapshot", func() bool { return len(soakLatencies(logs[b])) > 0 })
	}
	t.Logf("soak: %d agents running; sampling every %s for %s", soakAgents, soakSampleEvery, d)
	began := time.Now()
	var samples []soakSample
	for {
		s := soakLook(t, e, logs, time.Since(began))
		samples = append(samples, s)
		t.Logf("soak: %s: %d interval snapshots, state %.1f MiB, repository %.1f MiB, %d processes watched, max RSS %.1f MiB",
			s.at.Round(time.Second), s.snaps, float64(s.state)/(1<<20), float64(s.repo)/(1<<20), len(s.fds), float64(slices.Max(append(slices.Collect(maps.Values(s.rss)), 0)))/(1<<20))
		if time.Since(began) >= d {
			break
		}
		time.Sleep(min(soakSampleEvery, d-time.Since(began)))
	}
	e.MustSandbox("fleet", "stop")
	for _, b := range branches {
		Eventually(t, 2*time.Minute, b+" stopped", func() bool { s := e.PsOf(b).State; return s != "running" && s != "paused" })
	}
	soakReport(t, logs, samples, d)
	soakLastStates(t, e, branches)
	soakCheckMemory(t, samples)
	soakCheckDescriptors(t, samples)
	soakCheckGrowth(t, samples)
	e.MustSandbox("fleet", "rm", "-f")
}

// soakLastStates checks that each stopped agent's last counter is in a
// snapshot and that its last request through the proxy was answered.
func soakLastStates(t *testing.T, e *Env, branches []string) {
	t.Helper()
	for _, b := range branches {
		wt := e.Worktree(b)
		n := strings.TrimSpace(readFile(filepath.Join(wt, "n.txt")))
		if _, err := strconv.Atoi(n); err != nil {
			t.Errorf("%s: n.txt = %q", b, n)
			continue
		}
		if e.snapshotWith(b, "n.txt", n+"\n") == "" {
			t.Errorf("%s: the agent's last state (n.txt = %s) is in no snapshot", b, n)
		}
		if st := strings.TrimSpace(readFile(filepath.Join(wt, "status.txt"))); !strings.Contains(st, " 200") {
			t.Errorf("%s: the last request through the proxy got %q", b, st)
		}
	}
}

// soakLook samples the watched processes, every other git sandbox
// process of the test's, and the disk.
func soakLook(t *testing.T, e *Env, logs map[string]string, at time.Duration) soakSample {
	t.Helper()
	s := soakSample{at: at, fds: map[string]int{}, rss: map[string]int64{}}
	for _, p := range append(e.gitSandboxProcs(), soakProxies(t, e)...) {
		rss, fds, ok := procUsage(p.pid)
		if !ok {
			continue // it ended meanwhile
		}
		s.rss[p.name] = max(s.rss[p.name], rss)
		if !strings.HasPrefix(p.name, "command ") {
			s.fds[p.name] = fds
		}
	}
	s.state = treeBytes(e.State)
	s.repo = treeBytes(filepath.Join(e.Repo, ".git"))
	for _, log := range logs {
		s.snaps += len(soakLatencies(log))
	}
	return s
}

// gitSandboxProcs lists this test's git sandbox processes (those with its
// HOME): the supervisors and the fleet runner by their role, any other by
// its command and pid.
func (e *Env) gitSandboxProcs() []soakProc {
	var out []soakProc
	for _, p := range homeProcs(e.Home) {
		pid, args := p.pid, p.args
		if len(args) < 2 || filepath.Base(args[0]) != "git-sandbox" {
			continue
		}
		name := fmt.Sprintf("command %s (%d)", args[1], pid)
		switch args[1] {
		case sandbox.SupervisorCommand:
			name = "supervisor " + args[len(args)-1]
		case "__fleet-run":
			name = "fleet runner"
		}
		out = append(out, soakProc{name, pid})
	}
	return out
}

// soakProxies lists the test's egress proxies by their container's main
// process, as this machine sees it.
func soakProxies(t *testing.T, e *Env) []soakProc {
	t.Helper()
	ids, err := exec.Command("docker", "ps", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=proxy").Output()
	if err != nil || len(strings.Fields(string(ids))) == 0 {
		return nil
	}
	out, err := exec.Command("docker", append([]string{"inspect", "--format", `{{.State.Pid}} {{index .Config.Labels "git-sandbox.branch"}}`}, strings.Fields(string(ids))...)...).Output()
	if err != nil {
		return nil // one stopped meanwhile; the next look sees them
	}
	var procs []soakProc
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if pid, err := strconv.Atoi(f[0]); err == nil && pid > 0 && len(f) == 2 {
			procs = append(procs, soakProc{"proxy " + f[1], underInit(pid)})
		}
	}
	return procs
}

// underInit is the process a container's init (docker run --init) runs,
// or pid itself when it is no init.
func underInit(pid int) int {
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if argv0, _, _ := strings.Cut(string(cmd), "\x00"); filepath.Base(argv0) != "docker-init" {
		return pid
	}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if f := strings.Fields(string(kids)); len(f) == 1 {
		if kid, err := strconv.Atoi(f[0]); err == nil {
			return kid
		}
	}
	return pid
}

// procUsage reads a process's resident memory and open descriptors.
func procUsage(pid int) (rss int64, fds int, ok bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, false
	}
	return rss, len(ents), true
}

// treeBytes is the size of the regular files under dir.
func treeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, de os.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

var tookLine = regexp.MustCompile(`snapshot [0-9a-f]+ \(\d+ changes, took ([0-9.a-zµ]+)\)`)

// soakLatencies reads how long each interval snapshot took from a
// supervisor's log.
func soakLatencies(log string) []time.Duration {
	var out []time.Duration
	for _, m := range tookLine.FindAllStringSubmatch(readFile(log), -1) {
		if d, err := time.ParseDuration(m[1]); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// soakCheckMemory fails the test for any git sandbox process that held
// more than soakRSSLimit at any look.
func soakCheckMemory(t *testing.T, samples []soakSample) {
	t.Helper()
	for name, rss := range soakMax(samples, func(s soakSample) map[string]int64 { return s.rss }) {
		if rss > soakRSSLimit {
			t.Errorf("%s held %.1f MiB, more than %d MiB", name, float64(rss)/(1<<20), soakRSSLimit>>20)
		}
	}
}

// soakMax is the most each name had over the samples.
func soakMax[V int | int64](samples []soakSample, of func(soakSample) map[string]V) map[string]V {
	out := map[string]V{}
	for _, s := range samples {
		for k, v := range of(s) {
			out[k] = max(out[k], v)
		}
	}
	return out
}

// soakHalves splits the samples after the first fifth (the warm-up: first
// snapshots, first connections) into two halves.
func soakHalves(samples []soakSample) (first, second []soakSample) {
	rest := samples[len(samples)/5:]
	return rest[:len(rest)/2], rest[len(rest)/2:]
}

// soakCheckDescriptors fails the test for a watched process whose open
// descriptors in the second half of the run never came down to the fewest
// it had in the first (by more than two): a leaked descriptor stays open
// and lifts the floor, while those of a snapshot under way (pipes to git,
// a connection to the engine) come and go.
func soakCheckDescriptors(t *testing.T, samples []soakSample) {
	t.Helper()
	first, second := soakHalves(samples)
	if len(first) == 0 || len(second) == 0 {
		t.Fatalf("%d samples: too few to compare", len(samples))
	}
	before, after := soakMin(first), soakMin(second)
	var watched int
	for name, n := range after {
		if b, ok := before[name]; ok {
			watched++
			if n > b+2 {
				t.Errorf("%s: at least %d open descriptors throughout the second half of the run, %d at some point in the first", name, n, b)
			}
		}
	}
	if want := 2*soakAgents + 1; watched < want {
		t.Errorf("%d processes watched throughout (supervisors, proxies, the fleet runner), want %d", watched, want)
	}
}

// soakMin is the fewest descriptors each watched process had over the
// samples, for those seen in every one.
func soakMin(samples []soakSample) map[string]int {
	out := map[string]int{}
	seen := map[string]int{}
	for _, s := range samples {
		for k, v := range s.fds {
			if seen[k]++; seen[k] == 1 || v < out[k] {
				out[k] = v
			}
		}
	}
	for k, n := range seen {
		if n < len(samples) {
			delete(out, k)
		}
	}
	return out
}

// soakCheckGrowth fails the test when the state directory and the
// repository grow by more per snapshot in the second half of the run than
// in the first (twice as much, and a few KiB): what they keep grows with
// the changes, not with time.
func soakCheckGrowth(t *testing.T, samples []soakSample) {
	t.Helper()
	first, second := soakHalves(samples)
	// Each half from its first look to the next half's first (the run's last).
	per := func(a, b soakSample) (float64, int) {
		snaps := b.snaps - a.snaps
		return float64(b.state+b.repo-a.state-a.repo) / float64(max(snaps, 1)), snaps
	}
	p1, n1 := per(first[0], second[0])
	p2, n2 := per(second[0], second[len(second)-1])
	t.Logf("soak: growth per snapshot %.1f KiB over %d snapshots, then %.1f KiB over %d", p1/1024, n1, p2/1024, n2)
	if n1 == 0 || n2 == 0 {
		t.Errorf("no snapshots in a half of the run (%d, %d)", n1, n2)
	}
	if p2 > 2*p1+8<<10 {
		t.Errorf("the state grew by %.1f KiB per snapshot in the second half, %.1f KiB in the first", p2/1024, p1/1024)
	}
}

// soakReport logs the figures and prints one summary line.
func soakReport(t *testing.T, logs map[string]string, samples []soakSample, d time.Duration) {
	var lat []time.Duration
	for _, b := range slices.Sorted(maps.Keys(logs)) {
		l := soakLatencies(logs[b])
		if len(l) < int(d/soakInterval)/5 {
			t.Errorf("%s: %d interval snapshots in %s", b, len(l), d)
		}
		lat = append(lat, l...)
	}
	slices.Sort(lat)
	pct := func(p int) time.Duration { return lat[min(len(lat)-1, len(lat)*p/100)] }
	rss := soakMax(samples, func(s soakSample) map[string]int64 { return s.rss })
	fds := soakMax(samples, func(s soakSample) map[string]int { return s.fds })
	var topName string
	for name, v := range rss {
		if v > rss[topName] {
			topName = name
		}
	}
	floor := soakMin(samples)
	for _, name := range slices.Sorted(maps.Keys(fds)) {
		t.Logf("soak: %-20s max RSS %5.1f MiB, open fds %d to %d", name, float64(rss[name])/(1<<20), floor[name], fds[name])
	}
	a, z := samples[0], samples[len(samples)-1]
	line := fmt.Sprintf("soak %s: %d agents, %d interval snapshots, latency p50 %s p99 %s max %s; max RSS %.1f MiB (%s); state +%.1f MiB, repository +%.1f MiB (%.1f KiB per snapshot)",
		d, len(logs), len(lat), pct(50), pct(99), lat[len(lat)-1], float64(rss[topName])/(1<<20), topName,
		float64(z.state-a.state)/(1<<20), float64(z.repo-a.repo)/(1<<20), float64(z.state+z.repo-a.state-a.repo)/1024/float64(max(z.snaps-a.snaps, 1)))
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
}
