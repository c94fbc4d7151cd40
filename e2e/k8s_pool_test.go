package e2e

import (
	"strings"
	"testing"
	"time"
)

// poolPods lists the Pods of the engine's warm pool: name and phase.
func (k *k8sTest) poolPods(t testing.TB) map[string]string {
	t.Helper()
	out := k.c.MustKubectl(t, nil, "get", "pods", "-n", k.ns, "-l", "git-sandbox.io/pool",
		"-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}`)
	pods := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, phase, ok := strings.Cut(line, " "); ok {
			pods[name] = phase
		}
	}
	return pods
}

// waitPoolReady waits until the pool has n Pods, all running.
func (k *k8sTest) waitPoolReady(t testing.TB, n int) map[string]string {
	t.Helper()
	var pods map[string]string
	Eventually(t, 120*time.Second, "the warm pool's helpers running", func() bool {
		pods = k.poolPods(t)
		for _, phase := range pods {
			if phase != "Running" {
				return false
			}
		}
		return len(pods) == n
	})
	return pods
}

// testKubernetesWarmPool: with warm_pods = 1 the first start fills the
// pool, the second takes its helper (empty until then, the sandbox's from
// then on) and works as any sandbox, the pool is filled again, doctor and
// config show say what it reserves, rm removes a taken helper with its
// sandbox and image prune empties the pool.
func testKubernetesWarmPool(t *testing.T) {
	k := k8sEnv(t, "")
	k.engineExtra = "warm_pods = 1\n"
	k.config("", "1h")
	if out := k.MustSandbox("config", "show").Stdout; !strings.Contains(out, "warm_pods = 1 reserves 1 helper Pods requesting 32Mi of memory and 10m CPU each, and 4 claims of 1Gi") {
		t.Errorf("config show does not say what the pool reserves:\n%s", out)
	}
	k.MustSandbox("start", "-d", "first", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "600")
	var pooled string
	for name := range k.waitPoolReady(t, 1) {
		pooled = name
	}
	// Nothing of a sandbox is in a helper of the pool.
	if out := k.c.MustKubectl(t, nil, "exec", "-n", k.ns, pooled, "--", "sh", "-c", "ls -A /workspace /sandbox/git /sandbox/home /sandbox-state | grep -v : | grep . || echo empty"); strings.TrimSpace(out) != "empty" {
		t.Errorf("a helper of the pool holds files before a start took it:\n%s", out)
	}
	if out := k.Sandbox("doctor").Stdout; !strings.Contains(out, "warm pool: 1 of 1 ready") {
		t.Errorf("doctor does not report the pool:\n%s", out)
	}

	k.MustSandbox("start", "-d", "second", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo pooled >made.txt; sleep 600")
	labels := k.c.MustKubectl(t, nil, "get", "pod", "-n", k.ns, pooled, "-o", "jsonpath={.metadata.labels}")
	if strings.Contains(labels, "git-sandbox.io/pool") || !strings.Contains(labels, "git-sandbox.io/sandbox") {
		t.Fatalf("the second start did not take the pool's helper %s: its labels are %s", pooled, labels)
	}
	Eventually(t, 60*time.Second, "the agent's file in a snapshot", func() bool {
		k.Sandbox("rescue", "snapshot", "second")
		return strings.Contains(k.Sandbox("diff", "second").Stdout, "made.txt")
	})
	refilled := k.waitPoolReady(t, 1)
	if _, same := refilled[pooled]; same {
		t.Errorf("the taken helper %s is still counted in the pool", pooled)
	}

	k.MustSandbox("rm", "--force", "second")
	if _, err := k.c.Kubectl(t, nil, "get", "pod", "-n", k.ns, pooled); err == nil {
		Eventually(t, 60*time.Second, "the taken helper removed with its sandbox", func() bool {
			_, err := k.c.Kubectl(t, nil, "get", "pod", "-n", k.ns, pooled)
			return err != nil
		})
	}
	k.MustSandbox("rm", "--force", "first")
	if r := k.MustSandbox("image", "prune"); !strings.Contains(r.Stdout+r.Stderr, "removed 1 ready helpers of the warm pool on engine k8s") {
		t.Errorf("image prune did not empty the pool:\n%s%s", r.Stdout, r.Stderr)
	}
	k.assertNothingLeft(t)
}
