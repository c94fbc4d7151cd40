package kube

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func testSpec(name string) *container.Spec {
	s := &container.Spec{
		Name: name, Image: "img:1", Argv: []string{"sh", "-c", "echo hi"}, Env: []string{"A=1", "B=x=y"},
		User: "1000:1001", WorkDir: "/workspace", Hostname: "Feature-X",
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: "repo1", container.LabelBranch: "feature/x",
			container.LabelRole: container.RoleAgent, container.LabelPrompt: "free text: not a label value!",
		},
		Mounts: []container.Mount{
			{Source: "Vol_ws", Target: "/workspace", Volume: true},
			{Source: "bin", Target: "/a", Volume: true, ReadOnly: true},
			{Source: "bin", Target: "/b", Volume: true, ReadOnly: true},
		},
		Limits:  container.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 512},
		Network: container.NetworkNone,
	}
	s.Harden()
	return s
}

func newTestEngine(t *testing.T) *Engine {
	t.Helper()
	return newEngine(fake.NewClientset(), Options{Name: "k8s", Image: "registry/img:2", MemoryRequest: 256 << 20, CPURequest: 0.1, RunAsUser: 4321, RunAsGroup: 4322}, "agents")
}

func TestObjectName(t *testing.T) {
	for _, name := range []string{"plain-name", "git-sandbox-My_Repo-feature.x-0a1b2c3d", strings.Repeat("a", 80), "__"} {
		got := objectName(name)
		if !isDNSLabel(got) {
			t.Errorf("objectName(%q) = %q: not a DNS label", name, got)
		}
		if again := objectName(got); again != got {
			t.Errorf("objectName is not idempotent: %q -> %q -> %q", name, got, again)
		}
	}
	if objectName("plain-name") != "plain-name" {
		t.Errorf("a valid name is changed")
	}
	if objectName("A_b") == objectName("a-b") {
		t.Errorf("two names meet")
	}
}

func TestCreateRecordsAndPodIsHardened(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	id, err := e.Create(ctx, testSpec("git-sandbox-Repo_x-feature-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, testSpec("git-sandbox-Repo_x-feature-1")); !container.IsConflict(err) {
		t.Errorf("second create: %v, want a conflict", err)
	}
	r, err := e.getRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.spec.Image != "registry/img:2" {
		t.Errorf("image %q: the engine's image replaces the spec's", r.spec.Image)
	}
	pod, err := e.podFor(r, 1, []corev1.HostAlias{{IP: "10.0.0.5", Hostnames: []string{"proxy"}}})
	if err != nil {
		t.Fatal(err)
	}
	ps := pod.Spec
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || !*ps.ShareProcessNamespace || ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec not hardened: %+v", ps)
	}
	sc := ps.Containers[0].SecurityContext
	if *sc.RunAsUser != 4321 || *sc.RunAsGroup != 4322 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || *sc.Privileged ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container security context: %+v (want the engine's user, not the spec's)", sc)
	}
	psc := ps.SecurityContext
	if *psc.RunAsUser != 4321 || *psc.RunAsGroup != 4322 || !*psc.RunAsNonRoot || *psc.FSGroup != 4322 ||
		*psc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context: %+v", psc)
	}
	if len(ps.Volumes) != 2 {
		t.Fatalf("volumes %+v: one per claim", ps.Volumes)
	}
	for _, v := range ps.Volumes {
		if v.PersistentVolumeClaim == nil || v.HostPath != nil {
			t.Errorf("volume %+v: claims only", v)
		}
	}
	if got := len(ps.Containers[0].VolumeMounts); got != 3 {
		t.Errorf("%d mounts, want 3", got)
	}
	if ps.Hostname != "feature-x" || ps.HostAliases[0].IP != "10.0.0.5" {
		t.Errorf("hostname %q, aliases %+v", ps.Hostname, ps.HostAliases)
	}
	env := ps.Containers[0].Env
	if len(env) != 2 || env[1].Name != "B" || env[1].Value != "x=y" {
		t.Errorf("env %+v", env)
	}
	lim := ps.Containers[0].Resources
	if lim.Limits.Memory().Value() != 1<<30 || lim.Requests.Memory().Value() != 256<<20 || lim.Limits.Cpu().MilliValue() != 2000 || lim.Requests.Cpu().MilliValue() != 100 {
		t.Errorf("resources %+v", lim)
	}
	if pod.Labels[labelRole] != container.RoleAgent || pod.Labels[labelSandbox] == "" || ps.Affinity == nil {
		t.Errorf("labels %v, affinity %v", pod.Labels, ps.Affinity)
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(pod.Annotations[annLabels]), &labels); err != nil || labels[container.LabelPrompt] == "" {
		t.Errorf("the Docker labels are kept in an annotation: %v %v", labels, err)
	}
}

// The Pods request little and are limited by the config: the agent what
// the engine asks for, its helper and proxy less, and never more than a
// limit; a request of 0 is written (Kubernetes would make it the limit).
func TestPodRequests(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	cases := []struct {
		role          string
		limits        container.Limits
		memory, milli int64
	}{
		{container.RoleAgent, container.Limits{MemoryBytes: 8 << 30, CPUs: 4, Pids: 1}, 256 << 20, 100},
		{container.RoleVerify, container.Limits{MemoryBytes: 8 << 30, CPUs: 4, Pids: 1}, 256 << 20, 100},
		{container.RoleHelper, container.Limits{MemoryBytes: 8 << 30, Pids: 1}, 32 << 20, 10},
		{container.RoleProxy, container.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 1}, 32 << 20, 10},
		{container.RoleAgent, container.Limits{MemoryBytes: 128 << 20, CPUs: 0.05, Pids: 1}, 128 << 20, 50},
	}
	for i, c := range cases {
		s := testSpec("req-" + strconv.Itoa(i))
		s.Labels[container.LabelRole], s.Limits = c.role, c.limits
		id, err := e.Create(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.getRecord(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		pod, err := e.podFor(r, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := pod.Spec.Containers[0].Resources
		if res.Requests.Memory().Value() != c.memory || res.Requests.Cpu().MilliValue() != c.milli {
			t.Errorf("%s with limits %+v requests %v of memory and %v of CPU, want %d and %dm", c.role, c.limits, res.Requests.Memory(), res.Requests.Cpu(), c.memory, c.milli)
		}
		if res.Limits.Memory().Value() != c.limits.MemoryBytes || res.Limits.Cpu().MilliValue() != int64(c.limits.CPUs*1000) {
			t.Errorf("%s: limits %v, want %+v", c.role, res.Limits, c.limits)
		}
	}
	none := resourcesOf(container.Limits{MemoryBytes: 1 << 30, CPUs: 1}, request{})
	if q, ok := none.Requests[corev1.ResourceMemory]; !ok || !q.IsZero() {
		t.Errorf("a request of nothing under a limit is %v: left out, the limit would be requested", none.Requests)
	}
	if free := resourcesOf(container.Limits{}, request{}); len(free.Requests) != 0 || len(free.Limits) != 0 {
		t.Errorf("no limit and no request: %+v", free)
	}
}

// Whoever runs git sandbox, and whatever user a spec names (root for the
// proxy's loader), a Pod runs as the engine's non-root uid: 1000 unless
// the engine names one.
func TestPodsNeverRunAsRoot(t *testing.T) {
	e := newEngine(fake.NewClientset(), Options{Name: "k8s"}, "agents")
	ctx := context.Background()
	s := testSpec("root")
	s.User = "0:0"
	id, err := e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.getRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := e.podFor(r, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, psc := pod.Spec.Containers[0].SecurityContext, pod.Spec.SecurityContext
	if *sc.RunAsUser != DefaultRunAs || *sc.RunAsGroup != DefaultRunAs || !*sc.RunAsNonRoot || *psc.RunAsUser != DefaultRunAs || !*psc.RunAsNonRoot {
		t.Errorf("a spec of root's runs as %d:%d (non-root %v), pod %d (non-root %v)", *sc.RunAsUser, *sc.RunAsGroup, *sc.RunAsNonRoot, *psc.RunAsUser, *psc.RunAsNonRoot)
	}
}

func TestCreateRefusesHostPaths(t *testing.T) {
	e := newTestEngine(t)
	s := testSpec("x")
	s.Mounts = append(s.Mounts, container.Mount{Source: "/home/me/repo", Target: "/repo"})
	if _, err := e.Create(context.Background(), s); err == nil || !strings.Contains(err.Error(), "/home/me/repo") {
		t.Errorf("create with a bind mount: %v", err)
	}
}

func setPod(t *testing.T, e *Engine, r *record, run int, mutate func(p *corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	p, err := e.podFor(r, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	mutate(p)
	_ = e.cs.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.patchRecord(ctx, r.object(), map[string]string{annRun: "1"}); err != nil {
		t.Fatal(err)
	}
}

func terminated(code int32) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			p.Status.Phase = corev1.PodFailed
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code},
		}}}
	}
}

func TestStates(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	id, err := e.Create(ctx, testSpec("c1"))
	if err != nil {
		t.Fatal(err)
	}
	state := func() container.State {
		st, err := e.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return *st
	}
	if st := state(); st.Status != "created" || st.Running {
		t.Errorf("new: %+v", st)
	}
	r, _ := e.getRecord(ctx, id)
	setPod(t, e, r, 1, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	if st := state(); st.Status != "running" || !st.Running {
		t.Errorf("running: %+v", st)
	}
	if err := e.patchRecord(ctx, id, map[string]string{annPaused: "1"}); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Status != "paused" || !st.Paused {
		t.Errorf("paused: %+v", st)
	}
	list, err := e.List(ctx, container.LabelRole+"="+container.RoleAgent)
	if err != nil || len(list) != 1 || list[0].Running || list[0].Status != "paused" {
		t.Errorf("list while paused: %+v %v", list, err)
	}
	setPod(t, e, r, 1, terminated(3))
	if st := state(); st.Status != "exited" || st.ExitCode != 3 {
		t.Errorf("exited: %+v", st)
	}
	if err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, podName(id, 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Status != container.StatusLost {
		t.Errorf("Pod deleted: %+v, want lost", st)
	}
	res := <-e.WaitExit(ctx, id, container.WaitNotRunning)
	if !errors.Is(res.Err, errLost) {
		t.Errorf("wait on a lost container: %+v", res)
	}
	if err := e.patchRecord(ctx, id, map[string]string{annStopped: "1"}); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Status != "exited" || st.ExitCode != 137 {
		t.Errorf("stopped by us, Pod gone: %+v", st)
	}
	if got, _ := e.List(ctx, container.LabelRole+"=verify"); len(got) != 0 {
		t.Errorf("label filter: %+v", got)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Inspect(ctx, id); !container.IsNotFound(err) {
		t.Errorf("after remove: %v", err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Errorf("second remove: %v", err)
	}
}

func TestWaitNextExitWaitsForTheNextRun(t *testing.T) {
	e := newTestEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := e.Create(ctx, testSpec("c2"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e.getRecord(ctx, id)
	setPod(t, e, r, 1, terminated(0)) // an earlier run
	waitC := e.WaitExit(ctx, id, container.WaitNextExit)
	select {
	case res := <-waitC:
		t.Fatalf("returned the earlier run's exit: %+v", res)
	case <-time.After(400 * time.Millisecond):
	}
	r, _ = e.getRecord(ctx, id)
	p, _ := e.podFor(r, 2, nil)
	terminated(7)(p)
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := <-waitC; res.Code != 7 || res.Err != nil {
		t.Errorf("next exit: %+v", res)
	}
}

func TestNetworksArePolicies(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	n, err := e.CreateNetwork(ctx, container.NetworkSpec{Name: "Sb_net", Internal: true, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateNetwork(ctx, container.NetworkSpec{Name: "egress"}); err != nil {
		t.Fatal(err)
	}
	again, err := e.CreateNetwork(ctx, container.NetworkSpec{Name: "egress"})
	if err != nil || again.Name != "egress" {
		t.Errorf("creating a network twice joins the first: %+v %v", again, err)
	}
	iso, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, isolatePolicy, metav1.GetOptions{})
	if err != nil || len(iso.Spec.Ingress) != 0 || len(iso.Spec.Egress) != 0 || len(iso.Spec.PolicyTypes) != 2 {
		t.Errorf("isolate policy: %+v %v", iso, err)
	}
	np, _ := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, n.ID, metav1.GetOptions{})
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil {
				t.Errorf("an internal network allows %v", to.IPBlock)
			}
		}
	}
	eg, _ := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, "egress", metav1.GetOptions{})
	if len(eg.Spec.Egress) != 2 {
		t.Errorf("the egress network goes out: %+v", eg.Spec.Egress)
	}
	got, err := e.ListNetworks(ctx, "k=v")
	if err != nil || len(got) != 1 || got[0].Name != "Sb_net" || !got[0].Internal {
		t.Errorf("list networks: %+v %v", got, err)
	}
	s := testSpec("member")
	if _, err := e.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := e.ConnectNetwork(ctx, "Sb_net", "member", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.getRecord(ctx, "member")
	p, _ := e.podFor(r, 1, nil)
	if p.Labels[labelNetPrefix+n.ID] != "1" {
		t.Errorf("member Pod labels %v", p.Labels)
	}
	if err := e.RemoveNetwork(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveNetwork(ctx, n.ID); err != nil {
		t.Errorf("removing a missing network: %v", err)
	}
}

func TestVolumesAreClaims(t *testing.T) {
	e := newEngine(fake.NewClientset(), Options{Name: "k8s", StorageClass: "fast", VolumeSize: "2Gi"}, "agents")
	ctx := context.Background()
	if _, err := e.CreateVolume(ctx, container.VolumeSpec{Name: "Ws_1", Labels: map[string]string{"git-sandbox.repo": "r"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateVolume(ctx, container.VolumeSpec{Name: "Ws_1"}); err != nil {
		t.Errorf("a claim made twice: %v", err)
	}
	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, objectName("Ws_1"), metav1.GetOptions{})
	if err != nil || *pvc.Spec.StorageClassName != "fast" || pvc.Spec.Resources.Requests.Storage().String() != "2Gi" {
		t.Fatalf("claim %+v %v", pvc, err)
	}
	vols, err := e.ListVolumes(ctx, "git-sandbox.repo=r")
	if err != nil || len(vols) != 1 || vols[0].Name != "Ws_1" {
		t.Errorf("list volumes: %+v %v", vols, err)
	}
	if err := e.RemoveVolume(ctx, "Ws_1"); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveVolume(ctx, "Ws_1"); err != nil {
		t.Errorf("removing a missing volume: %v", err)
	}
}

// A claim of the volume's name that is being deleted (the Pod that used it
// still going away) is waited out and made anew, not taken: it would
// vanish under the new Pod.
func TestVolumeWaitsOutAClaimBeingDeleted(t *testing.T) {
	ctx := context.Background()
	terminating := func(e *Engine) {
		now := metav1.Now()
		_, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: objectName("home"), DeletionTimestamp: &now, Finalizers: []string{"kubernetes.io/pvc-protection"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	e := newEngine(fake.NewClientset(), Options{Name: "k8s"}, "agents")
	terminating(e)
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.cs.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, objectName("home"), metav1.DeleteOptions{})
	}()
	if _, err := e.CreateVolume(ctx, container.VolumeSpec{Name: "home"}); err != nil {
		t.Fatal(err)
	}
	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, objectName("home"), metav1.GetOptions{})
	if err != nil || pvc.DeletionTimestamp != nil || pvc.Annotations[annName] != "home" {
		t.Fatalf("the claim after CreateVolume: %+v %v", pvc, err)
	}

	defer func(d time.Duration) { claimGoneTimeout = d }(claimGoneTimeout)
	claimGoneTimeout = 300 * time.Millisecond
	e = newEngine(fake.NewClientset(), Options{Name: "k8s"}, "agents")
	terminating(e)
	_, err = e.CreateVolume(ctx, container.VolumeSpec{Name: "home"})
	if ue, ok := usererr.As(err); !ok || !strings.Contains(err.Error(), "still being deleted") || len(ue.Hints) == 0 {
		t.Fatalf("a claim that stays in deletion: %v", err)
	}
}

func TestTransitions(t *testing.T) {
	now := time.Now()
	run := container.State{ID: "a", Status: "running", Started: now}
	if ev := transitions(container.State{}, run, now); len(ev) != 2 || ev[0].Action != container.EventCreate || ev[1].Action != container.EventStart {
		t.Errorf("new and running: %+v", ev)
	}
	exited := container.State{ID: "a", Status: "exited", ExitCode: 2, Started: now}
	if ev := transitions(run, exited, now); len(ev) != 1 || ev[0].Action != container.EventDie || *ev[0].ExitCode != 2 {
		t.Errorf("died: %+v", ev)
	}
	if ev := transitions(run, run, now); len(ev) != 0 {
		t.Errorf("no change: %+v", ev)
	}
}

func TestPendingReason(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image x not present"},
	}}}}}
	err := pendingReason(p)
	if err == nil || !permanent(err) || !strings.Contains(err.Error(), "image =") {
		t.Errorf("image never pulled: %v", err)
	}
	p.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	if err := pendingReason(p); err != nil {
		t.Errorf("creating: %v", err)
	}
}

func TestParseUser(t *testing.T) {
	if u, g, err := parseUser("1000"); err != nil || u != 1000 || g != 1000 {
		t.Errorf("1000: %d %d %v", u, g, err)
	}
	if _, _, err := parseUser("me"); err == nil {
		t.Errorf("a user name is accepted")
	}
}

// proxySpec is a container of git sandbox's own proxy image, as the
// sandbox package makes it.
func proxySpec() *container.Spec {
	s := testSpec("git-sandbox-proxy-0123456789ab")
	s.Image, s.ToolImage, s.NoHealthcheck = "git-sandbox-proxy:dev-0123456789ab", true, true
	s.Entrypoint, s.Argv = []string{"/git-sandbox"}, []string{"__proxy", "--config", "/etc/git-sandbox-proxy/proxy.json"}
	s.Env = []string{"HOME=/nonexistent"}
	s.Labels[container.LabelRole] = container.RoleProxy
	return s
}

// The proxy's Pod runs git sandbox's own image, whatever image the engine
// gives sandboxes, never pulled unless proxy_image names where from; its
// command is the spec's entrypoint (replacing the image's), its arguments
// the spec's command, its environment the spec's alone.
func TestProxyPodRunsTheToolsImage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, proxyImage, wantImage string
		wantPull                    corev1.PullPolicy
	}{
		{"loaded into the nodes", "", "git-sandbox-proxy:dev-0123456789ab", corev1.PullNever},
		{"pushed to a registry", "registry/git-sandbox-proxy:dev-0123456789ab", "registry/git-sandbox-proxy:dev-0123456789ab", corev1.PullIfNotPresent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(fake.NewClientset(), Options{Name: "k8s", Image: "registry/img:2", ProxyImage: tc.proxyImage}, "agents")
			id, err := e.Create(ctx, proxySpec())
			if err != nil {
				t.Fatal(err)
			}
			r, _ := e.getRecord(ctx, id)
			pod, err := e.podFor(r, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := pod.Spec.Containers[0]
			if c.Image != tc.wantImage || c.ImagePullPolicy != tc.wantPull {
				t.Errorf("proxy Pod image %s (pull %s), want %s (%s)", c.Image, c.ImagePullPolicy, tc.wantImage, tc.wantPull)
			}
			if strings.Join(c.Command, " ") != "/git-sandbox" || strings.Join(c.Args, " ") != "__proxy --config /etc/git-sandbox-proxy/proxy.json" {
				t.Errorf("command %q args %q", c.Command, c.Args)
			}
			if len(c.Env) != 1 || c.Env[0].Name != "HOME" || c.Env[0].Value != "/nonexistent" {
				t.Errorf("env %+v", c.Env)
			}
			// A sandbox's container on the same engine gets the engine's
			// image, its command replacing the image's entrypoint.
			aid, err := e.Create(ctx, testSpec("agent"))
			if err != nil {
				t.Fatal(err)
			}
			ar, _ := e.getRecord(ctx, aid)
			apod, _ := e.podFor(ar, 1, nil)
			if ac := apod.Spec.Containers[0]; ac.Image != "registry/img:2" || ac.ImagePullPolicy != corev1.PullIfNotPresent || strings.Join(ac.Command, " ") != "sh -c echo hi" || ac.Args != nil {
				t.Errorf("agent Pod: image %s pull %s command %q args %q", ac.Image, ac.ImagePullPolicy, ac.Command, ac.Args)
			}
		})
	}
}

// A node without the proxy's image fails the start at once, with an error
// naming the image and what to do.
func TestProxyImageMissingOnTheNode(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image is not present with pull policy of Never"},
		}}}
		return false, nil, nil
	})
	e := newEngine(cs, Options{Name: "k8s"}, "agents")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := e.Create(ctx, proxySpec())
	if err != nil {
		t.Fatal(err)
	}
	err = e.Start(ctx, id)
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(ue.Msg, "git-sandbox-proxy:dev-0123456789ab") || !strings.Contains(ue.Msg, "egress proxy") {
		t.Fatalf("start = %v, want an error naming the proxy's image", err)
	}
	hints := strings.Join(ue.Hints, "\n")
	for _, want := range []string{"git sandbox image proxy", "proxy_image", "ctr -n k8s.io images import"} {
		if !strings.Contains(hints, want) {
			t.Errorf("hints lack %q:\n%s", want, hints)
		}
	}
}
