package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The Docker engine under a running sandbox behind an allow list restarts
// (a private second engine the test owns, its dockerd stopped with SIGTERM
// as a service manager does and started again; copy mode): ps shows it
// exited; start resumes it on the networks it had, with its proxy made
// again (one proxy container, running) that answers the agent's requests;
// the snapshots go on; rm leaves no container, volume, network or
// supervisor behind.
func TestEngineRestartAllowlist(t *testing.T) {
	t.Setenv("ENGINE2_DATA_TMPFS", "no") // the data-root must outlive dockerd
	eng := newEngine2(t, baseImage)
	e := NewEnv(t)
	egressNet := "git-sandbox-e2e-egress-" + e.RepoID() // the engine goes with the test
	e.WriteConfig("base_image = %q\negress_network = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n",
		baseImage, egressNet, eng.Host)
	// Its agent goes through its proxy every second to a server on the
	// engine's egress network.
	e.MustSandbox("start", "net", "-d", "--engine", "two", "--agent", "shell", "--allow", "api.allowed.test", "--", "bash", "-c", restartNetAgent)
	startUpstreamOn(t, eng.Host, egressNet, "api.allowed.test")
	for _, f := range []string{"label=git-sandbox.branch=net", "name=" + egressNet} {
		forwardWithin(t, eng.Host, f)
	}
	before := engineRestartProxyState(t, e, eng.Host)
	run := netAgentAnswered(t, e, "")
	Eventually(t, 2*time.Minute, "interval snapshots", func() bool { return len(e.Snapshots("net")) >= 2 })
	if err := runEngine2(nil, "restart", eng.Dir); err != nil {
		t.Fatal(err)
	}
	Eventually(t, time.Minute, "net not running in ps", func() bool { s := e.PsOf("net").State; return s != "running" && s != "paused" })
	snaps := len(e.Snapshots("net"))
	e.MustSandbox("start", "net", "--rerun", "-d")
	netAgentAnswered(t, e, run)
	if after := engineRestartProxyState(t, e, eng.Host); after.networks != before.networks || after.proxies != 1 || after.running != 1 {
		t.Errorf("after the restart and start: %+v; before the restart: %+v (want the networks it had, one proxy, running)", after, before)
	}
	e.snapshotsAfter(t, "net", snaps+1)
	e.MustSandbox("rm", "--force", "net")
	if left := containersOn(t, eng.Host, e.RepoID()); len(left) > 0 {
		t.Errorf("containers left: %v", left)
	}
	for _, kind := range []string{"volume", "network"} {
		if left := strings.Fields(dockerAt(t, eng.Host, kind, "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID())); len(left) > 0 {
			t.Errorf("%ss left: %v", kind, left)
		}
	}
	if pid := e.supervisorOf("net"); pid != 0 {
		t.Errorf("a supervisor (%d) still runs after rm", pid)
	}
}

// snapshotsAfter waits up to two minutes until branch has more than n
// snapshots, and fails the test with its supervisor's log if not.
func (e *Env) snapshotsAfter(t *testing.T, branch string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for len(e.Snapshots(branch)) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no new snapshot for two minutes after the restart\n%s", branch, e.sandboxDiag(branch))
		}
		time.Sleep(time.Second)
	}
}

// restartNetAgent is TestEngineRestartAllowlist's agent: a counter every
// second and a request through its proxy, whose status line it keeps in
// status.txt after the name of its run.
const restartNetAgent = `p=${http_proxy#http://}; ph=${p%:*}; pp=${p##*:}; run=$(date +%s%N); i=0
while :; do
	i=$((i+1)); echo $i > n.new; mv n.new n.txt
	if exec 3<>/dev/tcp/$ph/$pp; then
		printf 'GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n' >&3
		echo "$run $(timeout 5 head -n 1 <&3 | tr -d '\r')" > status.txt
		exec 3<&-
	fi
	sleep 1
done`

// netAgentAnswered waits until the agent of TestEngineRestartAllowlist, in
// a run other than notRun, got an answer through its proxy, and returns
// the run.
func netAgentAnswered(t *testing.T, e *Env, notRun string) string {
	t.Helper()
	var run, last string
	Eventually(t, 2*time.Minute, "an answer through net's proxy", func() bool {
		last = strings.TrimSpace(e.Sandbox("exec", "net", "--", "cat", "status.txt").Stdout)
		r, status, _ := strings.Cut(last, " ")
		run = r
		return r != "" && r != notRun && strings.HasSuffix(status, " 200 OK")
	})
	t.Logf("net: %s", last)
	return run
}

// proxyState is what an engine holds for TestEngineRestartAllowlist's
// sandbox: its networks, and its proxy containers (all, running).
type proxyState struct {
	networks         string
	proxies, running int
}

func engineRestartProxyState(t *testing.T, e *Env, host string) proxyState {
	t.Helper()
	labels := []string{"--filter", "label=git-sandbox.repo=" + e.RepoID(), "--filter", "label=git-sandbox.branch=net"}
	nets := strings.Fields(dockerAt(t, host, append([]string{"network", "ls", "-q"}, labels...)...))
	slices.Sort(nets)
	proxy := append(labels, "--filter", "label=git-sandbox.role=proxy")
	return proxyState{
		networks: strings.Join(nets, " "),
		proxies:  len(strings.Fields(dockerAt(t, host, append([]string{"ps", "-aq"}, proxy...)...))),
		running:  len(strings.Fields(dockerAt(t, host, append([]string{"ps", "-q"}, proxy...)...))),
	}
}

// startUpstreamOn runs the test upstream server on an engine that does not
// see this machine's files (the binary is copied in), under a name on a
// network; it comes back when its engine restarts.
func startUpstreamOn(t *testing.T, host, network, alias string) {
	t.Helper()
	name := "git-sandbox-e2e-upstream-" + alias
	dockerAt(t, host, "create", "--name", name, "--network", network, "--network-alias", alias, "--restart", "unless-stopped",
		"--user", "65534:65534", "-e", "UPSTREAM_NAME="+alias, baseImage, "/upstream")
	dockerAt(t, host, "cp", filepath.Join(binDir, "test-upstream"), name+":/upstream")
	dockerAt(t, host, "start", name)
}

// forwardWithin lets the containers on the networks of an engine that
// filter (docker network ls --filter) selects reach one another until the
// test ends. The
// second engine makes no firewall rules (--iptables=false), and with the
// bridge netfilter on, this machine's FORWARD chain (the main daemon's,
// policy DROP) drops what its bridges forward: a rule in the chain the
// main daemon leaves to its user (DOCKER-USER) accepts what stays within
// the one bridge. A network keeps its bridge when the engine restarts.
func forwardWithin(t *testing.T, host, filter string) {
	t.Helper()
	ids := strings.Fields(dockerAt(t, host, "network", "ls", "-q", "--no-trunc", "--filter", filter))
	if len(ids) == 0 {
		t.Fatalf("no network %s on the engine", filter)
	}
	for _, id := range ids {
		br := "br-" + id[:12]
		rule := []string{"DOCKER-USER", "-i", br, "-o", br, "-j", "ACCEPT"}
		if out, err := exec.Command("iptables", append([]string{"-I"}, rule...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables -I %v (the test needs root): %v %s", rule, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("iptables", append([]string{"-D"}, rule...)...).CombinedOutput(); err != nil {
				t.Errorf("iptables -D %v: %v %s", rule, err, out)
			}
		})
	}
}

// Two networks of the egress network's name (two creates that raced on
// an engine that lets them, Docker before 25): the engine refuses a
// container on that name, so start fails saying which name and how to
// mend it, and leaves nothing behind; once one of the two is removed,
// start works.
func TestTwoNetworksOfTheEgressName(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	name := e.egressNetwork()
	e.WriteConfig("base_image = %q\negress_network = %q\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage, name)
	var ids []string
	for range 2 {
		id, refused := createNetworkUnchecked(t, name)
		if refused {
			// Docker 25 and later make a network's name unique: the state
			// this test is about cannot arise there.
			notRunHere(t, "this engine refuses a second network called "+name, "run it against Docker 24 or older, as Debian's docker.io is")
		}
		ids = append(ids, id)
		t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", id).Run() })
	}
	r := e.Sandbox("start", "t1", "-d", "--agent", "shell", "--allow", "api.allowed.test", "--", "sleep", "600")
	if r.Code == 0 || !strings.Contains(r.Stderr, "more than one network is called "+name) || !strings.Contains(r.Stderr, "docker network rm") {
		t.Fatalf("start with two networks of the egress name: want the refusal with a hint, got %s", r)
	}
	if left := e.sandboxContainers("t1", "proxy"); len(left) > 0 {
		t.Errorf("proxy containers left: %v", left)
	}
	if left := e.sandboxNetworks("t1"); len(left) > 0 {
		t.Errorf("networks left: %v", left)
	}
	if ps := e.MustSandbox("ps").Stdout; strings.Contains(ps, "t1") {
		t.Errorf("the failed start left a sandbox:\n%s", ps)
	}
	runOK(t, "", nil, "docker", "network", "rm", ids[1])
	e.MustSandbox("start", "t1", "-d", "--agent", "shell", "--allow", "api.allowed.test", "--", "sleep", "600")
	e.MustSandbox("rm", "--force", "t1")
}

// createNetworkUnchecked makes a network called name through the Engine
// API without the duplicate check every client asks for (as a create that
// raced another does); refused is true when the engine refused it.
func createNetworkUnchecked(t *testing.T, name string) (id string, refused bool) {
	t.Helper()
	sock := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		sock = h
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	body := fmt.Sprintf(`{"Name":%q,"CheckDuplicate":false}`, name)
	resp, err := c.Post("http://docker/v1.41/networks/create", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	defer resp.Body.Close()
	var out struct{ ID, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	switch {
	case resp.StatusCode == http.StatusConflict:
		return "", true
	case resp.StatusCode != http.StatusCreated || out.ID == "":
		t.Fatalf("create network %s: %s %s", name, resp.Status, out.Message)
	}
	return out.ID, false
}
