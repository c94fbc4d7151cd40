package e2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testKubernetesNetworkPolicy: the test cluster enforces NetworkPolicy,
// so an allowlist sandbox's agent reaches its proxy and nothing else. A
// listener on the node's address, another Pod and the kubelet are each
// reached from a Pod that no policy holds, and each is blocked from the
// agent, whose proxy still answers; the engine probed the cluster at the
// first allowlist start and found it enforcing, and doctor says so.
func testKubernetesNetworkPolicy(t *testing.T) {
	networkPolicyHolds(t, k8sEnv(t, netpolAllow))
}

// netpolAllow is the allow list of the NetworkPolicy tests.
const netpolAllow = "allow = [\"api.allowed.test\"]"

// networkPolicyHolds shows an allowlist agent on k's engine refused the
// node, another Pod and the kubelet.
func networkPolicyHolds(t *testing.T, k *k8sTest) {
	c := k.c
	nodeIP, kubeletPort := c.Env["GIT_SANDBOX_K8S_NODE_IP"], c.Env["GIT_SANDBOX_K8S_KUBELET_PORT"]
	if nodeIP == "" || kubeletPort == "" || c.Env["GIT_SANDBOX_K8S_NETWORK_POLICY"] == "" {
		t.Fatal("the cluster's env file names no node address, kubelet port or NetworkPolicy enforcer: started by an older cluster.sh? run it again")
	}

	// (a) a listener on the node's address.
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	// (b) another Pod: git sandbox's own listener, in the proxy's image.
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "other", "namespace": k.ns, "labels": map[string]string{"app": "other"}},
		"spec": map[string]any{
			"restartPolicy": "Never", "automountServiceAccountToken": false,
			"securityContext": map[string]any{"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": true,
				"seccompProfile": map[string]any{"type": "RuntimeDefault"}},
			// The namespace enforces the restricted Pod Security Standard.
			"containers": []any{map[string]any{
				"name": "main", "image": proxyImage(t), "imagePullPolicy": "Never",
				"securityContext": map[string]any{"allowPrivilegeEscalation": false,
					"capabilities": map[string]any{"drop": []string{"ALL"}}},
				"command":        []string{"/git-sandbox", "__netprobe", "--listen", ":8080"},
				"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 8080}, "periodSeconds": 1},
			}},
		},
	}
	manifest, _ := json.Marshal(pod)
	c.MustKubectl(t, manifest, "create", "-f", "-")
	if _, err := c.Kubectl(t, nil, "wait", "-n", k.ns, "pod/other", "--for=condition=Ready", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	podIP := strings.TrimSpace(c.MustKubectl(t, nil, "get", "-n", k.ns, "pod/other", "-o", "jsonpath={.status.podIP}"))
	targets := []string{
		"node " + net.JoinHostPort(nodeIP, strings.TrimPrefix(l.Addr().String(), nodeIP+":")),
		"pod " + net.JoinHostPort(podIP, "8080"),
		"kubelet " + net.JoinHostPort(nodeIP, kubeletPort),
	}
	// Each target answers one per line: "NAME open" or "NAME closed".
	var script strings.Builder
	for _, tg := range targets {
		name, addr, _ := strings.Cut(tg, " ")
		host, port, _ := net.SplitHostPort(addr)
		script.WriteString("if timeout 5 bash -c 'exec 3<>/dev/tcp/" + host + "/" + port + "' 2>/dev/null; then echo " + name + " open; else echo " + name + " closed; fi\n")
	}
	want := func(who, got, state string) {
		t.Helper()
		for _, tg := range targets {
			name, addr, _ := strings.Cut(tg, " ")
			if !strings.Contains(got, name+" "+state+"\n") {
				t.Errorf("%s: %s (%s) is not %s:\n%s", who, name, addr, state, got)
			}
		}
	}
	// Where no policy holds, each target answers: what the agent is denied
	// is denied by the policies, not by the network being broken.
	free := c.runPod(t, k.ns, k8sPod{Name: "free", UID: 1000, Script: script.String()})
	want("a Pod no policy holds", free, "open")

	k.MustSandbox("start", "np", "-d", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--", "sleep", "600")
	probe := `host=${HTTP_PROXY#http://}; host=${host%%:*}; port=${HTTP_PROXY##*:}
exec 3<>/dev/tcp/$host/$port || { echo "no proxy"; exit 1; }
printf 'GET http://api.denied.test/ HTTP/1.1\r\nHost: api.denied.test\r\nConnection: close\r\n\r\n' >&3
head -1 <&3`
	if got := k.MustSandbox("exec", "np", "--", "bash", "-c", probe).Stdout; !strings.Contains(got, " 403 ") {
		t.Errorf("the proxy path from the agent: %q, want the proxy's 403", got)
	}
	want("the agent", k.MustSandbox("exec", "np", "--", "bash", "-c", script.String()).Stdout, "closed")

	// The engine found the cluster enforcing at the first allowlist start,
	// and kept the answer.
	files, _ := filepath.Glob(filepath.Join(k.Home, ".local", "state", "git-sandbox", "engines", "kubernetes", "networkpolicy-*.json"))
	if len(files) != 1 {
		t.Fatalf("the probe's answers: %q, want one", files)
	}
	var en struct {
		Namespace string
		Enforced  bool
		Checked   time.Time
		OpenFor   time.Duration `json:"open_for"`
	}
	b, err := os.ReadFile(files[0])
	if err != nil || json.Unmarshal(b, &en) != nil || !en.Enforced || en.Namespace != k.ns || en.OpenFor < 0 {
		t.Errorf("the probe's answer: %s (%v), want enforced in %s, and how long a new Pod was open", b, err, k.ns)
	}
	t.Logf("the probe's new Pod could connect for %v before the plugin's rules were in place", en.OpenFor)
	// doctor probes again and says so.
	if r := k.Sandbox("doctor"); !strings.Contains(r.Stdout, "NetworkPolicy enforced") {
		t.Errorf("doctor does not say the cluster enforces NetworkPolicy:\n%s", r)
	}
	k.MustSandbox("rm", "--force", "np")
	k.assertNothingLeft(t)
	if left := c.MustKubectl(t, nil, "get", "pods,networkpolicies", "-n", k.ns, "-l", "git-sandbox.io/probe", "-o", "name"); left != "" {
		t.Errorf("the probe left objects:\n%s", left)
	}
}
