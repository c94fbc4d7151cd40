package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestKerr(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name               string
		err                error
		notFound, conflict bool
	}{
		{"not found", apierrors.NewNotFound(gr, "p"), true, false},
		{"exists", apierrors.NewAlreadyExists(gr, "p"), false, true},
		{"conflict", apierrors.NewConflict(gr, "p", errors.New("changed")), false, true},
		{"forbidden", apierrors.NewForbidden(gr, "p", errors.New("rbac")), false, false},
	}
	for _, tt := range tests {
		got := kerr(tt.err)
		if container.IsNotFound(got) != tt.notFound || container.IsConflict(got) != tt.conflict || got.Error() != tt.err.Error() {
			t.Errorf("%s: kerr = %v (not found %v, conflict %v)", tt.name, got, container.IsNotFound(got), container.IsConflict(got))
		}
	}
	if kerr(nil) != nil {
		t.Error("kerr(nil) is an error")
	}
}

func TestExpandHome(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for in, want := range map[string]string{"~/kube/config": "/home/u/kube/config", "/etc/kube": "/etc/kube", "~user/x": "~user/x", "rel": "rel"} {
		if got := expandHome(in); got != want {
			t.Errorf("expandHome(%q) = %q, want %q", in, got, want)
		}
	}
}

// apiServer answers /version as a cluster would, or fails when broken.
func apiServer(t *testing.T, broken bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken || r.URL.Path != "/version" {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"33","gitVersion":"v1.33.1"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeKubeconfig(t *testing.T, dir, server, namespace string) string {
	t.Helper()
	p := filepath.Join(dir, "config")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: %q\n- name: other\n  context:\n    cluster: c\n    user: u\ncurrent-context: ctx\nusers:\n- name: u\n  user:\n    token: t\n", server, namespace)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConnect(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	good := writeKubeconfig(t, home, apiServer(t, false), "from-context")
	if err := os.MkdirAll(filepath.Join(home, "broken"), 0o700); err != nil {
		t.Fatal(err)
	}
	broken := writeKubeconfig(t, filepath.Join(home, "broken"), apiServer(t, true), "")

	tests := []struct {
		name string
		o    Options
		ns   string
		err  string
	}{
		{"the context's namespace", Options{Name: "k", Kubeconfig: "~/config"}, "from-context", ""},
		{"the engine's namespace", Options{Name: "k", Kubeconfig: good, Namespace: "mine"}, "mine", ""},
		{"a context without one", Options{Name: "k", Kubeconfig: good, Context: "other"}, "default", ""},
		{"a missing kubeconfig", Options{Name: "k", Kubeconfig: filepath.Join(home, "none"), ConfigFile: "/cfg.toml"}, "", "cannot read its kubeconfig"},
		{"a cluster that does not answer", Options{Name: "k", Kubeconfig: broken}, "", "does not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Connect(ctx, tt.o)
			if tt.err != "" {
				if ue, ok := usererr.As(err); !ok || !strings.Contains(err.Error(), tt.err) || len(ue.Hints) == 0 {
					t.Fatalf("Connect = %v, want a user error with %q and a hint", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Namespace() != tt.ns {
				t.Errorf("namespace %q, want %q", e.Namespace(), tt.ns)
			}
			if a := e.Abilities(); a.Kind != container.KindKubernetes || a.BindMounts || !a.VolumesWritable {
				t.Errorf("abilities %+v", a)
			}
		})
	}
}

func TestImagesAreNotTheClustersBusiness(t *testing.T) {
	ctx := context.Background()
	im := newTestEngine(t).Images()
	if ok, err := im.Exists(ctx, "any"); !ok || err != nil {
		t.Errorf("Exists = %v, %v; want true (the node decides at start)", ok, err)
	}
	calls := map[string]error{}
	_, calls["Agents"] = im.Agents(ctx, "i")
	_, calls["ProbeAgents"] = im.ProbeAgents(ctx, "i")
	_, _, calls["Inspect"] = im.Inspect(ctx, "i")
	calls["Build"] = im.Build(ctx, container.BuildOptions{})
	_, calls["BuildContext"] = im.BuildContext(ctx, container.ContextBuild{})
	_, calls["Commit"] = im.Commit(ctx, "c", container.CommitOptions{})
	_, calls["Save"] = im.Save(ctx, "i")
	calls["Load"] = im.Load(ctx, strings.NewReader(""))
	for name, err := range calls {
		if !container.IsNotSupported(err) {
			t.Errorf("%s = %v, want ErrNotSupported", name, err)
		}
	}
}

func TestMemoryBytes(t *testing.T) {
	node := func(name string, mem string, ready, unschedulable bool) *corev1.Node {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	}
	cs := fake.NewClientset(node("a", "4Gi", true, false), node("b", "2Gi", true, false), node("down", "8Gi", false, false), node("cordoned", "16Gi", true, true))
	e := newEngine(cs, Options{Name: "k"}, "ns")
	if got, err := e.MemoryBytes(context.Background()); err != nil || got != 6<<30 {
		t.Errorf("MemoryBytes = %d, %v; want the ready, schedulable nodes' 6Gi", got, err)
	}
}

// TestHostAliases: a container reaches the other running members of its
// networks by their names, as on a Docker network; members that ended,
// are going, or have no address yet are left out, and so is the
// container itself.
func TestHostAliases(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	if _, err := e.Create(ctx, testSpec("me")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateNetwork(ctx, container.NetworkSpec{Name: "net1", Internal: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.ConnectNetwork(ctx, "net1", "me", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.getRecord(ctx, "me")
	now := metav1.Now()
	member := func(name, container, ip, display string, phase corev1.PodPhase, deleting bool) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelNetPrefix + "net1": "1", labelContainer: container},
			Annotations: map[string]string{annName: display}}, Status: corev1.PodStatus{PodIP: ip, Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
			p.Finalizers = []string{"x"}
		}
		if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	member("proxy-1", "proxy", "10.0.0.2", "Egress_Proxy", corev1.PodRunning, false) // not a hostname: only the object name
	member("db-1", "db", "10.0.0.3", "db.internal", corev1.PodRunning, false)
	member("me-1", r.object(), "10.0.0.1", "me", corev1.PodRunning, false)
	member("old-1", "old", "10.0.0.4", "old", corev1.PodSucceeded, false)
	member("going-1", "going", "10.0.0.5", "going", corev1.PodRunning, true)
	member("new-1", "new", "", "new", corev1.PodPending, false)
	got, err := e.hostAliases(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.HostAlias{{IP: "10.0.0.2", Hostnames: []string{"proxy"}}, {IP: "10.0.0.3", Hostnames: []string{"db", "db.internal"}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("host aliases %v, want %v", got, want)
	}
	// The spec's own Hosts are given too.
	r.spec.Hosts = []container.Host{{Name: "cache.internal", Addr: netip.MustParseAddr("10.0.0.3")}, {Name: "named", Addr: netip.MustParseAddr("10.0.0.9")}}
	got, err = e.hostAliases(ctx, r)
	want = []corev1.HostAlias{{IP: "10.0.0.2", Hostnames: []string{"proxy"}}, {IP: "10.0.0.3", Hostnames: []string{"cache.internal", "db", "db.internal"}}, {IP: "10.0.0.9", Hostnames: []string{"named"}}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("host aliases with the spec's hosts %v, %v; want %v", got, err, want)
	}
	for s, ok := range map[string]bool{"db.internal": true, "a": true, "under_score": false, "-x": false, strings.Repeat("a.", 127) + "a": false, "x..y": false} {
		if isHostname(s) != ok {
			t.Errorf("isHostname(%q) = %v", s, !ok)
		}
	}
}

func TestOpenPolicy(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ { // made once, then found
		if err := e.ensureOpenPolicy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	np, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, openPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if np.Spec.PodSelector.MatchLabels[labelOpen] != "1" || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress || len(np.Spec.Egress[0].To) != 2 {
		t.Errorf("open policy %+v", np.Spec)
	}
}
