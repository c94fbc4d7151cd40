package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
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
	return newEngine(fake.NewClientset(), Options{Name: "k8s", Image: "registry/img:2"}, "agents")
}

func TestObjectName(t *testing.T) {
	for _, name := range []string{"plain-name", "git-sandbox-My_Repo-feature.x-0a1b2c3d", strings.Repeat("a", 80), "__"} {
		got := objectName(name)
		if !config.IsDNSLabel(got) {
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
	if *sc.RunAsUser != 1000 || *sc.RunAsGroup != 1001 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || *sc.Privileged ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container security context: %+v", sc)
	}
	if *ps.SecurityContext.FSGroup != 1001 {
		t.Errorf("fsGroup %d, want the user's group", *ps.SecurityContext.FSGroup)
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
	if lim.Limits.Memory().Value() != 1<<30 || lim.Requests.Memory().Value() != 1<<30 || lim.Limits.Cpu().MilliValue() != 2000 || lim.Requests.Cpu().MilliValue() != 200 {
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
	if err := e.ConnectNetwork(ctx, "Sb_net", "member"); err != nil {
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
