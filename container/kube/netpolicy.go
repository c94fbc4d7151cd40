package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/netprobe"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// NetworkPolicyUnenforcedOK is network_policy = "unenforced-ok" of an
// engine: allowlist sandboxes run on a cluster that does not enforce
// NetworkPolicy, where their agents can connect past the egress proxy,
// and every start says so.
const NetworkPolicyUnenforcedOK = "unenforced-ok"

// Enforcement is what the probe found out about the engine's namespace.
type Enforcement struct {
	Server    string    `json:"server"`
	Namespace string    `json:"namespace"`
	Enforced  bool      `json:"enforced"`
	Checked   time.Time `json:"checked"`
	// OpenFor is how long the probe's client, a new Pod, could still
	// connect before the plugin's rules stopped it (-1: it did not say).
	OpenFor time.Duration `json:"open_for"`
	// Cached says the answer came from the cache, not a probe just now.
	Cached bool `json:"-"`
}

// enforcementTTL is how long a probe's answer is taken on trust; doctor
// always probes again.
const enforcementTTL = 24 * time.Hour

// The probe's Pods and policy.
const (
	labelProbe  = "git-sandbox.io/probe"
	probePort   = 8080
	probeWindow = 10 * time.Second
	// probeTimeout bounds the whole probe: two small Pods.
	probeTimeout = 2 * time.Minute
)

// RequireIsolation is asked before an allowlist sandbox's proxy starts,
// with the proxy's image (which every node that runs allowlist sandboxes
// has). Allowlist mode holds on a cluster only where its network plugin
// enforces NetworkPolicy: where it does not, the agent's Pod connects
// anywhere past the proxy. It returns nil when the cluster enforces it;
// a refusal when it does not, or the probe cannot tell, unless the
// engine's config says network_policy = "unenforced-ok": then a warning
// to show the user instead.
func (e *Engine) RequireIsolation(ctx context.Context, image string) (warning string, err error) {
	en, err := e.NetworkPolicy(ctx, image, false)
	accepted := e.opts.NetworkPolicy == NetworkPolicyUnenforcedOK
	switch {
	case err != nil && accepted:
		return fmt.Sprintf("engine %s: whether the cluster enforces NetworkPolicy is unknown (%v); network_policy = %q lets allowlist sandboxes run anyway", e.opts.Name, err, NetworkPolicyUnenforcedOK), nil
	case err != nil:
		if _, ok := usererr.As(err); ok {
			return "", err // the proxy's image is missing: its own hints
		}
		return "", usererr.Wrap(err, "engine %s: cannot find out whether the cluster enforces NetworkPolicy in namespace %s, which allowlist mode needs: %v", e.opts.Name, e.ns, err).
			Hint("git sandbox doctor probes it again; to run allowlist sandboxes without knowing, set network_policy = %q in [[engine]] %s of %s", NetworkPolicyUnenforcedOK, e.opts.Name, e.opts.ConfigFile)
	case en.Enforced:
		return "", nil
	case accepted:
		return fmt.Sprintf("engine %s: the cluster does not enforce NetworkPolicy in namespace %s: the agent can connect past the egress proxy (network_policy = %q)", e.opts.Name, e.ns, NetworkPolicyUnenforcedOK), nil
	}
	return "", usererr.New("engine %s: the cluster does not enforce NetworkPolicy in namespace %s (probed %s): an allowlist sandbox's agent could connect anywhere past the egress proxy",
		e.opts.Name, e.ns, en.Checked.Local().Format(time.DateTime)).
		Hint("run a network plugin that enforces NetworkPolicy (Calico, Cilium, kube-router, …), then git sandbox doctor probes the cluster again").
		Hint("or start with --network none or open; or accept it: network_policy = %q in [[engine]] %s of %s", NetworkPolicyUnenforcedOK, e.opts.Name, e.opts.ConfigFile)
}

// NetworkPolicy says whether the cluster enforces NetworkPolicy in the
// engine's namespace: the cached answer when there is one under a day
// old, unless fresh; else the probe's, which is cached (Options.StateDir,
// by the cluster's address and the namespace). The probe runs two Pods
// of image: a listener, and a client that a policy denies every
// connection out and that tries to reach the listener.
func (e *Engine) NetworkPolicy(ctx context.Context, image string, fresh bool) (Enforcement, error) {
	e.probeMu.Lock()
	defer e.probeMu.Unlock()
	file := e.enforcementFile()
	if !fresh {
		if en, ok := readEnforcement(file, e.rest.Host, e.ns, e.now()); ok {
			return en, nil
		}
	}
	enforced, open, err := e.probeNetworkPolicy(ctx, image)
	if err != nil {
		return Enforcement{}, err
	}
	en := Enforcement{Server: e.rest.Host, Namespace: e.ns, Enforced: enforced, Checked: e.now(), OpenFor: open}
	if file != "" {
		// An answer that cannot be kept costs the next start a probe,
		// nothing else.
		_ = writeEnforcement(file, en)
	}
	return en, nil
}

// enforcementFile is where the probe's answer for the engine's cluster
// and namespace is kept ("" for nowhere).
func (e *Engine) enforcementFile() string {
	if e.opts.StateDir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(e.rest.Host + "\x00" + e.ns))
	return filepath.Join(e.opts.StateDir, "kubernetes", "networkpolicy-"+hex.EncodeToString(sum[:12])+".json")
}

func readEnforcement(file, server, ns string, now time.Time) (Enforcement, bool) {
	if file == "" {
		return Enforcement{}, false
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return Enforcement{}, false
	}
	var en Enforcement
	if json.Unmarshal(b, &en) != nil || en.Server != server || en.Namespace != ns ||
		now.Sub(en.Checked) > enforcementTTL || en.Checked.After(now) {
		return Enforcement{}, false
	}
	en.Cached = true
	return en, true
}

func writeEnforcement(file string, en Enforcement) error {
	b, err := json.Marshal(en)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".networkpolicy-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// probeNetworkPolicy runs the probe: true when the client was blocked,
// and how long it could connect first (-1: unknown). Its Pods and policy
// are removed however it ends.
func (e *Engine) probeNetworkPolicy(ctx context.Context, image string) (enforced bool, open time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	name := "git-sandbox-probe-" + id
	target, client, control := name+"-target", name+"-client", name+"-control"
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = e.deletePod(cctx, client, 0)
		_ = e.deletePod(cctx, control, 0)
		_ = e.deletePod(cctx, target, 0)
		_ = e.cs.NetworkingV1().NetworkPolicies(e.ns).Delete(cctx, name, metav1.DeleteOptions{})
	}()
	if _, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Create(ctx, e.probePolicy(id), metav1.CreateOptions{}); err != nil {
		return false, -1, fmt.Errorf("create the probe's NetworkPolicy: %w", kerr(err))
	}
	tp := e.probePod(target, id, image, "--listen", ":"+strconv.Itoa(probePort))
	tp.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(probePort)}},
		PeriodSeconds: 1,
	}
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, tp, metav1.CreateOptions{}); err != nil {
		return false, -1, fmt.Errorf("create the probe's listener Pod: %w", kerr(err))
	}
	p, err := e.waitProbePod(ctx, target, func(p *corev1.Pod) bool { return podReady(p) && p.Status.PodIP != "" })
	if err != nil {
		// The proxy's image missing on the node is what the proxy's own
		// start would have said, with what to do.
		return false, -1, e.toolImageError(tp.Spec.Containers[0].Image, fmt.Errorf("the probe's listener Pod: %w", err))
	}
	addr := p.Status.PodIP + ":" + strconv.Itoa(probePort)
	if strings.Contains(p.Status.PodIP, ":") {
		addr = "[" + p.Status.PodIP + "]:" + strconv.Itoa(probePort)
	}
	// A control client the policy does not select must connect first: a
	// client blocked by something else (a firewall between nodes, load)
	// says nothing of the policy. Both run on the listener's node.
	if p, err := e.runProbeClient(ctx, control, id, image, addr, "control", p.Spec.NodeName); err != nil {
		return false, -1, err
	} else if code := exitCode(p); code != netprobe.ExitConnected {
		return false, -1, fmt.Errorf("the probe cannot tell: its control client, which no policy limits, could not reach the listener either (code %d): %s", code, e.podLogTail(ctx, control))
	}
	p, err = e.runProbeClient(ctx, client, id, image, addr, "client", p.Spec.NodeName)
	if err != nil {
		return false, -1, err
	}
	switch code := exitCode(p); code {
	case netprobe.ExitBlocked:
		open, ok := netprobe.ParseOpen(e.podLogTail(ctx, client))
		if !ok {
			open = -1
		}
		return true, open, nil
	case netprobe.ExitConnected:
		return false, -1, nil
	default:
		return false, -1, fmt.Errorf("the probe's client Pod ended with code %d: %s", code, e.podLogTail(ctx, client))
	}
}

// runProbeClient runs one of the probe's clients (role "client", which
// the probe's policy selects, or "control") on node against addr, to its
// end.
func (e *Engine) runProbeClient(ctx context.Context, name, id, image, addr, role, node string) (*corev1.Pod, error) {
	cp := e.probePod(name, id, image, "--connect", addr, "--window", probeWindow.String())
	cp.Labels[labelRole] = role
	cp.Spec.NodeName = node
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, cp, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create the probe's %s Pod: %w", role, kerr(err))
	}
	p, err := e.waitProbePod(ctx, name, podEnded)
	if err != nil {
		return nil, fmt.Errorf("the probe's %s Pod: %w", role, err)
	}
	return p, nil
}

// probePolicy denies the probe's client every connection out.
func (e *Engine) probePolicy(id string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "git-sandbox-probe-" + id, Labels: map[string]string{labelProbe: id}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelProbe: id, labelRole: "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
}

// probePod is one of the probe's Pods: image's git-sandbox with args,
// hardened as the sandboxes' Pods are, small, as the engine's user.
func (e *Engine) probePod(name, id, image string, args ...string) *corev1.Pod {
	role := "client"
	if args[0] == "--listen" {
		role = "listener"
	}
	spec := &container.Spec{ToolImage: true, Image: image}
	if e.opts.ProxyImage != "" {
		spec.Image = e.opts.ProxyImage
	}
	uid, gid := e.runAs()
	yes, no, grace := true, false, int64(1)
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelProbe: id, labelRole: role}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: mainContainer, Image: spec.Image, ImagePullPolicy: e.pullPolicy(spec),
				Command: append([]string{proxyimage.Path, "__netprobe"}, args...),
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: &yes,
					Privileged: &no, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources: corev1.ResourceRequirements{Requests: small, Limits: small},
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	if e.opts.RuntimeClass != "" {
		rc := e.opts.RuntimeClass
		p.Spec.RuntimeClassName = &rc
	}
	return p
}

// waitProbePod polls the Pod until done says so; a Pod that cannot start
// (its image missing, say) or that ended before is an error.
func (e *Engine) waitProbePod(ctx context.Context, name string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	for {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			return nil, kerr(err)
		case done(p):
			return p, nil
		case podEnded(p):
			return nil, fmt.Errorf("it ended (%s): %s", p.Status.Phase, e.podLogTail(ctx, name))
		}
		// A node that cannot pull the image is not waited out: the
		// proxy would not start there either.
		var se *startError
		if err := pendingReason(p); errors.As(err, &se) && (se.final || se.reason == "ErrImagePull" || se.reason == "ImagePullBackOff") {
			return nil, err
		}
		select {
		case <-ctx.Done():
			if err := pendingReason(p); err != nil {
				return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// exitCode is the exit code of an ended Pod's main container (-1 when
// none is reported).
func exitCode(p *corev1.Pod) int {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == mainContainer && cs.State.Terminated != nil {
			return int(cs.State.Terminated.ExitCode)
		}
	}
	return -1
}

// podLogTail is the end of a Pod's log, for an error.
func (e *Engine) podLogTail(ctx context.Context, name string) string {
	tail := int64(5)
	rc, err := e.cs.CoreV1().Pods(e.ns).GetLogs(name, &corev1.PodLogOptions{Container: mainContainer, TailLines: &tail}).Stream(ctx)
	if err != nil {
		return "no log: " + err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 2048))
	return strings.TrimSpace(string(b))
}
