package e2e

// The Kubernetes engine against the real test cluster (e2e/k8s): sandboxes
// as Pods, their files in claims, snapshots back through exec streams.
// git sandbox runs as a non-root test user (its Pods run as that uid), with
// a kubeconfig of its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/enginetest"
	"github.com/git-sandbox/git-sandbox/container/kube"
)

// k8sTest is a repository whose user config has the test cluster as
// engine "k8s", in a namespace of the test's own.
type k8sTest struct {
	*Env
	c  *k8sCluster
	ns string
	// kubeconfig is the test user's copy of the admin kubeconfig.
	kubeconfig string
	// runtimeClass is the engine's runtime_class ("": the cluster's runc).
	runtimeClass string
	// engineExtra is more of the engine's [[engine]] table.
	engineExtra string
	// image is the engine's image (baseImage, loaded into the node, when
	// "").
	image string
}

// engineConfig is the [[engine]] table of the test cluster.
func (k *k8sTest) engineConfig(maxSandboxes int) string {
	class := k.runtimeClass
	if class == "" {
		class = "runc"
	}
	image := k.image
	if image == "" {
		image = baseImage
	}
	return fmt.Sprintf("[[engine]]\nname = \"k8s\"\nkind = \"kubernetes\"\nkubeconfig = %q\nnamespace = %q\nimage = %q\nruntime_class = %q\nvolume_size = \"1Gi\"\nmax_sandboxes = %d\n%s",
		k.kubeconfig, k.ns, image, class, maxSandboxes, k.engineExtra)
}

var k8sImages sync.Map

// k8sEnv sets up a k8sTest; extra is more user config (top-level keys).
func k8sEnv(t testing.TB, extra string) *k8sTest {
	t.Helper()
	return k8sEnvOn(t, extra, "")
}

// k8sEnvOn is k8sEnv with the engine's Pods in a runtime class ("": the
// cluster's runc).
func k8sEnvOn(t testing.TB, extra, runtimeClass string) *k8sTest {
	t.Helper()
	c := startCluster(t)
	// The sandboxes' image, and git sandbox's own proxy image (the nodes
	// never pull it: it is loaded, as a user without a registry would).
	for _, img := range []string{baseImage, proxyImage(t)} {
		if _, done := k8sImages.Load(img); !done {
			c.LoadImage(t, img)
			k8sImages.Store(img, true)
		}
	}
	ns := c.Namespace(t)
	cred := testUser(t)
	root := t.TempDir()
	for p := root; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		must(t, os.Chmod(p, 0o755))
	}
	e := newEnvAt(t, root, cred)
	kc := filepath.Join(root, "kubeconfig")
	must(t, os.WriteFile(kc, []byte(c.MustKubectl(t, nil, "config", "view", "--raw", "--flatten")), 0o600))
	must(t, os.Chown(kc, int(cred.uid), int(cred.gid)))
	k := &k8sTest{Env: e, c: c, ns: ns, kubeconfig: kc, runtimeClass: runtimeClass}
	k.config(extra, "1s")
	return k
}

// config writes the user config: extra (top-level keys), the interval of
// the sandboxes' snapshots, and the cluster as engine "k8s".
func (k *k8sTest) config(extra, interval string) {
	k.WriteConfig("base_image = %q\n%s\n[rescue]\ninterval = %q\n[limits]\nmemory = \"1g\"\npids = 256\n\n%s", baseImage, extra, interval, k.engineConfig(0))
}

// objects lists the names of the engine's objects of a kind in the
// test's namespace.
func (k *k8sTest) objects(t testing.TB, kind string) []string {
	t.Helper()
	out := k.c.MustKubectl(t, nil, "get", kind, "-n", k.ns, "-l", "git-sandbox.io/managed=1", "-o", "name")
	return strings.Fields(out)
}

// pods returns the engine's Pods as kubectl prints them.
func (k *k8sTest) pods(t testing.TB, selector string) []map[string]any {
	t.Helper()
	var list struct{ Items []map[string]any }
	must(t, json.Unmarshal([]byte(k.c.MustKubectl(t, nil, "get", "pods", "-n", k.ns, "-l", selector, "-o", "json")), &list))
	return list.Items
}

// assertNothingLeft fails when a Pod, record or claim of the engine is
// left in the namespace.
func (k *k8sTest) assertNothingLeft(t *testing.T) {
	t.Helper()
	Eventually(t, 60*time.Second, "no Pod, record or claim left", func() bool {
		return len(k.objects(t, "pods"))+len(k.objects(t, "configmaps"))+len(k.objects(t, "pvc")) == 0
	})
}

// assertHardened checks every Pod's spec as the cluster holds it.
func assertHardened(t *testing.T, pods []map[string]any, uid float64) {
	t.Helper()
	if len(pods) == 0 {
		t.Fatal("no Pods to check")
	}
	for _, p := range pods {
		name := p["metadata"].(map[string]any)["name"]
		spec := p["spec"].(map[string]any)
		if psc, _ := spec["securityContext"].(map[string]any); psc["runAsUser"] != uid || psc["runAsNonRoot"] != true {
			t.Errorf("Pod %s: security context %v", name, psc)
		}
		if spec["automountServiceAccountToken"] != false || spec["enableServiceLinks"] != false {
			t.Errorf("Pod %s: service-account token or service links: %v %v", name, spec["automountServiceAccountToken"], spec["enableServiceLinks"])
		}
		for _, v := range spec["volumes"].([]any) {
			vol := v.(map[string]any)
			if _, ok := vol["persistentVolumeClaim"]; !ok {
				t.Errorf("Pod %s has a volume that is not a claim: %v", name, vol)
			}
			if _, ok := vol["hostPath"]; ok {
				t.Errorf("Pod %s mounts a host path: %v", name, vol)
			}
		}
		for _, c := range spec["containers"].([]any) {
			ctr := c.(map[string]any)
			sc, _ := ctr["securityContext"].(map[string]any)
			caps, _ := sc["capabilities"].(map[string]any)
			drop, _ := caps["drop"].([]any)
			seccomp, _ := sc["seccompProfile"].(map[string]any)
			if sc["runAsUser"] != uid || sc["runAsNonRoot"] != true || sc["allowPrivilegeEscalation"] != false ||
				sc["privileged"] != false || len(drop) != 1 || drop[0] != "ALL" || seccomp["type"] != "RuntimeDefault" {
				t.Errorf("Pod %s container %v: security context %v", name, ctr["name"], sc)
			}
			for _, m := range ctr["volumeMounts"].([]any) {
				if strings.Contains(m.(map[string]any)["mountPath"].(string), "serviceaccount") {
					t.Errorf("Pod %s mounts a service-account token", name)
				}
			}
		}
	}
}

// assertRequests checks what the Pods ask the scheduler for: the agent
// 256 MiB and a tenth of a CPU (the engine's defaults), the helper 32 MiB
// and a hundredth, each limited by [limits] (memory = "1g").
func assertRequests(t *testing.T, pods []map[string]any) {
	t.Helper()
	want := map[string][2]string{"agent": {"256Mi", "100m"}, "helper": {"32Mi", "10m"}}
	seen := map[string]bool{}
	for _, p := range pods {
		meta := p["metadata"].(map[string]any)
		role, _ := meta["labels"].(map[string]any)["git-sandbox.io/role"].(string)
		w, ok := want[role]
		if !ok {
			continue
		}
		seen[role] = true
		res, _ := p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["resources"].(map[string]any)
		req, _ := res["requests"].(map[string]any)
		lim, _ := res["limits"].(map[string]any)
		if req["memory"] != w[0] || req["cpu"] != w[1] || lim["memory"] != "1Gi" {
			t.Errorf("Pod %s (%s): requests %v, limits %v; want %v and a 1Gi memory limit", meta["name"], role, req, lim, w)
		}
	}
	for role := range want {
		if !seen[role] {
			t.Errorf("no %s Pod to check the requests of", role)
		}
	}
}

func testKubernetesEngineLifecycle(t *testing.T) {
	k := k8sEnv(t, "")
	k.WriteFile("src/old.txt", "old\n")
	k.Git("add", "src/old.txt")
	k.Git("commit", "-q", "-m", "old file")

	agent := `echo "status-at-start:[$(git status --porcelain)]"
echo "head:$(git rev-parse HEAD)"
echo "uid:$(id -u) token:$(test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo yes || echo no)"
echo new >new.txt
echo more >>README.md
rm src/old.txt
git add new.txt && git commit -q -m "agent commit" && echo "committed:$(git rev-parse HEAD)"`
	r := k.MustSandbox("start", "t1", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	head := k.Git("rev-parse", "main")
	// The Pods run as the engine's uid (run_as_user, 1000 by default), not
	// as the caller's.
	uid := kube.DefaultRunAs
	if int(k.Cred.uid) == uid {
		t.Fatalf("the test user's uid is the engine's: the test would not tell them apart")
	}
	for _, want := range []string{"status-at-start:[]", "head:" + head, "token:no", "committed:", "uid:" + strconv.Itoa(uid)} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("agent output lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.Stderr, "quarantined") {
		t.Errorf("start warns of the quarantine:\n%s", r)
	}
	if _, err := os.Stat(k.Worktree("t1")); !os.IsNotExist(err) {
		t.Errorf("the engine made a worktree on the host: %v", err)
	}
	pods := k.pods(t, "git-sandbox.io/managed=1")
	if len(pods) < 2 {
		t.Fatalf("want the agent's and the helper's Pods, found %d", len(pods))
	}
	assertHardened(t, pods, float64(uid))
	for _, p := range pods {
		if rc := p["spec"].(map[string]any)["runtimeClassName"]; rc != "runc" {
			t.Errorf("Pod runtimeClassName %v, want the engine's runtime_class runc", rc)
		}
	}
	assertRequests(t, pods)
	if claims := k.objects(t, "pvc"); len(claims) < 3 {
		t.Errorf("claims %q: want the worktree, git directory and home", claims)
	}

	ps := k.MustSandbox("ps")
	if !strings.Contains(ps.Stdout, "ENGINE") || !strings.Contains(ps.Stdout, "k8s") || !strings.Contains(ps.Stdout, "exited") {
		t.Errorf("ps:\n%s", ps)
	}
	if p := k.PsOf("t1"); p.Changes != 3 {
		t.Errorf("ps counts %d changes, want 3:\n%+v", p.Changes, p)
	}
	d := k.MustSandbox("diff", "t1", "--stat")
	for _, f := range []string{"new.txt", "README.md", "src/old.txt"} {
		if !strings.Contains(d.Stdout, f) {
			t.Errorf("diff --stat lacks %s:\n%s", f, d)
		}
	}
	if got := k.Git("log", "-1", "--format=%s", "refs/sandbox/t1/agent"); got != "agent commit" {
		t.Errorf("the agent's commit came back as %q", got)
	}
	k.MustSandbox("land", "t1", "-m", "land from the cluster")
	if got := k.Git("show", "main:new.txt"); got != "new" {
		t.Errorf("main:new.txt = %q", got)
	}
	if out := k.Git("ls-tree", "-r", "--name-only", "main"); strings.Contains(out, "old.txt") {
		t.Errorf("src/old.txt is still on main:\n%s", out)
	}
	k.assertNothingLeft(t)
}

// A nested repository the agent makes on the cluster is quarantined in
// the helper's claim, refused at land and rm, named by diff, and kept for
// exec, as in bind mode (checkNestedRefusedAndKept).
func testKubernetesNestedRepository(t *testing.T) {
	k := k8sEnv(t, "")
	checkNestedRefusedAndKept(t, k.Env, "k8s", func(t *testing.T) func(string) bool {
		helpers := k.pods(t, "git-sandbox.io/role=helper")
		if len(helpers) != 1 {
			t.Fatalf("want the sandbox's one helper Pod, found %d", len(helpers))
		}
		pod := helpers[0]["metadata"].(map[string]any)["name"].(string)
		return func(p string) bool {
			_, err := k.c.Kubectl(t, nil, "exec", "-n", k.ns, pod, "--", "test", "-e", "/workspace/"+p)
			return err == nil
		}
	})
	k.assertNothingLeft(t)
}

// attach and logs -f to a sandbox started detached on the cluster: both
// stream what the agent prints (logs -f from its start, attach from when
// it connected) and end when the agent does.
func testKubernetesAttachAndFollowLogs(t *testing.T) {
	k := k8sEnv(t, "")
	script := `while [ ! -e /workspace/go ]; do sleep 0.1; done; i=0; while [ $i -lt 20 ]; do i=$((i+1)); echo "tick $i"; sleep 0.3; done`
	k.MustSandbox("start", "att", "-d", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", script)
	attach, follow := make(chan Result, 1), make(chan Result, 1)
	go func() { attach <- k.Sandbox("attach", "att") }()
	go func() { follow <- k.Sandbox("logs", "-f", "att") }()
	k.MustSandbox("exec", "att", "--", "touch", "/workspace/go")
	if r := <-follow; r.Code != 0 || !strings.Contains(r.Stdout, "tick 1\n") || !strings.Contains(r.Stdout, "tick 20\n") {
		t.Errorf("logs -f: %s", r)
	}
	if r := <-attach; r.Code != 0 || !strings.Contains(r.Stdout, "tick 20\n") {
		t.Errorf("attach: %s", r)
	}
	// The Pod's status says the agent ended a moment after its output
	// does.
	// (ps says paused while a snapshot reads a running agent's files.)
	Eventually(t, 30*time.Second, "the sandbox to have ended", func() bool { s := k.PsOf("att").State; return s != "running" && s != "paused" })
	if r := k.Sandbox("attach", "att"); r.Code == 0 || !strings.Contains(r.Stderr, "not running") {
		t.Errorf("attach to an exited sandbox: %s", r)
	}
	k.MustSandbox("rm", "--force", "att")
	k.assertNothingLeft(t)
}

// The commands of a running and then an ended sandbox: exec, logs, stop,
// exec after the exit (a fresh Pod on the same claims), a follow-up task,
// update, verify, wait and rm.
func testKubernetesEngineOperations(t *testing.T) {
	k := k8sEnv(t, "verify = \"test -s count.txt\"")
	k.MustSandbox("start", "op", "-d", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--",
		"sh", "-c", `echo started; i=0; while :; do i=$((i+1)); echo $i >count.txt; sleep 1; done`)
	if got := k.MustSandbox("exec", "op", "--", "sh", "-c", "cat count.txt; pwd").Stdout; !strings.Contains(got, "/workspace") {
		t.Errorf("exec in the running sandbox:\n%s", got)
	}
	Eventually(t, 30*time.Second, "the log has the agent's first line", func() bool {
		return strings.Contains(k.Sandbox("logs", "op").Stdout, "started")
	})
	Eventually(t, 60*time.Second, "a snapshot with count.txt", func() bool {
		return k.Run(k.Repo, nil, "git", "show", "refs/sandbox/op/rescue:count.txt").Code == 0
	})
	if p := k.PsOf("op"); p.State != "running" {
		t.Errorf("ps state %q, want running", p.State)
	}
	k.MustSandbox("stop", "op")
	if p := k.PsOf("op"); p.State != "stopped" {
		t.Errorf("after stop, ps state %q", p.State)
	}
	if got := k.MustSandbox("exec", "op", "--", "cat", "count.txt").Stdout; strings.TrimSpace(got) == "" {
		t.Errorf("exec after the exit sees no count.txt")
	}
	r := k.MustSandbox("start", "op", "-p", "second task", "--", "sh", "-c", `echo "saw:$(test -s count.txt && echo count) task:$GIT_SANDBOX_PROMPT"; echo second >second.txt`)
	if !strings.Contains(r.Stdout, "saw:count task:second task") {
		t.Errorf("the follow-up does not see the first task's files:\n%s", r)
	}
	k.WriteFile("b.txt", "from main\n")
	k.Git("add", "b.txt")
	k.Git("commit", "-q", "-m", "main: b.txt")
	k.MustSandbox("update", "op")
	if got := k.MustSandbox("exec", "op", "--", "cat", "b.txt").Stdout; !strings.Contains(got, "from main") {
		t.Errorf("after update the sandbox has b.txt = %q", got)
	}
	if v := k.Sandbox("verify", "op"); v.Code != 0 {
		t.Errorf("verify:\n%s", v)
	}
	if w := k.Sandbox("wait", "op"); w.Code != 0 {
		t.Errorf("wait on an ended sandbox:\n%s", w)
	}
	k.MustSandbox("rm", "--force", "op")
	k.assertNothingLeft(t)
}

// Deleting the agent's Pod loses at most one interval: ps says the
// sandbox is lost and how to go on, the snapshots are on this machine.
func testKubernetesPodDeletedKeepsTheSnapshots(t *testing.T) {
	k := k8sEnv(t, "")
	k.MustSandbox("start", "gone", "-d", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--",
		"sh", "-c", "echo precious >work.txt; sleep 600")
	Eventually(t, 60*time.Second, "a snapshot holding work.txt", func() bool {
		r := k.Run(k.Repo, nil, "git", "show", "refs/sandbox/gone/rescue:work.txt")
		return r.Code == 0 && strings.TrimSpace(r.Stdout) == "precious"
	})
	snap := k.Git("rev-parse", "refs/sandbox/gone/rescue")
	k.c.MustKubectl(t, nil, "delete", "pods", "-n", k.ns, "-l", "git-sandbox.io/role=agent", "--grace-period=0", "--force")
	Eventually(t, 30*time.Second, "ps lists the sandbox as lost", func() bool { return k.PsOf("gone").State == "lost" })
	r := k.MustSandbox("ps")
	if !strings.Contains(r.Stderr, "lost its container") || !strings.Contains(r.Stderr, "rescue list gone") {
		t.Errorf("ps does not say what happened and how to go on:\n%s", r)
	}
	k.MustSandbox("rescue", "restore", snap[:12], "--branch", "saved")
	if got := k.Git("show", "saved:work.txt"); got != "precious" {
		t.Errorf("restored work.txt = %q", got)
	}
	k.MustSandbox("rm", "--force", "gone")
	k.assertNothingLeft(t)
}

// allowlist on the cluster: the proxy is a Pod of its own, the networks
// are NetworkPolicy objects, the agent reaches the proxy by name, and a
// live change reaches the running proxy.
func testKubernetesAllowlist(t *testing.T) {
	k := k8sEnv(t, "allow = [\"api.allowed.test\"]")
	k.MustSandbox("start", "al", "-d", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--", "sleep", "600")
	policies := k.objects(t, "networkpolicies")
	var isolate bool
	for _, p := range policies {
		isolate = isolate || strings.HasSuffix(p, "/git-sandbox-isolate")
	}
	if !isolate || len(policies) < 3 {
		t.Errorf("policies %q: want the isolate policy, the sandbox's network and the egress network", policies)
	}
	proxies := k.pods(t, "git-sandbox.io/role=proxy")
	agents := k.pods(t, "git-sandbox.io/role=agent")
	if len(proxies) != 1 || len(agents) != 1 {
		t.Fatalf("%d proxy and %d agent Pods, want one each", len(proxies), len(agents))
	}
	netsOf := func(p map[string]any) []string {
		var out []string
		for l := range p["metadata"].(map[string]any)["labels"].(map[string]any) {
			if n, ok := strings.CutPrefix(l, "net.git-sandbox.io/"); ok {
				out = append(out, n)
			}
		}
		return out
	}
	if a, p := netsOf(agents[0]), netsOf(proxies[0]); len(a) != 1 || len(p) != 2 {
		t.Errorf("networks: agent %q (want its sandbox's only), proxy %q (want that one and the egress network)", a, p)
	}
	probe := `host=${HTTP_PROXY#http://}; host=${host%%:*}; port=${HTTP_PROXY##*:}
exec 3<>/dev/tcp/$host/$port || { echo "no proxy"; exit 1; }
printf 'GET http://api.denied.test/ HTTP/1.1\r\nHost: api.denied.test\r\nConnection: close\r\n\r\n' >&3
head -1 <&3`
	got := k.MustSandbox("exec", "al", "--", "bash", "-c", probe).Stdout
	if !strings.Contains(got, " 403 ") {
		t.Errorf("a denied host through the proxy: %q, want 403", got)
	}
	// A live allow is loaded into the running proxy's claim: the host is
	// no longer refused (it does not exist, so the proxy cannot reach it).
	k.MustSandbox("net", "allow", "al", "api.denied.test")
	if got = k.MustSandbox("exec", "al", "--", "bash", "-c", probe).Stdout; strings.Contains(got, " 403 ") || !strings.Contains(got, "HTTP/1.1 ") {
		t.Errorf("after net allow, the host through the proxy: %q, want anything but 403", got)
	}
	k.MustSandbox("rm", "--force", "al")
	k.assertNothingLeft(t)
	for _, p := range k.objects(t, "networkpolicies") {
		if !strings.HasSuffix(p, "/git-sandbox-isolate") && !strings.Contains(p, "egress") {
			t.Errorf("policy %s left after rm", p)
		}
	}
}

// A fleet of six tasks with engine "auto" over two engines, a Docker
// engine and the cluster, each with max_sandboxes = 3: three run on each,
// and fleet land lands all six. The Docker engine is one of the test's
// own, remote as far as files go (copy mode: it has a /tmp of its own):
// max_sandboxes counts every sandbox on an engine, and the tests running
// beside this one hold sandboxes on the main daemon.
func testKubernetesFleetOverTwoEngines(t *testing.T) {
	k := k8sEnv(t, "")
	mainHost := newEngine2(t, baseImage).Host
	k.WriteConfig("base_image = %q\nnetwork = \"none\"\ndefault_engine = \"auto\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"256m\"\npids = 256\n\n[[engine]]\nname = \"local\"\nhost = %q\nmode = \"copy\"\nmax_sandboxes = 3\n\n%s",
		baseImage, mainHost, k.engineConfig(3))
	var b strings.Builder
	b.WriteString("max_parallel = 6\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "\n[[task]]\nbranch = \"f%d\"\ncommand = [\"sh\", \"-c\", \"echo %d > out%d.txt\"]\n", i, i, i)
	}
	tasks := k.writeTasks("tasks.toml", b.String())
	k.MustSandbox("fleet", "start", tasks)
	if w := k.Sandbox("fleet", "wait"); w.Code != 0 {
		t.Fatalf("fleet wait: %s\nfleet ps:\n%s", w, k.Sandbox("fleet", "ps"))
	}
	on := map[string]int{}
	for _, p := range k.Ps() {
		on[p.Engine]++
	}
	if on["local"] != 3 || on["k8s"] != 3 {
		t.Errorf("sandboxes per engine %v, want 3 on local and 3 on k8s", on)
	}
	k.MustSandbox("fleet", "land")
	for i := 1; i <= 6; i++ {
		if got := k.Git("show", fmt.Sprintf("main:out%d.txt", i)); got != strconv.Itoa(i) {
			t.Errorf("main:out%d.txt = %q", i, got)
		}
	}
	k.assertNothingLeft(t)
}

// testKubernetesEngineConformance runs the engine conformance suite (the
// one the fake and the Docker daemon pass) against the test cluster
// through container/kube, in a namespace of its own, with nothing declared
// missing: exec, attach and log streams, signals and pause, which the fake
// clientset of the unit tests cannot give, run here.
func testKubernetesEngineConformance(t *testing.T) {
	c := startCluster(t)
	if _, done := k8sImages.Load(baseImage); !done {
		c.LoadImage(t, baseImage)
		k8sImages.Store(baseImage, true)
	}
	ns := c.Namespace(t)
	enginetest.Suite{
		Image:   baseImage,
		Timeout: 5 * time.Minute,
		New: func(t *testing.T) container.Engine {
			k, err := kube.Connect(context.Background(), kube.Options{
				Name: "k8s", Kubeconfig: c.Kubeconfig, Namespace: ns, RuntimeClass: "runc", VolumeSize: "64Mi",
			})
			if err != nil {
				t.Fatalf("connect to the test cluster: %v", err)
			}
			return k
		},
	}.RunTests(t)
}
