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

// BenchmarkEgressProxy: on one Docker network, the agent (on its internal
// network) fetches from the test upstream through its sandbox's proxy,
// and a client container on the proxy's egress network fetches from the
// same upstream directly. Throughput of a 100 MB download (plain HTTP
// through the proxy, and inside a CONNECT tunnel) against direct, target
// >= 0.9x, with the CPU time the proxy's container used per download;
// added median latency per request (kept-alive plain HTTP, and a new
// CONNECT tunnel per request against a new direct connection), target
// <= 2 ms.
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

	viaProxy := func(mode, url string, n int) fetchResult {
		r := e.MustSandbox("exec", "bench", "--", brokerClient, "fetch", mode, url, strconv.Itoa(n))
		return parseFetch(b, r.Stdout)
	}
	direct := func(mode, url string, n int) fetchResult {
		out, err := exec.Command("docker", "run", "--rm", "--network", egressNet, "--user", "65534:65534",
			"--label", "git-sandbox.repo="+e.RepoID(),
			"-v", filepath.Join(binDir, "test-upstream")+":/client:ro", testImage,
			"/client", "fetch", mode, url, strconv.Itoa(n)).CombinedOutput()
		if err != nil {
			b.Fatalf("direct fetch: %v\n%s", err, out)
		}
		return parseFetch(b, string(out))
	}
	const big = "http://api.allowed.test/bytes/100000000"
	// A 100 MB download takes a tenth of a second here: each round times
	// three of them (each path's median request), and the figure is the
	// median of the rounds.
	// The CPU each party used is summed too (the clients' own, the
	// upstream's and the proxy's containers'), to tell a proxy that costs
	// from a machine that has no core left for a third party.
	const rounds, perRound = 5, 3
	proxyName := e.sandboxContainers("bench", "proxy")[0]
	type path struct {
		median                        []float64
		seconds                       float64
		client, upstreamCPU, proxyCPU time.Duration
	}
	var raw, plain, tunnel path
	measure := func(p *path, fetch func() fetchResult) {
		u0, p0 := cgroupCPU(b, upstream), cgroupCPU(b, proxyName)
		r := fetch()
		u1, p1 := cgroupCPU(b, upstream), cgroupCPU(b, proxyName)
		p.median = append(p.median, r.medianMS)
		p.seconds += r.seconds
		p.client += time.Duration(r.cpuMS * float64(time.Millisecond))
		p.upstreamCPU += u1 - u0
		p.proxyCPU += p1 - p0
	}
	for range rounds {
		measure(&raw, func() fetchResult { return direct("direct", big, perRound) })
		measure(&plain, func() fetchResult { return viaProxy("proxy", big, perRound) })
		measure(&tunnel, func() fetchResult { return viaProxy("connect", big, perRound) })
	}
	const downloads = rounds * perRound
	per100MB := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / downloads }
	accounting := func(what string, p path) {
		sum := p.client + p.upstreamCPU + p.proxyCPU
		fmt.Printf("bench: %-32s CPU per 100 MB: client %.0f ms, upstream %.0f ms, proxy %.0f ms; %.1f cores busy while downloading\n",
			what, per100MB(p.client), per100MB(p.upstreamCPU), per100MB(p.proxyCPU), sum.Seconds()/p.seconds)
	}
	throughput := func(what, unit string, ours path) {
		ratio := medianFloat(raw.median) / medianFloat(ours.median)
		verdict := "within"
		if ratio < 0.9 {
			verdict = "UNDER"
		}
		fmt.Printf("bench: %-32s proxy %6.1f MB/s  direct %6.1f MB/s  ratio %.2fx  (target >= 0.90x: %s)\n",
			what, 1e5/medianFloat(ours.median), 1e5/medianFloat(raw.median), ratio, verdict)
		accounting(what, ours)
		b.ReportMetric(ratio, unit)
		b.ReportMetric(per100MB(ours.proxyCPU), "proxy-cpu-ms-per-100MB-"+strings.TrimPrefix(unit, "x-direct-"))
	}
	throughput("100 MB via proxy (plain HTTP)", "x-direct-plain", plain)
	throughput("100 MB via proxy (CONNECT)", "x-direct-connect", tunnel)
	accounting("100 MB direct", raw)

	const small = "http://api.allowed.test/"
	added := func(what, unit string, ours, raw fetchResult) {
		d := ours.medianMS - raw.medianMS
		verdict := "within"
		if d > 2 {
			verdict = "OVER"
		}
		fmt.Printf("bench: %-32s proxy %6.3f ms  direct %6.3f ms  added %.3f ms  (target <= 2 ms: %s)\n",
			what, ours.medianMS, raw.medianMS, d, verdict)
		b.ReportMetric(d, unit)
	}
	added("request, kept-alive (plain)", "ms-added-plain", viaProxy("proxy", small, 300), direct("direct", small, 300))
	added("request, new CONNECT tunnel", "ms-added-connect", viaProxy("connect", small, 200), direct("fresh", small, 200))
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
// container) against the same by hand: git worktree add, docker network
// create --internal on a range of its own, docker run -d of the proxy on
// the (existing) egress network, connected to the internal one, and of
// the agent.
func BenchmarkStartAllowlist(b *testing.B) {
	e := NewEnv(b)
	e.egressConfig("api.allowed.test")
	hostGit := filepath.Join(e.Repo, ".git")
	cfgDir := filepath.Join(e.Root, "raw-proxy")
	must(b, os.MkdirAll(cfgDir, 0o755))
	must(b, os.WriteFile(filepath.Join(cfgDir, "proxy.json"), []byte(`{"listen": ":3128", "allow": [{"entry": "api.allowed.test", "source": "user config"}]}`), 0o644))
	// Both sides leave by a network that is there before they start.
	outNet := e.egressNetwork()
	runOK(b, e.Repo, nil, "docker", "network", "create", outNet)
	var ours, raw []time.Duration
	for i := 0; i < benchRounds; i++ {
		branch := "bench-" + strconv.Itoa(i)
		ours = append(ours, timeIt(b, func() {
			e.MustSandbox("start", "-d", branch, "--agent", "shell", "--", "true")
		}))

		dir := filepath.Join(e.Root, "raw", strconv.Itoa(i))
		wt := filepath.Join(dir, "worktree")
		priv := filepath.Join(dir, "git")
		home := filepath.Join(dir, "home")
		gitfile := filepath.Join(dir, "gitfile")
		must(b, os.MkdirAll(priv, 0o755))
		must(b, os.MkdirAll(home, 0o755))
		must(b, os.WriteFile(gitfile, []byte("gitdir: "+priv+"\n"), 0o644))
		rnd := make([]byte, 4)
		_, _ = rand.Read(rnd)
		name := fmt.Sprintf("git-sandbox-bench-raw-%s-%d-%s", e.RepoID(), i, hex.EncodeToString(rnd))
		inNet, proxy := name+"-net", name+"-proxy"
		b.Cleanup(func() {
			_ = exec.Command("docker", "rm", "-f", name, proxy).Run()
			_ = exec.Command("docker", "network", "rm", inNet).Run()
		})
		user := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
		label := "git-sandbox.repo=" + e.RepoID()
		raw = append(raw, timeIt(b, func() {
			runOK(b, e.Repo, nil, "git", "worktree", "add", "-q", "-b", "raw-"+strconv.Itoa(i), wt)
			runOK(b, e.Repo, nil, "docker", "network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true",
				"--subnet", fmt.Sprintf("10.214.%d.0/27", i), inNet)
			runOK(b, e.Repo, nil, "docker", "run", "-d", "--name", proxy, "--label", label, "--network", outNet,
				"--user", user, "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
				"--pids-limit", "256", "--memory", "256m", "--init",
				"-v", filepath.Join(binDir, "git-sandbox")+":/opt/git-sandbox/git-sandbox:ro", "-v", cfgDir+":/etc/git-sandbox-proxy:ro",
				testImage, "/opt/git-sandbox/git-sandbox", "__proxy", "--config", "/etc/git-sandbox-proxy/proxy.json")
			runOK(b, e.Repo, nil, "docker", "network", "connect", inNet, proxy)
			runOK(b, e.Repo, nil, "docker", "run", "-d", "--name", name, "--label", label, "--network", inNet,
				"--user", user,
				"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "256",
				"--memory", "1g", "--init", "-w", "/workspace",
				"-e", "HTTP_PROXY=http://"+proxy+":3128", "-e", "HTTPS_PROXY=http://"+proxy+":3128",
				"-v", wt+":/workspace", "-v", gitfile+":/workspace/.git:ro",
				"-v", priv+":"+priv, "-v", filepath.Join(hostGit, "objects")+":"+filepath.Join(hostGit, "objects")+":ro",
				"-v", filepath.Join(hostGit, "hooks")+":"+filepath.Join(hostGit, "hooks")+":ro",
				"-v", home+":/home/sandbox",
				testImage, "true")
		}))
	}
	report(b, "start -d allowlist (until running)", median(ours), median(raw), 1.5)
}
