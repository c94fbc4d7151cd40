package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/git-sandbox/git-sandbox/internal/netprobe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// probeKubelet plays the kubelet and the network plugin for the probe's
// Pods in ns: the listener becomes ready with an address, the client ends
// with the exit code clientCode gives (a plugin that enforces the policy
// makes it netprobe.ExitBlocked); waiting, when set, is the reason every
// Pod is left waiting with instead. It counts the clients it ran.
type probeKubelet struct {
	clientCode atomic.Int32
	// controlCode is the control client's exit code (0: it connects).
	controlCode atomic.Int32
	waiting     string
	clients     atomic.Int32
}

func (k *probeKubelet) run(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type != watch.Added {
					continue
				}
				cur := p.DeepCopy()
				switch {
				case k.waiting != "":
					cur.Status.Phase = corev1.PodPending
					cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: k.waiting, Message: "the image is not on the node"}}}}
				case p.Labels[labelRole] == "listener":
					cur.Status.Phase = corev1.PodRunning
					cur.Status.PodIP = "10.1.2.3"
					cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				case p.Labels[labelRole] == "control":
					code := k.controlCode.Load()
					if code == 0 {
						code = netprobe.ExitConnected
					}
					cur.Status.Phase = corev1.PodFailed
					cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
				default:
					k.clients.Add(1)
					cur.Status.Phase = corev1.PodFailed
					cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: k.clientCode.Load()}}}}
				}
				_, _ = cs.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			case <-ctx.Done():
				return
			}
		}
	}()
}

// probeEngine is an engine over a fake cluster with the probe's kubelet,
// its answers kept in a directory of the test's.
func probeEngine(t *testing.T, code int32, o Options) (*Engine, *probeKubelet) {
	t.Helper()
	cs := fake.NewClientset()
	k := &probeKubelet{}
	k.clientCode.Store(code)
	k.run(t, cs, "agents")
	o.Name, o.ConfigFile = "k8s", "/home/me/.config/git-sandbox/config.toml"
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	return newEngine(cs, o, "agents"), k
}

// assertProbeGone fails when a Pod or policy of the probe is left.
func assertProbeGone(t *testing.T, e *Engine) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: labelProbe}
	pods, _ := e.cs.CoreV1().Pods(e.ns).List(ctx, sel)
	pols, _ := e.cs.NetworkingV1().NetworkPolicies(e.ns).List(ctx, sel)
	if len(pods.Items)+len(pols.Items) != 0 {
		t.Errorf("the probe left %d Pods and %d policies", len(pods.Items), len(pols.Items))
	}
}

func TestAnUnenforcingClusterRefusesAllowlistMode(t *testing.T) {
	e, _ := probeEngine(t, netprobe.ExitConnected, Options{})
	warning, err := e.RequireIsolation(context.Background(), "git-sandbox-proxy:abc")
	ue, ok := usererr.As(err)
	if !ok || warning != "" {
		t.Fatalf("RequireIsolation = %q, %v; want a user error", warning, err)
	}
	if !strings.Contains(ue.Error(), "does not enforce NetworkPolicy in namespace agents") {
		t.Errorf("message: %s", ue.Error())
	}
	hints := strings.Join(ue.Hints, "\n")
	for _, want := range []string{"git sandbox doctor", `network_policy = "unenforced-ok"`, "[[engine]] k8s", "--network none"} {
		if !strings.Contains(hints, want) {
			t.Errorf("hints lack %q:\n%s", want, hints)
		}
	}
	assertProbeGone(t, e)
}

func TestUnenforcedOKRunsWithAWarning(t *testing.T) {
	e, _ := probeEngine(t, netprobe.ExitConnected, Options{NetworkPolicy: NetworkPolicyUnenforcedOK})
	warning, err := e.RequireIsolation(context.Background(), "git-sandbox-proxy:abc")
	if err != nil || !strings.Contains(warning, "does not enforce NetworkPolicy") || !strings.Contains(warning, "past the egress proxy") {
		t.Fatalf("RequireIsolation = %q, %v; want a warning and no error", warning, err)
	}
}

func TestAnEnforcingClusterIsProbedOnceAndCached(t *testing.T) {
	dir := t.TempDir()
	e, k := probeEngine(t, netprobe.ExitBlocked, Options{StateDir: dir})
	ctx := context.Background()
	for range 2 {
		if warning, err := e.RequireIsolation(ctx, "git-sandbox-proxy:abc"); err != nil || warning != "" {
			t.Fatalf("RequireIsolation = %q, %v; want nothing", warning, err)
		}
	}
	if n := k.clients.Load(); n != 1 {
		t.Errorf("the probe ran %d times, want once (then cached)", n)
	}
	assertProbeGone(t, e)

	// Another process of the same user, same cluster and namespace: the
	// cached answer.
	e2, k2 := probeEngine(t, netprobe.ExitConnected, Options{StateDir: dir})
	if en, err := e2.NetworkPolicy(ctx, "git-sandbox-proxy:abc", false); err != nil || !en.Enforced || !en.Cached {
		t.Errorf("second engine: %+v, %v; want the cached enforced answer", en, err)
	}
	// doctor asks afresh, and the new answer replaces the old.
	if en, err := e2.NetworkPolicy(ctx, "git-sandbox-proxy:abc", true); err != nil || en.Enforced || en.Cached {
		t.Errorf("fresh probe: %+v, %v; want the new answer: not enforced", en, err)
	}
	if _, err := e2.RequireIsolation(ctx, "git-sandbox-proxy:abc"); err == nil {
		t.Error("after a fresh probe found no enforcement, allowlist mode is still allowed")
	}
	if k2.clients.Load() != 1 {
		t.Errorf("the second engine probed %d times, want once (the fresh probe)", k2.clients.Load())
	}

	// Another namespace is another answer.
	e3 := newEngine(e2.cs, e2.opts, "elsewhere")
	if en, ok := readEnforcement(e3.enforcementFile(), e3.rest.Host, e3.ns, time.Now()); ok {
		t.Errorf("namespace elsewhere took the answer of agents: %+v", en)
	}
	// An answer over a day old is asked again.
	if _, ok := readEnforcement(e2.enforcementFile(), e2.rest.Host, e2.ns, time.Now().Add(25*time.Hour)); ok {
		t.Error("a day-old answer is still taken")
	}
}

func TestAProbeThatCannotRunRefusesUnlessAccepted(t *testing.T) {
	for _, accepted := range []bool{false, true} {
		o := Options{}
		if accepted {
			o.NetworkPolicy = NetworkPolicyUnenforcedOK
		}
		e, k := probeEngine(t, 0, o)
		k.waiting = "ErrImageNeverPull"
		if accepted {
			k.waiting = "ImagePullBackOff" // a registry the node cannot pull from: not waited out either
		}
		warning, err := e.RequireIsolation(context.Background(), "git-sandbox-proxy:abc")
		switch {
		case accepted && (err != nil || !strings.Contains(warning, "unknown")):
			t.Errorf("accepted: %q, %v; want a warning", warning, err)
		case !accepted && (err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull")):
			t.Errorf("not accepted: %q, %v; want a refusal naming why the probe did not run", warning, err)
		case !accepted:
			// What the proxy's own start says of its missing image.
			if ue, ok := usererr.As(err); !ok || !strings.Contains(strings.Join(ue.Hints, "\n"), "git sandbox image proxy") {
				t.Errorf("the refusal does not say how to get the proxy's image onto the node: %v", err)
			}
		}
		if _, ok := readEnforcement(e.enforcementFile(), e.rest.Host, e.ns, time.Now()); ok {
			t.Error("a probe that did not run left an answer")
		}
		assertProbeGone(t, e)
	}
	// A control client that cannot connect either makes the probe no
	// answer: the client's block could be a firewall, not the policy.
	e, k := probeEngine(t, netprobe.ExitBlocked, Options{})
	k.controlCode.Store(netprobe.ExitBlocked)
	if _, err := e.NetworkPolicy(context.Background(), "git-sandbox-proxy:abc", false); err == nil || !strings.Contains(err.Error(), "control client") {
		t.Errorf("a blocked control client: %v", err)
	}
	if _, ok := readEnforcement(e.enforcementFile(), e.rest.Host, e.ns, time.Now()); ok {
		t.Error("a probe that could not tell left an answer")
	}
	assertProbeGone(t, e)
	// A client that ends some other way is no answer either.
	e, _ = probeEngine(t, 2, Options{})
	if _, err := e.NetworkPolicy(context.Background(), "git-sandbox-proxy:abc", false); err == nil || !strings.Contains(err.Error(), "code 2") {
		t.Errorf("a client ending with code 2: %v", err)
	}
}

// The probe's Pods are as hardened as a sandbox's, run git sandbox's
// proxy image (the registry's copy when proxy_image names one), and the
// policy denies the client, not the listener.
func TestProbePodsAndPolicy(t *testing.T) {
	e, _ := probeEngine(t, 0, Options{RuntimeClass: "gvisor"})
	pol := e.probePolicy("abcd")
	sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	listener := e.probePod("l", "abcd", "git-sandbox-proxy:abc", "--listen", ":8080")
	client := e.probePod("c", "abcd", "git-sandbox-proxy:abc", "--connect", "10.1.2.3:8080")
	if sel.Matches(labels.Set(listener.Labels)) || !sel.Matches(labels.Set(client.Labels)) {
		t.Errorf("the policy selects %v: listener %v, client %v", sel, listener.Labels, client.Labels)
	}
	if len(pol.Spec.Egress) != 0 || len(pol.Spec.PolicyTypes) != 1 || pol.Spec.PolicyTypes[0] != "Egress" {
		t.Errorf("the policy does not deny every connection out: %+v", pol.Spec)
	}
	c := client.Spec.Containers[0]
	sc := c.SecurityContext
	if c.Image != "git-sandbox-proxy:abc" || c.ImagePullPolicy != corev1.PullNever || c.Command[0] != "/git-sandbox" || c.Command[1] != "__netprobe" ||
		*sc.RunAsUser == 0 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || sc.Capabilities.Drop[0] != "ALL" ||
		*client.Spec.AutomountServiceAccountToken || *client.Spec.RuntimeClassName != "gvisor" || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("client Pod: %+v", client.Spec)
	}
	e2, _ := probeEngine(t, 0, Options{ProxyImage: "registry.example/git-sandbox-proxy:abc"})
	if c := e2.probePod("c", "abcd", "git-sandbox-proxy:abc", "--connect", "x:1").Spec.Containers[0]; c.Image != "registry.example/git-sandbox-proxy:abc" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("with proxy_image: %s %s", c.Image, c.ImagePullPolicy)
	}
}

// A state directory that cannot keep the answer costs the next start a
// probe, not this one its answer.
func TestAnAnswerThatCannotBeKeptIsStillTheAnswer(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, _ := probeEngine(t, netprobe.ExitBlocked, Options{StateDir: notADir})
	if warning, err := e.RequireIsolation(context.Background(), "git-sandbox-proxy:abc"); err != nil || warning != "" {
		t.Errorf("RequireIsolation = %q, %v; want nothing", warning, err)
	}
}
