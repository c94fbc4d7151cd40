package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"crypto/rand"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// fetchResult is what the test upstream's fetch mode prints.
type fetchResult struct {
	bytes    int64
	seconds  float64
	medianMS float64
	cpuMS    float64
}

func parseFetch(b testing.TB, out string) fetchResult {
	b.Helper()
	var r fetchResult
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "bytes %d seconds %f median_ms %f cpu_ms %f", &r.bytes, &r.seconds, &r.medianMS, &r.cpuMS); err != nil {
		b.Fatalf("fetch printed %q: %v", out, err)
	}
	return r
}

func medianFloat(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkEgressProxy: the agent (on its sandbox's internal network)
// fetches from the test upstream through its sandbox's proxy and, on the
// same two networks, through Debian's squid and tinyproxy configured as
// forward proxies (startPeerProxies); a client container on the egress
// network fetches from the same upstream directly, for scale. For 100 MB
// downloads (plain HTTP, and inside a CONNECT tunnel) it prints each
// proxy's throughput and CPU time per 100 MB (its container's), and the
// added latency per request (kept-alive plain HTTP, and a new CONNECT
// tunnel per request against a new direct connection), with the ratio of
// git sandbox's to the better peer's. Targets: throughput >= 1.0x the
// better peer's, CPU and added latency <= the better peer's. The agent
// reaches the sandbox's proxy as its environment says (at its address),
// and the peers at theirs.
func BenchmarkEgressProxy(b *testing.B) {
	e := NewEnv(b)
	e.WriteConfig(`allow = ["api.allowed.test:80"]
egress_network = %q
base_image = %q
[[mount]]
source = %q
target = %q
readonly = true
[limits]
memory = "1g"
pids = 256
`, e.egressNetwork(), baseImage, filepath.Join(binDir, "test-upstream"), brokerClient)
	e.MustSandbox("start", "bench", "-d", "--agent", "shell", "--", "sleep", "3600")
	egressNet := e.egressNetwork()
	upstream, _ := startUpstream(b, egressNet, "api.allowed.test")
	defer func() { _ = exec.Command("docker", "rm", "-f", upstream).Run() }()
	internal := networkWithSuffix(b, e.sandboxNetworks("bench"), "-net")
	proxies := append([]benchProxy{{name: "git sandbox", container: e.sandboxContainers("bench", "proxy")[0]}},
		startPeerProxies(b, e, egressNet, internal)...)
	bp := &benchPaths{b: b, e: e, egressNet: egressNet, upstream: upstream, proxies: proxies}
	bp.downloads()
	bp.latency()
}

// benchPaths is BenchmarkEgressProxy's run: the proxies it compares.
type benchPaths struct {
	b                   *testing.B
	e                   *Env
	egressNet, upstream string
	proxies             []benchProxy
}

// benchPath is what the downloads of one path cost.
type benchPath struct {
	median                        []float64
	seconds                       float64
	client, upstreamCPU, proxyCPU time.Duration
}

// via fetches url n times (mode: proxy, connect) from the agent through p.
func (bp *benchPaths) via(p benchProxy, mode, url string, n int) fetchResult {
	args := []string{"exec", "bench", "--"}
	if p.addr != "" {
		args = append(args, "env", "http_proxy=http://"+p.addr, "HTTP_PROXY=http://"+p.addr)
	}
	r := bp.e.MustSandbox(append(args, brokerClient, "fetch", mode, url, strconv.Itoa(n))...)
	return parseFetch(bp.b, r.Stdout)
}

// direct fetches url n times (mode: direct, fresh) from a client on the
// egress network, with no proxy.
func (bp *benchPaths) direct(mode, url string, n int) fetchResult {
	out, err := exec.Command("docker", "run", "--rm", "--network", bp.egressNet, "--user", "65534:65534",
		"--label", "git-sandbox.repo="+bp.e.RepoID(),
		"-v", filepath.Join(binDir, "test-upstream")+":/client:ro", testImage,
		"/client", "fetch", mode, url, strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		bp.b.Fatalf("direct fetch: %v\n%s", err, out)
	}
	return parseFetch(bp.b, string(out))
}

// measure runs one fetch, adding its times and the CPU the upstream's
// and the proxy's containers used to p.
func (bp *benchPaths) measure(p *benchPath, proxy string, fetch func() fetchResult) {
	cpu := func(name string) time.Duration {
		if name == "" {
			return 0
		}
		return cgroupCPU(bp.b, name)
	}
	u0, p0 := cpu(bp.upstream), cpu(proxy)
	r := fetch()
	u1, p1 := cpu(bp.upstream), cpu(proxy)
	p.median = append(p.median, r.medianMS)
	p.seconds += r.seconds
	p.client += time.Duration(r.cpuMS * float64(time.Millisecond))
	p.upstreamCPU += u1 - u0
	p.proxyCPU += p1 - p0
}

// Each round times three 100 MB downloads on each path (a path's figure
// is its median request), the proxies taking turns, and the figure is the
// median of the rounds; the CPU each party used is summed too (the
// clients', the upstream's and the proxy's containers'), to tell a proxy
// that costs from a machine that has no core left for a third party.
const egressRounds, egressPerRound = 5, 3

const egressBig = "http://api.allowed.test/bytes/100000000"

// downloads measures and prints the 100 MB downloads.
func (bp *benchPaths) downloads() {
	var raw benchPath
	plain := make([]benchPath, len(bp.proxies))
	tunnel := make([]benchPath, len(bp.proxies))
	for range egressRounds {
		bp.measure(&raw, "", func() fetchResult { return bp.direct("direct", egressBig, egressPerRound) })
		for i, p := range bp.proxies {
			bp.measure(&plain[i], p.container, func() fetchResult { return bp.via(p, "proxy", egressBig, egressPerRound) })
			bp.measure(&tunnel[i], p.container, func() fetchResult { return bp.via(p, "connect", egressBig, egressPerRound) })
		}
	}
	fmt.Printf("bench: 100 MB direct (no proxy, for scale) %6.1f MB/s\n", 1e5/medianFloat(raw.median))
	bp.accounting("100 MB direct", raw)
	bp.compare("100 MB plain HTTP", "plain", plain)
	bp.compare("100 MB CONNECT", "connect", tunnel)
}

// perDownload is a total of CPU time per 100 MB download, in ms.
func perDownload(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000 / (egressRounds * egressPerRound)
}

// accounting prints who used the CPU on one path.
func (bp *benchPaths) accounting(what string, p benchPath) {
	sum := p.client + p.upstreamCPU + p.proxyCPU
	fmt.Printf("bench: %-32s CPU per 100 MB: client %.0f ms, upstream %.0f ms, proxy %.0f ms; %.1f cores busy while downloading\n",
		what, perDownload(p.client), perDownload(p.upstreamCPU), perDownload(p.proxyCPU), sum.Seconds()/p.seconds)
}

// compare prints every proxy's throughput and CPU per 100 MB on one kind
// of download, and git sandbox's (paths[0]) against the better peer.
func (bp *benchPaths) compare(what, unit string, paths []benchPath) {
	rate := func(p benchPath) float64 { return 1e5 / medianFloat(p.median) }
	var figs, cpus []string
	bestRate, bestCPU := 0.0, -1.0
	var rateBy, cpuBy string
	for i, p := range paths {
		name := bp.proxies[i].name
		figs = append(figs, fmt.Sprintf("%s %.1f MB/s", name, rate(p)))
		cpus = append(cpus, fmt.Sprintf("%s %.0f ms", name, perDownload(p.proxyCPU)))
		bp.accounting(what+" via "+name, p)
		if i == 0 {
			continue
		}
		if r := rate(p); r > bestRate {
			bestRate, rateBy = r, name
		}
		if c := perDownload(p.proxyCPU); bestCPU < 0 || c < bestCPU {
			bestCPU, cpuBy = c, name
		}
	}
	tput := rate(paths[0]) / bestRate
	cpu := perDownload(paths[0].proxyCPU) / bestCPU
	fmt.Printf("bench: %-32s throughput: %s; git sandbox / %s %.2fx (target >= 1.00x: %s)\n",
		what, strings.Join(figs, ", "), rateBy, tput, verdict(tput >= 1))
	fmt.Printf("bench: %-32s proxy CPU per 100 MB: %s; git sandbox / %s %.2fx (target <= 1.00x: %s)\n",
		what, strings.Join(cpus, ", "), cpuBy, cpu, verdict(cpu <= 1))
	bp.b.ReportMetric(tput, "x-better-peer-throughput-"+unit)
	bp.b.ReportMetric(cpu, "x-better-peer-cpu-"+unit)
	bp.b.ReportMetric(perDownload(paths[0].proxyCPU), "proxy-cpu-ms-per-100MB-"+unit)
}

func verdict(ok bool) string {
	if ok {
		return "within"
	}
	return "MISSED"
}

// latencyRounds is how many rounds latency runs: in each, the direct
// path is timed (for scale), then one client in the agent's container
// takes every proxy in turn for each request (the test upstream's turns).
const latencyRounds = 3

// latencyKind is one kind of request latency measures.
type latencyKind struct {
	what, unit, mode, directMode string
	n                            int
}

// latency measures and prints the latency each proxy adds to a request:
// kept-alive plain HTTP against a kept-alive direct connection, and a new
// CONNECT tunnel per request against a new direct connection.
func (bp *benchPaths) latency() {
	for _, k := range []latencyKind{{"request, kept-alive (plain)", "plain", "proxy", "direct", 300},
		{"request, new CONNECT tunnel", "connect", "connect", "fresh", 300}} {
		bp.latencyOf(k)
	}
}

// latencyOf measures and prints one kind of request. The sandbox's proxy
// is reached as the agent reaches it (by its environment, which gives its
// address), the peers at their addresses. A proxy's added latency is its
// median request less the direct path's; git sandbox against the better
// peer is the median of the differences between their requests of the
// same turn, which the machine's drift between runs does not blur. Every
// figure is the median of the rounds'.
func (bp *benchPaths) latencyOf(k latencyKind) {
	const small = "http://api.allowed.test/"
	addrs := []string{"env"}
	for _, p := range bp.proxies[1:] {
		addrs = append(addrs, p.addr)
	}
	added := make([][]float64, len(addrs))
	diff := make([][]float64, len(addrs)) // git sandbox's less each one's
	var raws []float64
	for range latencyRounds {
		raw := bp.direct(k.directMode, small, k.n).medianMS
		raws = append(raws, raw)
		r := bp.e.MustSandbox(append([]string{"exec", "bench", "--", brokerClient, "turns", k.mode, small, strconv.Itoa(k.n)}, addrs...)...)
		med, d := parseTurns(bp.b, r.Stdout, len(addrs))
		for i := range addrs {
			added[i] = append(added[i], med[i]-raw)
			diff[i] = append(diff[i], -d[i]) // turns gives i's less git sandbox's
		}
	}
	best := 1
	var figs []string
	for i, p := range bp.proxies {
		figs = append(figs, fmt.Sprintf("%s %+.3f ms", p.name, medianFloat(added[i])))
		if i > 0 && medianFloat(added[i]) < medianFloat(added[best]) {
			best = i
		}
	}
	ours := medianFloat(diff[best])
	fmt.Printf("bench: %-32s added latency (direct %.3f ms): %s; git sandbox - %s %+.3f ms (target <= 0: %s)\n",
		k.what, medianFloat(raws), strings.Join(figs, ", "), bp.proxies[best].name, ours, verdict(ours <= 0))
	bp.b.ReportMetric(medianFloat(added[0]), "ms-added-"+k.unit)
	bp.b.ReportMetric(ours, "ms-vs-better-peer-"+k.unit)
}

// parseTurns reads what the test upstream's turns prints for n proxies:
// each one's median request, and the median of its differences from the
// first's.
func parseTurns(b testing.TB, out string, n int) (med, diff []float64) {
	b.Helper()
	med, diff = make([]float64, n), make([]float64, n)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		b.Fatalf("turns printed %d lines for %d proxies:\n%s", len(lines), n, out)
	}
	for i, line := range lines {
		var j int
		if _, err := fmt.Sscanf(line, "median %d %f diff %f", &j, &med[i], &diff[i]); err != nil || j != i {
			b.Fatalf("turns printed %q", out)
		}
	}
	return med, diff
}

// cgroupCPU is the CPU time a container has used, as its engine reports
// it (read from outside: a docker exec inside would be counted too).
func cgroupCPU(b *testing.B, name string) time.Duration {
	b.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	r, err := cli.ContainerStatsOneShot(context.Background(), name)
	if err != nil {
		b.Fatalf("%s's CPU usage: %v", name, err)
	}
	defer r.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		b.Fatalf("%s's CPU usage: %v", name, err)
	}
	return time.Duration(st.CPUStats.CPUUsage.TotalUsage)
}

// BenchmarkStartAllowlist: `git sandbox start -d` in allowlist mode (the
// sandbox's internal network, the proxy started and listening, the agent's
// container) in a repository of 5,000 files, against the same by hand: git
// worktree add, docker network create --internal on a range of its own,
// docker run -d of the proxy on the (existing) egress network, connected
// to the internal one, and of the agent.
func BenchmarkStartAllowlist(b *testing.B) {
	e := NewEnv(b)
	bigRepo(b, e, 5000)
	e.egressConfig("api.allowed.test")
	byHand := newAllowlistByHand(b, e)
	var ours, raw []time.Duration
	for i := 0; i < benchRounds; i++ {
		branch := "bench-" + strconv.Itoa(i)
		ours = append(ours, timeIt(b, func() {
			e.MustSandbox("start", "-d", branch, "--agent", "shell", "--", "true")
		}))
		raw = append(raw, byHand.start(b, i, "true"))
	}
	report(b, "start -d allowlist, 5k files", median(ours), median(raw), 1.5)
}

// allowlistByHand starts what an allowlist sandbox is, by hand.
type allowlistByHand struct {
	e              *Env
	cfgDir, outNet string
}

// newAllowlistByHand writes the proxy's configuration and makes the
// network both sides leave by (the test's egress network, which
// egressConfig named).
func newAllowlistByHand(tb testing.TB, e *Env) *allowlistByHand {
	tb.Helper()
	h := &allowlistByHand{e: e, cfgDir: filepath.Join(e.Root, "raw-proxy"), outNet: e.egressNetwork()}
	must(tb, os.MkdirAll(h.cfgDir, 0o755))
	must(tb, os.WriteFile(filepath.Join(h.cfgDir, "proxy.json"), []byte(`{"listen": ":3128", "allow": [{"entry": "api.allowed.test", "source": "user config"}]}`), 0o644))
	runOK(tb, e.Repo, nil, "docker", "network", "create", h.outNet)
	return h
}

// start makes round i by hand (git worktree add, docker network create
// --internal, the proxy's and the agent's hardened docker run -d, the
// agent running cmd) and returns how long it took.
func (h *allowlistByHand) start(tb testing.TB, i int, cmd ...string) time.Duration {
	tb.Helper()
	e := h.e
	hostGit := filepath.Join(e.Repo, ".git")
	dir := filepath.Join(e.Root, "raw", strconv.Itoa(i))
	wt := filepath.Join(dir, "worktree")
	priv := filepath.Join(dir, "git")
	home := filepath.Join(dir, "home")
	gitfile := filepath.Join(dir, "gitfile")
	must(tb, os.MkdirAll(priv, 0o755))
	must(tb, os.MkdirAll(home, 0o755))
	must(tb, os.WriteFile(gitfile, []byte("gitdir: "+priv+"\n"), 0o644))
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	name := fmt.Sprintf("git-sandbox-bench-raw-%s-%d-%s", e.RepoID(), i, hex.EncodeToString(rnd))
	inNet, proxy := name+"-net", name+"-proxy"
	tb.Cleanup(func() {
		_ = exec.Command("docker", "rm", "-f", name, proxy).Run()
		_ = exec.Command("docker", "network", "rm", inNet).Run()
	})
	user := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	label := "git-sandbox.repo=" + e.RepoID()
	return timeIt(tb, func() {
		runOK(tb, e.Repo, nil, "git", "worktree", "add", "-q", "-b", "raw-"+strconv.Itoa(i), wt)
		runOK(tb, e.Repo, nil, "docker", "network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true",
			"--subnet", fmt.Sprintf("10.214.%d.0/27", i), inNet)
		runOK(tb, e.Repo, nil, "docker", "run", "-d", "--name", proxy, "--label", label, "--network", h.outNet,
			"--user", user, "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
			"--pids-limit", "256", "--memory", "256m", "--init",
			"-v", filepath.Join(binDir, "git-sandbox")+":/opt/git-sandbox/git-sandbox:ro", "-v", h.cfgDir+":/etc/git-sandbox-proxy:ro",
			testImage, "/opt/git-sandbox/git-sandbox", "__proxy", "--config", "/etc/git-sandbox-proxy/proxy.json")
		runOK(tb, e.Repo, nil, "docker", "network", "connect", inNet, proxy)
		runOK(tb, e.Repo, nil, "docker", append([]string{"run", "-d", "--name", name, "--label", label, "--network", inNet,
			"--user", user,
			"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "256",
			"--memory", "1g", "--init", "-w", "/workspace",
			"-e", "HTTP_PROXY=http://" + proxy + ":3128", "-e", "HTTPS_PROXY=http://" + proxy + ":3128",
			"-v", wt + ":/workspace", "-v", gitfile + ":/workspace/.git:ro",
			"-v", priv + ":" + priv, "-v", filepath.Join(hostGit, "objects") + ":" + filepath.Join(hostGit, "objects") + ":ro",
			"-v", filepath.Join(hostGit, "hooks") + ":" + filepath.Join(hostGit, "hooks") + ":ro",
			"-v", home + ":/home/sandbox",
			testImage}, cmd...)...)
	})
}
