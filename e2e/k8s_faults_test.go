package e2e

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The node's container runtime restarts under a running sandbox behind an
// allow list (the test cluster's containerd, stopped with SIGTERM as a
// service manager does and started again: cluster.sh restart-containerd):
// the agent's and the proxy's containers run on (they belong to their
// shims, which outlive containerd), so nothing restarts and no work is
// lost; ps shows the sandbox running, the snapshots go on, the agent's
// requests through its proxy are answered again, its last state is in a
// snapshot once it stops, and rm leaves nothing. It runs alone:
// TestKubernetes runs its tests one after another (a restart of the
// runtime fails any exec or Pod start of another test for a moment).
func testKubernetesRuntimeRestart(t *testing.T) {
	k := k8sEnv(t, "allow = [\"api.allowed.test\"]")
	k.MustSandbox("start", "rt", "-d", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--",
		"sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > n.new; mv n.new n.txt; sleep 1; done")
	Eventually(t, 2*time.Minute, "interval snapshots", func() bool { return len(k.Snapshots("rt")) >= 2 })
	probe := `host=${HTTP_PROXY#http://}; host=${host%%:*}; port=${HTTP_PROXY##*:}
exec 3<>/dev/tcp/$host/$port || { echo "no proxy"; exit 1; }
printf 'GET http://api.denied.test/ HTTP/1.1\r\nHost: api.denied.test\r\nConnection: close\r\n\r\n' >&3
head -1 <&3`
	if got := k.MustSandbox("exec", "rt", "--", "bash", "-c", probe).Stdout; !strings.Contains(got, " 403 ") {
		t.Fatalf("a denied host through the proxy before the restart: %q, want 403", got)
	}
	before := k.runtimeRestartPods(t)
	counter := func() int {
		n, _ := strconv.Atoi(strings.TrimSpace(k.Sandbox("exec", "rt", "--", "cat", "n.txt").Stdout))
		return n
	}
	wrote := counter()
	snaps := len(k.Snapshots("rt"))
	began := time.Now()
	if out, err := exec.Command(clusterScript(), "restart-containerd").CombinedOutput(); err != nil {
		t.Fatalf("restart the cluster's containerd: %v\n%s", err, out)
	}
	t.Logf("containerd restarted in %s", time.Since(began).Round(time.Millisecond))
	Eventually(t, 2*time.Minute, "snapshots after the restart", func() bool { return len(k.Snapshots("rt")) > snaps+1 })
	// ps says paused while a snapshot reads the agent's files.
	Eventually(t, 30*time.Second, "ps to say running after the runtime restarted", func() bool { return k.PsOf("rt").State == "running" })
	if after := k.runtimeRestartPods(t); after != before {
		t.Errorf("the Pods after the restart: %s; before: %s (want the same, nothing restarted)", after, before)
	}
	if n := counter(); n <= wrote {
		t.Errorf("the agent's counter is %d after the restart, %d before: it did not run on", n, wrote)
	}
	Eventually(t, time.Minute, "an answer through the proxy after the restart", func() bool {
		return strings.Contains(k.Sandbox("exec", "rt", "--", "bash", "-c", probe).Stdout, " 403 ")
	})
	k.MustSandbox("stop", "rt")
	n := strings.TrimSpace(k.Git("show", "refs/sandbox/rt/rescue:n.txt"))
	if v, err := strconv.Atoi(n); err != nil || v <= wrote {
		t.Errorf("the stop snapshot holds n.txt = %q, the agent had written %d before the restart", n, wrote)
	}
	k.MustSandbox("rm", "--force", "rt")
	k.assertNothingLeft(t)
}

// runtimeRestartPods names the sandbox's Pods with their uid and their
// containers' restart counts.
func (k *k8sTest) runtimeRestartPods(t *testing.T) string {
	t.Helper()
	var out []string
	for _, role := range []string{"agent", "proxy"} {
		for _, p := range k.pods(t, "git-sandbox.io/role="+role) {
			meta := p["metadata"].(map[string]any)
			restarts := 0
			st, _ := p["status"].(map[string]any)
			cs, _ := st["containerStatuses"].([]any)
			for _, c := range cs {
				if n, ok := c.(map[string]any)["restartCount"].(float64); ok {
					restarts += int(n)
				}
			}
			out = append(out, fmt.Sprintf("%s %s %s restarts %d", role, meta["name"], meta["uid"], restarts))
		}
	}
	if len(out) != 2 {
		t.Fatalf("the sandbox's Pods: %q, want an agent and a proxy", out)
	}
	return strings.Join(out, "; ")
}
