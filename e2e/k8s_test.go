package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The Kubernetes tests run against a real single-node cluster that
// e2e/k8s/cluster.sh builds from source (cached by version) and starts on
// this machine. The first test that needs it starts it; TestMain stops it
// at the end if this run started it. A cluster already running (make
// k8s-cluster) is used as it is and left running.
//
// The cluster needs root. Without root the tests are skipped and say so,
// except under CI=true, where they fail: CI must run them.
// GIT_SANDBOX_TEST_K8S=off skips them on purpose (outside CI only).

// k8sCluster is a running test cluster, as its env file describes it.
type k8sCluster struct {
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string
	// KubectlPath is the kubectl built with the cluster.
	KubectlPath string
	// Node is the name of the cluster's only node.
	Node string
	// Env holds every variable of the env file.
	Env map[string]string
}

var (
	k8sOnce    sync.Once
	k8sRunning *k8sCluster
	k8sErr     error
	// k8sStarted says this run started the cluster, so it stops it.
	k8sStarted bool
	// k8sSkipped records why the Kubernetes tests did not run.
	k8sSkipped sync.Map
)

func clusterScript() string { return filepath.Join(repoRoot, "e2e", "k8s", "cluster.sh") }

// k8sUnavailable says why this machine cannot run the cluster, or "".
func k8sUnavailable() string {
	if os.Getenv("GIT_SANDBOX_TEST_K8S") == "off" && os.Getenv("CI") != "true" {
		return "GIT_SANDBOX_TEST_K8S=off"
	}
	if os.Geteuid() != 0 {
		return "they need root (the cluster runs containerd and a kubelet); run make test as root"
	}
	return ""
}

// startCluster returns the test cluster, starting it on first use. It
// skips the test when the cluster cannot run here, and fails it under CI.
func startCluster(t testing.TB) *k8sCluster {
	t.Helper()
	if why := k8sUnavailable(); why != "" {
		k8sSkipped.Store(why, true)
		notRunHere(t, "the Kubernetes tests cannot run: "+why, "e2e/k8s/cluster.sh start says what it needs")
	}
	k8sOnce.Do(func() {
		<-k8sBuilt
		if k8sErr = k8sBuildErr; k8sErr == nil {
			k8sRunning, k8sErr = bringUpCluster()
		}
	})
	if k8sErr != nil {
		t.Fatalf("test cluster: %v", k8sErr)
	}
	return k8sRunning
}

// k8sBuilt is closed when the background build that startClusterBuild
// began has ended (at once when there is none); k8sBuildErr says how.
var (
	k8sBuilt    = make(chan struct{})
	k8sBuildErr error
	k8sBuildCmd *exec.Cmd
)

// startClusterBuild begins building the cluster's binaries (cached by
// version: nothing to do when they are there) in the background at the
// lowest CPU priority, when this run will run the Kubernetes tests: a cold
// build (a quarter of an hour on two cores) then takes the time the Docker
// tests leave idle. TestMain calls it first; stopClusterBuild ends a build
// still running when the tests are over.
func startClusterBuild() {
	if k8sUnavailable() != "" || !runsTest("TestKubernetes") {
		close(k8sBuilt)
		return
	}
	logFile, err := os.CreateTemp("", "git-sandbox-e2e-k8s-build-*.log")
	if err != nil {
		k8sBuildErr = err
		close(k8sBuilt)
		return
	}
	cmd := exec.Command("nice", "-n", "19", clusterScript(), "build")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.Remove(logFile.Name())
		k8sBuildErr = fmt.Errorf("%s build: %v", clusterScript(), err)
		close(k8sBuilt)
		return
	}
	k8sBuildCmd = cmd
	go func() {
		defer close(k8sBuilt)
		err := cmd.Wait()
		logFile.Close()
		out, _ := os.ReadFile(logFile.Name())
		os.Remove(logFile.Name())
		if err != nil {
			k8sBuildErr = fmt.Errorf("%s build: %v\n%s", clusterScript(), err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "e2e: test cluster binaries ready after %v (%s)\n",
			time.Since(start).Round(time.Second), strings.TrimSpace(lastLine(string(out))))
	}()
}

// stopClusterBuild ends a background build that is still running (its
// script removes what it made so far).
func stopClusterBuild() {
	if k8sBuildCmd == nil {
		return
	}
	select {
	case <-k8sBuilt:
	default:
		_ = syscall.Kill(-k8sBuildCmd.Process.Pid, syscall.SIGTERM)
		<-k8sBuilt
	}
}

// runsTest says whether the -test.run pattern (when there is one) selects
// the top-level test name, and -test.skip does not skip it.
func runsTest(name string) bool {
	match := func(flagName string) (matched, set bool) {
		f := flag.Lookup(flagName)
		if f == nil || f.Value.String() == "" {
			return false, false
		}
		top, _, _ := strings.Cut(f.Value.String(), "/")
		ok, err := regexp.MatchString(top, name)
		return ok || err != nil, true
	}
	if m, set := match("test.run"); set && !m {
		return false
	}
	if f := flag.Lookup("test.skip"); f != nil && !strings.Contains(f.Value.String(), "/") {
		if m, set := match("test.skip"); set && m {
			return false
		}
	}
	return true
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

func bringUpCluster() (*k8sCluster, error) {
	if exec.Command(clusterScript(), "status").Run() != nil {
		start := time.Now()
		cmd := exec.Command(clusterScript(), "start")
		// Should this process die before TestMain stops the cluster (a
		// test timeout), the cluster's watchdog stops it.
		cmd.Env = append(os.Environ(), fmt.Sprintf("GIT_SANDBOX_K8S_OWNER_PID=%d", os.Getpid()))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err := cmd.Run()
		// Even a failed start may have left something: stop cleans it up.
		k8sStarted = true
		if err != nil {
			return nil, fmt.Errorf("%s start: %v", clusterScript(), err)
		}
		fmt.Fprintf(os.Stderr, "e2e: test cluster started in %v\n", time.Since(start).Round(time.Second))
	}
	out, err := exec.Command(clusterScript(), "env").Output()
	if err != nil {
		return nil, fmt.Errorf("%s env: %v", clusterScript(), err)
	}
	c := &k8sCluster{Env: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			c.Env[k] = v
		}
	}
	c.Kubeconfig, c.KubectlPath, c.Node = c.Env["KUBECONFIG"], c.Env["GIT_SANDBOX_K8S_KUBECTL"], c.Env["GIT_SANDBOX_K8S_NODE"]
	if c.Kubeconfig == "" || c.KubectlPath == "" {
		return nil, fmt.Errorf("the cluster's env file lacks KUBECONFIG or GIT_SANDBOX_K8S_KUBECTL:\n%s", out)
	}
	return c, nil
}

// stopCluster tears the cluster down if this run started it, and says
// plainly when the Kubernetes tests were skipped. TestMain calls it.
func stopCluster() error {
	k8sSkipped.Range(func(why, _ any) bool {
		fmt.Fprintf(os.Stderr, "e2e: NOTE: the Kubernetes tests did NOT run: %s\n", why)
		return true
	})
	if !k8sStarted {
		return nil
	}
	cmd := exec.Command(clusterScript(), "stop")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s stop: %v", clusterScript(), err)
	}
	return nil
}

// Kubectl runs the cluster's kubectl as the admin; stdin may be nil.
func (c *k8sCluster) Kubectl(t testing.TB, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(c.KubectlPath, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// MustKubectl is Kubectl that fails the test on an error.
func (c *k8sCluster) MustKubectl(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(t, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// LoadImage copies images from the Docker daemon into the cluster's
// containerd (nothing can be pulled: pods use imagePullPolicy Never).
func (c *k8sCluster) LoadImage(t testing.TB, tags ...string) {
	t.Helper()
	out, err := exec.Command(clusterScript(), append([]string{"load-image"}, tags...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("load images %v into the cluster: %v\n%s", tags, err, out)
	}
}

// RemoveImage removes images LoadImage copied into the cluster's
// containerd.
func (c *k8sCluster) RemoveImage(t testing.TB, tags ...string) {
	t.Helper()
	out, err := exec.Command(clusterScript(), append([]string{"remove-image"}, tags...)...).CombinedOutput()
	if err != nil {
		t.Errorf("remove images %v from the cluster: %v\n%s", tags, err, out)
	}
}

// Namespace creates a namespace for one test, enforcing the "restricted"
// Pod Security Standard, and deletes it, with everything in it, when the
// test ends.
func (c *k8sCluster) Namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "git-sandbox-test-" + hex.EncodeToString(b)
	c.MustKubectl(t, nil, "create", "namespace", ns)
	// Every Pod of the tests, git sandbox's and their own, is admitted by
	// the strictest Pod Security Standard.
	c.MustKubectl(t, nil, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
	t.Cleanup(func() {
		if _, err := c.Kubectl(t, nil, "delete", "namespace", ns, "--wait=false"); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// testKubernetesClusterRunsAPod: the test cluster runs the test image as
// a non-root user with every capability dropped, to completion, and its
// log comes back through the API server and the kubelet.
func testKubernetesClusterRunsAPod(t *testing.T) {
	c := startCluster(t)
	ns := c.Namespace(t)
	pod := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": "smoke", "namespace": ns},
		"spec": map[string]any{
			"restartPolicy":                "Never",
			"automountServiceAccountToken": false,
			"enableServiceLinks":           false,
			"securityContext": map[string]any{
				"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true,
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
			},
			"containers": []any{map[string]any{
				"name":            "main",
				"image":           baseImage,
				"imagePullPolicy": "Never",
				"command":         []string{"sh", "-c", "echo ok; id -u; grep ^CapEff: /proc/self/status"},
				"securityContext": map[string]any{
					"allowPrivilegeEscalation": false,
					"readOnlyRootFilesystem":   true,
					"capabilities":             map[string]any{"drop": []string{"ALL"}},
				},
			}},
		},
	}
	manifest, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.MustKubectl(t, manifest, "create", "-f", "-")
	if _, err := c.Kubectl(t, nil, "wait", "--namespace", ns, "pod/smoke", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s"); err != nil {
		status, _ := c.Kubectl(t, nil, "get", "--namespace", ns, "pod/smoke", "-o", "yaml")
		events, _ := c.Kubectl(t, nil, "get", "events", "--namespace", ns)
		t.Fatalf("%v\npod:\n%s\nevents:\n%s", err, status, events)
	}
	t.Logf("pod create → Succeeded: %v", time.Since(start).Round(10*time.Millisecond))
	if got := c.MustKubectl(t, nil, "logs", "--namespace", ns, "pod/smoke"); got != "ok\n1000\nCapEff:\t0000000000000000\n" {
		t.Errorf("pod log = %q, want ok, uid 1000 and no capabilities", got)
	}
}

// k8sPod is a Pod for the cluster tests: the test image, run once as uid
// (non-root, every capability dropped, a read-only root), optionally with
// a claim mounted at /data and a runtime class.
type k8sPod struct {
	Name, Script, Claim, RuntimeClass string
	UID                               int
}

func (p k8sPod) manifest(ns string) []byte {
	container := map[string]any{
		"name":            "main",
		"image":           baseImage,
		"imagePullPolicy": "Never",
		"command":         []string{"sh", "-c", p.Script},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   true,
			"capabilities":             map[string]any{"drop": []string{"ALL"}},
		},
	}
	spec := map[string]any{
		"restartPolicy":                "Never",
		"automountServiceAccountToken": false,
		"enableServiceLinks":           false,
		"securityContext": map[string]any{
			"runAsUser": p.UID, "runAsGroup": p.UID, "runAsNonRoot": true,
			"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		},
		"containers": []any{container},
	}
	if p.Claim != "" {
		container["volumeMounts"] = []any{map[string]any{"name": "data", "mountPath": "/data"}}
		spec["volumes"] = []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": p.Claim}}}
	}
	if p.RuntimeClass != "" {
		spec["runtimeClassName"] = p.RuntimeClass
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.Name, "namespace": ns},
		"spec":     spec,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// runPod runs p to completion in ns and returns its log; it fails the test,
// with the Pod's status and the namespace's events, if p does not succeed.
func (c *k8sCluster) runPod(t *testing.T, ns string, p k8sPod) string {
	t.Helper()
	c.MustKubectl(t, p.manifest(ns), "create", "-f", "-")
	if _, err := c.Kubectl(t, nil, "wait", "--namespace", ns, "pod/"+p.Name, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s"); err != nil {
		status, _ := c.Kubectl(t, nil, "get", "--namespace", ns, "pod/"+p.Name, "-o", "yaml")
		logs, _ := c.Kubectl(t, nil, "logs", "--namespace", ns, "pod/"+p.Name)
		events, _ := c.Kubectl(t, nil, "get", "events", "--namespace", ns)
		t.Fatalf("%v\npod:\n%s\nlog:\n%s\nevents:\n%s", err, status, logs, events)
	}
	return c.MustKubectl(t, nil, "logs", "--namespace", ns, "pod/"+p.Name)
}

// testKubernetesClusterProvisionsClaims: a claim that names no class gets
// a volume from the cluster's default class at once; a non-root Pod with
// no capabilities writes into it, and a second Pod reads that back; once
// the claim is deleted, its volume and the directory behind it go too.
func testKubernetesClusterProvisionsClaims(t *testing.T) {
	c := startCluster(t)
	ns := c.Namespace(t)
	claim := []byte(`{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": {"name": "data", "namespace": "` + ns + `"},
		"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}}`)
	start := time.Now()
	c.MustKubectl(t, claim, "create", "-f", "-")
	if _, err := c.Kubectl(t, nil, "wait", "--namespace", ns, "pvc/data", "--for=jsonpath={.status.phase}=Bound", "--timeout=60s"); err != nil {
		status, _ := c.Kubectl(t, nil, "get", "--namespace", ns, "pvc/data", "-o", "yaml")
		events, _ := c.Kubectl(t, nil, "get", "events", "--namespace", ns)
		t.Fatalf("the claim was not bound: %v\nclaim:\n%s\nevents:\n%s\n(the provisioner logs to %s/logs/provisioner.log)", err, status, events, c.Env["GIT_SANDBOX_K8S_DIR"])
	}
	t.Logf("claim create → Bound: %v", time.Since(start).Round(10*time.Millisecond))
	if got := c.MustKubectl(t, nil, "get", "--namespace", ns, "pvc/data", "-o", "jsonpath={.spec.storageClassName}"); got != c.Env["GIT_SANDBOX_K8S_STORAGE_CLASS"] || got == "" {
		t.Errorf("the claim's class = %q, want the default class %q", got, c.Env["GIT_SANDBOX_K8S_STORAGE_CLASS"])
	}
	pv := c.MustKubectl(t, nil, "get", "--namespace", ns, "pvc/data", "-o", "jsonpath={.spec.volumeName}")
	dir := c.MustKubectl(t, nil, "get", "pv", pv, "-o", "jsonpath={.spec.hostPath.path}")
	if want := filepath.Join(c.Env["GIT_SANDBOX_K8S_VOLUMES"], pv); dir != want {
		t.Fatalf("volume %s is at %q, want %q", pv, dir, want)
	}

	got := c.runPod(t, ns, k8sPod{Name: "writer", UID: 1000, Claim: "data",
		Script: "set -e; echo written by $(id -u) > /data/file; mkdir /data/sub; cat /data/file"})
	if got != "written by 1000\n" {
		t.Errorf("writer's log = %q, want the file it wrote", got)
	}
	got = c.runPod(t, ns, k8sPod{Name: "reader", UID: 1000, Claim: "data",
		Script: "set -e; cat /data/file; echo read by $(id -u) >> /data/file; test -d /data/sub"})
	if got != "written by 1000\n" {
		t.Errorf("reader's log = %q, want what the writer wrote", got)
	}
	// The same files, on the node.
	if b, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || string(b) != "written by 1000\nread by 1000\n" {
		t.Errorf("the volume's file on the node: %q, %v", b, err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o777 {
		t.Errorf("the volume's directory on the node: %v, %v; want mode 0777", info, err)
	}

	// The claim's Pods go first: a claim in use is kept until they do.
	c.MustKubectl(t, nil, "delete", "--namespace", ns, "pod/writer", "pod/reader", "--wait=true", "--timeout=60s")
	start = time.Now()
	c.MustKubectl(t, nil, "delete", "--namespace", ns, "pvc/data", "--wait=false")
	deadline := start.Add(60 * time.Second)
	for {
		out, err := c.Kubectl(t, nil, "get", "pv", pv, "--ignore-not-found", "-o", "name")
		_, statErr := os.Stat(dir)
		if err == nil && out == "" && os.IsNotExist(statErr) {
			break
		}
		if time.Now().After(deadline) {
			status, _ := c.Kubectl(t, nil, "get", "pv", pv, "-o", "yaml")
			t.Fatalf("60 s after the claim was deleted: volume %q (%v), directory: %v\n%s\n(the provisioner logs to %s/logs/provisioner.log)",
				out, err, statErr, status, c.Env["GIT_SANDBOX_K8S_DIR"])
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("claim delete → volume and directory gone: %v", time.Since(start).Round(10*time.Millisecond))
}

// testKubernetesClusterRuntimeClass: the cluster has the RuntimeClass runc,
// and a Pod that names it runs.
func testKubernetesClusterRuntimeClass(t *testing.T) {
	c := startCluster(t)
	ns := c.Namespace(t)
	class := c.Env["GIT_SANDBOX_K8S_RUNTIME_CLASS"]
	if class == "" {
		t.Fatal("the cluster's env file names no runtime class (GIT_SANDBOX_K8S_RUNTIME_CLASS): started by an older cluster.sh? run it again")
	}
	if got := c.MustKubectl(t, nil, "get", "runtimeclass", class, "-o", "jsonpath={.handler}"); got != "runc" {
		t.Errorf("runtime class %s has handler %q, want runc", class, got)
	}
	if got := c.runPod(t, ns, k8sPod{Name: "runtime", UID: 1000, RuntimeClass: class, Script: "id -u"}); got != "1000\n" {
		t.Errorf("pod log = %q, want uid 1000", got)
	}
	if got := c.MustKubectl(t, nil, "get", "--namespace", ns, "pod/runtime", "-o", "jsonpath={.spec.runtimeClassName}"); got != class {
		t.Errorf("the pod's runtimeClassName = %q, want %q", got, class)
	}
}
