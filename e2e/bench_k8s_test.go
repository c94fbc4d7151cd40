package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchPod is a Pod as a user would write it by hand to run an agent on a
// claim: the same image, user, hardening and limits as the engine's.
func benchPod(name, claim, image string, uid uint32, cmd string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{
"restartPolicy":"Never","automountServiceAccountToken":false,"enableServiceLinks":false,
"securityContext":{"runAsUser":%d,"runAsGroup":%d,"runAsNonRoot":true,"fsGroup":%d,"seccompProfile":{"type":"RuntimeDefault"}},
"volumes":[{"name":"w","persistentVolumeClaim":{"claimName":%q}}],
"containers":[{"name":"main","image":%q,"imagePullPolicy":"IfNotPresent","command":["sh","-c",%q],"workingDir":"/workspace",
"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},
"resources":{"limits":{"memory":"1Gi"}},
"volumeMounts":[{"name":"w","mountPath":"/workspace"}]}]}}`, name, uid, uid, uid, claim, image, cmd))
}

// waitQuiet waits until the test's namespace holds no Pod and no claim,
// and no volume of a claim of it is left.
func (k *k8sTest) waitQuiet(tb testing.TB) {
	tb.Helper()
	Eventually(tb, 2*time.Minute, "the round's Pods, claims and volumes gone", func() bool {
		out, err := k.c.Kubectl(tb, nil, "get", "pods,pvc", "-n", k.ns, "-o", "name")
		if err != nil || strings.TrimSpace(out) != "" {
			return false
		}
		pvs, err := k.c.Kubectl(tb, nil, "get", "pv", "-o", "jsonpath={range .items[*]}{.spec.claimRef.namespace}{\"\\n\"}{end}")
		return err == nil && !slices.Contains(strings.Fields(pvs), k.ns)
	})
}

func benchClaim(name string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":%q},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`, name))
}

// BenchmarkKubernetesStart: `git sandbox start -d --engine k8s` of a
// 5,000-file repository until the agent's Pod runs, against doing it by
// hand with kubectl: a claim, a Pod on it, `git archive | kubectl exec -i
// … tar x` into it, and the agent's Pod on the claim, running. The sides
// take turns going first, and each round starts once the last one's Pods,
// claims and volumes are gone (before, each start of ours ran while both
// sides of the round before were torn down).
func BenchmarkKubernetesStart(b *testing.B) { kubernetesStartBench(b, 0) }

// BenchmarkKubernetesStartWarm: the same start, from the engine's warm pool
// (warm_pods = 1): its helper is scheduled and running with its claims
// bound before the start, which only ships the files and starts the agent.
// Each round waits for the pool to be full again (its Pod running) before
// either side is timed, so the pool's top-up loads neither.
func BenchmarkKubernetesStartWarm(b *testing.B) { kubernetesStartBench(b, 1) }

func kubernetesStartBench(b *testing.B, warm int) {
	k := k8sEnv(b, "")
	if warm > 0 {
		k.engineExtra = fmt.Sprintf("warm_pods = %d\n", warm)
	}
	// No interval snapshots of the sandbox's own while it is timed.
	k.config("", "1h")
	if warm > 0 {
		// The first start fills the pool.
		k.MustSandbox("start", "-d", "fill", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "600")
		k.MustSandbox("rm", "--force", "fill")
	}
	bigRepo(b, k.Env, 5_000)
	kubectl := func(stdin []byte, args ...string) string {
		out, err := k.c.Kubectl(b, stdin, append([]string{"-n", k.ns}, args...)...)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	var ours, raw []time.Duration
	for i := 0; i < benchRounds; i++ {
		branch := "bk-" + strconv.Itoa(i)
		claim, helper, agent := fmt.Sprintf("raw-%d", i), fmt.Sprintf("raw-helper-%d", i), fmt.Sprintf("raw-agent-%d", i)
		oursSide := func() {
			if warm > 0 {
				k.waitPoolReady(b, warm)
			}
			ours = append(ours, timeIt(b, func() {
				benchSandbox(b, k.Env, "start", "-d", branch, "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "600")
			}))
		}
		rawSide := func() {
			if warm > 0 {
				k.waitPoolReady(b, warm)
			}
			raw = append(raw, timeIt(b, func() {
				kubectl(benchClaim(claim), "create", "-f", "-")
				kubectl(benchPod(helper, claim, baseImage, k.Cred.uid, "sleep 600"), "create", "-f", "-")
				kubectl(nil, "wait", "pod/"+helper, "--for=condition=Ready", "--timeout=120s")
				// git archive as the repository's owner (git refuses root in
				// another user's repository), kubectl as root.
				tarball := filepath.Join(k.Root, claim+".tar")
				if r := k.Run(k.Repo, nil, "git", "archive", "-o", tarball, "HEAD"); r.Code != 0 {
					b.Fatalf("git archive: %s", r)
				}
				runOK(b, k.Repo, nil, "sh", "-c", fmt.Sprintf("%s --kubeconfig %s -n %s exec -i %s -- tar -x -C /workspace <%s", k.c.KubectlPath, k.c.Kubeconfig, k.ns, helper, tarball))
				kubectl(benchPod(agent, claim, baseImage, k.Cred.uid, "sleep 600"), "create", "-f", "-")
				kubectl(nil, "wait", "pod/"+agent, "--for=condition=Ready", "--timeout=120s")
			}))
		}
		// The sides take turns going first: the second runs beside the
		// first one's running Pods.
		if i%2 == 0 {
			oursSide()
			rawSide()
		} else {
			rawSide()
			oursSide()
		}
		// One round's Pods at a time: the node's memory is requested in
		// full by each.
		k.MustSandbox("rm", "--force", branch)
		kubectl(nil, "delete", "pod", helper, agent, "--grace-period=0", "--force", "--wait=false")
		kubectl(nil, "delete", "pvc", claim, "--wait=false")
		if warm == 0 {
			// The next round starts on a quiet cluster: not while this
			// one's Pods are torn down and its volumes deleted.
			k.waitQuiet(b)
		}
	}
	what := "kubernetes start, 5k files"
	if warm > 0 {
		what += ", from the warm pool"
	}
	report(b, what, median(ours), median(raw), 1.5)
}

// BenchmarkKubernetesSnapshot: a snapshot round trip of 200 changed and
// added files in the 100,000-file repository on the cluster, against the
// same by hand: git add -A and write-tree in the helper's Pod with a copy
// of its index, then pack-objects there through kubectl exec into git
// index-pack here.
func BenchmarkKubernetesSnapshot(b *testing.B) {
	k := k8sEnv(b, "")
	// No interval snapshots of the sandbox's own while it is timed.
	k.config("", "1h")
	bigRepo(b, k.Env, 100_000)
	began := time.Now()
	k.MustSandbox("start", "-d", "snap", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sleep", "3600")
	fmt.Printf("bench: kubernetes start of 100k files: %.1f ms\n", ms(time.Since(began)))
	podOf := func(role string) string {
		out, err := k.c.Kubectl(b, nil, "get", "pods", "-n", k.ns, "-l", "git-sandbox.io/role="+role, "-o", "name")
		if err != nil || strings.TrimSpace(out) == "" {
			b.Fatalf("the %s Pod: %v %q", role, err, out)
		}
		return strings.TrimPrefix(strings.Fields(out)[0], "pod/")
	}
	agent, helper := podOf("agent"), podOf("helper")
	exec := func(pod, script string) string {
		out, err := k.c.Kubectl(b, nil, "exec", "-n", k.ns, pod, "--", "sh", "-c", script)
		if err != nil {
			b.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	touch := func(round int) {
		exec(agent, fmt.Sprintf(`mkdir -p added; i=0; while [ $i -lt 100 ]; do n=$(( (i*7) %% 1000 )); echo "changed $i %d" >src/d$(printf %%03d $n)/f$(printf %%06d $n).txt; echo "new $i %d" >added/n$i-%d.txt; i=$((i+1)); done`, round, round, round))
	}
	rawRepo := filepath.Join(k.Root, "rawrepo")
	runOK(b, "", nil, "git", "init", "-q", "--bare", rawRepo)
	must(b, os.WriteFile(filepath.Join(rawRepo, "objects", "info", "alternates"), []byte(filepath.Join(k.Repo, ".git", "objects")+"\n"), 0o644))
	// The environment with git's user config left out; HOME stays (without it
	// kubectl keeps its discovery cache in the working directory).
	gitEnv := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	var ours, raw []time.Duration
	for round := 0; round < benchRounds; round++ {
		touch(2 * round)
		ours = append(ours, timeIt(b, func() {
			r := k.Run(k.Repo, []string{os.Getenv("BENCH_TRACE")}, "git", "sandbox", "rescue", "snapshot", "snap")
			if r.Code != 0 {
				b.Fatalf("snapshot: %s", r)
			}
			if os.Getenv("BENCH_TRACE") != "" {
				fmt.Print(r.Stderr)
			}
		}))
		touch(2*round + 1)
		prev := k.Git("rev-parse", "refs/sandbox/snap/rescue^{tree}")
		raw = append(raw, timeIt(b, func() {
			tree := exec(helper, "cp /sandbox-state/index /sandbox-state/raw.index && cd /workspace && GIT_DIR=/sandbox-state/scratch GIT_INDEX_FILE=/sandbox-state/raw.index GIT_WORK_TREE=/workspace git add -A && GIT_DIR=/sandbox-state/scratch GIT_INDEX_FILE=/sandbox-state/raw.index git write-tree")
			runOK(b, "", gitEnv, "sh", "-c", fmt.Sprintf("%s --kubeconfig %s -n %s exec %s -- sh -c 'printf \"%%s\\n--not\\n%%s\\n\" %s %s | GIT_DIR=/sandbox-state/scratch git pack-objects --revs --stdout -q' | git --git-dir=%s index-pack --stdin --strict >/dev/null",
				k.c.KubectlPath, k.c.Kubeconfig, k.ns, helper, tree, prev, rawRepo))
		}))
	}
	k.MustSandbox("rm", "--force", "snap")
	report(b, "kubernetes snapshot, 100k, 200 changed", median(ours), median(raw), 1.5)
}
