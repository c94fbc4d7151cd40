package kube

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/git-sandbox/git-sandbox/container"
)

// poolHelperSpec is a copy-mode helper's spec as the workspace makes it,
// for the sandbox of branch.
func poolHelperSpec(branch, image string) *container.Spec {
	name := "git-sandbox-repo-" + branch
	s := &container.Spec{
		Name: name + "-helper", Image: image, User: "1000:1000", WorkDir: "/", Network: container.NetworkNone,
		Argv:   []string{"/bin/sh", "-c", "while :; do sleep 3600; done"},
		Limits: container.Limits{MemoryBytes: 1 << 30, Pids: 512},
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: "repo", container.LabelBranch: branch,
			container.LabelRole: container.RoleHelper,
		},
	}
	s.Harden()
	for _, m := range []struct{ suffix, target string }{{"ws", "/workspace"}, {"git", "/sandbox/git"}, {"home", "/sandbox/home"}, {"state", "/sandbox-state"}} {
		s.Mounts = append(s.Mounts, container.Mount{Source: name + "-" + m.suffix, Target: m.target, Volume: true})
	}
	return s
}

// poolEngine is an engine keeping n ready helpers over a fake cluster
// whose kubelet runs every Pod.
func poolEngine(t *testing.T, n int) *Engine {
	t.Helper()
	cs := fake.NewClientset()
	fakeKubelet(t, cs, "agents")
	// The API server's optimistic lock, which the fake clientset lacks:
	// an update of a record read before another update is a conflict.
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		cur, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), cm.Namespace, cm.Name)
		if err != nil {
			return false, nil, nil
		}
		if rv := cur.(*corev1.ConfigMap).ResourceVersion; cm.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, errors.New("changed since it was read"))
		}
		n, _ := strconv.Atoi(cm.ResourceVersion)
		cm.ResourceVersion = strconv.Itoa(n + 1)
		return false, nil, nil
	})
	return newEngine(cs, Options{Name: "k8s", WarmPods: n}, "agents")
}

// waitPoolReady waits until the pool has want helpers running.
func waitPoolReady(t *testing.T, e *Engine, want int) {
	t.Helper()
	for range 100 {
		st, err := e.Pool(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready == want && st.Starting == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the pool never had %d helpers ready", want)
}

func TestWarmPoolTakesAReadyHelperAndRefills(t *testing.T) {
	ctx := context.Background()
	e := poolEngine(t, 2)
	spec := poolHelperSpec("one", "img")
	vl := map[string]string{container.LabelRepo: "repo", container.LabelBranch: "one", container.LabelRole: container.RoleHelper}
	if got, err := e.TakeHelper(ctx, spec, vl); err != nil || got != nil {
		t.Fatalf("an empty pool gave %v, %v", got, err)
	}
	_ = e.Close() // tops the pool up for this kind of helper
	waitPoolReady(t, e, 2)

	got, err := e.TakeHelper(ctx, spec, vl)
	if err != nil || got == nil {
		t.Fatalf("TakeHelper = %v, %v; want a ready helper", got, err)
	}
	if len(got.Volumes) != 4 || got.Volumes["/workspace"] == "" {
		t.Fatalf("volumes by target: %v", got.Volumes)
	}
	// The helper is the sandbox's now: its record, Pod and claims say so,
	// and none of them is the pool's any more.
	st, err := e.Inspect(ctx, got.Name)
	if err != nil || !st.Running || st.Labels[container.LabelBranch] != "one" {
		t.Fatalf("taken helper: %+v, %v", st, err)
	}
	listed, _ := e.List(ctx, container.LabelRepo+"=repo", container.LabelBranch+"=one")
	if len(listed) != 1 || listed[0].Name != got.Name {
		t.Fatalf("the sandbox's containers: %+v", listed)
	}
	pods, _ := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelSandbox + "=" + hashLabel("repo\x00one")})
	if len(pods.Items) != 1 || pods.Items[0].Labels[labelPool] != "" {
		t.Fatalf("the taken helper's Pod keeps the pool's label or lacks the sandbox's: %+v", pods.Items)
	}
	vols, _ := e.ListVolumes(ctx, container.LabelRepo+"=repo", container.LabelBranch+"=one")
	if len(vols) != 4 {
		t.Fatalf("the sandbox's volumes: %+v", vols)
	}
	if st, _ := e.Pool(ctx, false); st.Ready != 1 {
		t.Fatalf("after one take the pool has %+v", st)
	}
	// Another kind of helper (another image) takes nothing, and the next
	// top-up replaces the pool's helpers with its kind.
	other := poolHelperSpec("two", "other-img")
	if got, err := e.TakeHelper(ctx, other, vl); err != nil || got != nil {
		t.Fatalf("a helper of another image was given %v, %v", got, err)
	}
	_ = e.Close()
	waitPoolReady(t, e, 2)
	entries, _ := e.poolEntries(ctx)
	for _, en := range entries {
		if en.key != e.poolKey(other) {
			t.Fatalf("a helper of the old kind is left in the pool: %s", en.r.spec.Name)
		}
	}
	// The taken helper is not the pool's: nothing of it was removed.
	if _, err := e.Inspect(ctx, got.Name); err != nil {
		t.Fatalf("the pool's top-up removed a taken helper: %v", err)
	}
}

func TestWarmPoolNeverGivesAHelperTwice(t *testing.T) {
	ctx := context.Background()
	e := poolEngine(t, 1)
	spec := poolHelperSpec("one", "img")
	_, _ = e.TakeHelper(ctx, spec, nil)
	_ = e.Close()
	waitPoolReady(t, e, 1)
	entries, _ := e.poolEntries(ctx)
	stale := entries[0].r // as a second start read it, before the first took it
	if got, err := e.TakeHelper(ctx, spec, nil); err != nil || got == nil {
		t.Fatalf("first take: %v, %v", got, err)
	}
	if _, err := e.take(ctx, stale, entries[0].pod, poolHelperSpec("two", "img"), nil); err != errTakenAlready {
		t.Fatalf("a second take of the same helper = %v, want errTakenAlready", err)
	}
	if got, err := e.TakeHelper(ctx, poolHelperSpec("three", "img"), nil); err != nil || got != nil {
		t.Fatalf("an empty pool gave %v, %v", got, err)
	}
}

func TestWarmPoolDrainRemovesEverything(t *testing.T) {
	ctx := context.Background()
	e := poolEngine(t, 2)
	_, _ = e.TakeHelper(ctx, poolHelperSpec("one", "img"), nil)
	_ = e.Close()
	waitPoolReady(t, e, 2)
	st, err := e.Pool(ctx, true)
	if err != nil || st.Removed != 2 {
		t.Fatalf("drain: %+v, %v", st, err)
	}
	cms, _ := e.cs.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{})
	claims, _ := e.cs.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{})
	if len(cms.Items) != 0 || len(claims.Items) != 0 {
		t.Fatalf("left after a drain: %d records, %d claims", len(cms.Items), len(claims.Items))
	}
	if c := PoolCost(2, ""); c != "2 helper Pods requesting 32Mi of memory and 10m CPU each, and 8 claims of 10Gi" {
		t.Fatalf("cost: %s", c)
	}
}

func TestWarmPoolOffTakesNothing(t *testing.T) {
	e := poolEngine(t, 0)
	if got, err := e.TakeHelper(context.Background(), poolHelperSpec("one", "img"), nil); err != nil || got != nil {
		t.Fatalf("warm_pods = 0 gave %v, %v", got, err)
	}
	_ = e.Close()
	cms, _ := e.cs.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{})
	if len(cms.Items) != 0 {
		t.Fatalf("warm_pods = 0 made %d records", len(cms.Items))
	}
}
