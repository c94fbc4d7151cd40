package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// CreateVolume makes a PersistentVolumeClaim; one of that name already
// there is returned as it is (as a Docker volume would be).
func (e *Engine) CreateVolume(ctx context.Context, s container.VolumeSpec) (*container.Volume, error) {
	size := e.opts.VolumeSize
	if size == "" {
		size = "10Gi"
	}
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return nil, fmt.Errorf("engine %s: volume_size %q: %w", e.opts.Name, size, err)
	}
	labels, _ := json.Marshal(s.Labels)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        objectName(s.Name),
			Labels:      map[string]string{labelManaged: "1"},
			Annotations: map[string]string{annName: s.Name, annLabels: string(labels)},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
	if e.opts.StorageClass != "" {
		sc := e.opts.StorageClass
		pvc.Spec.StorageClassName = &sc
	}
	claims := e.cs.CoreV1().PersistentVolumeClaims(e.ns)
	for {
		_, err = claims.Create(ctx, pvc, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create volume %s on engine %s: %w", s.Name, e.opts.Name, kerr(err))
		}
		old, err := claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // gone in between: make it
		}
		if err != nil {
			return nil, fmt.Errorf("create volume %s on engine %s: %w", s.Name, e.opts.Name, kerr(err))
		}
		if old.DeletionTimestamp == nil {
			break
		}
		// A claim of that name is being deleted (a Pod that used it, just
		// removed, is still going away): taken as it is, it would vanish
		// under the new Pod, which would then wait for it for ever.
		if err := e.waitClaimGone(ctx, pvc.Name); err != nil {
			return nil, fmt.Errorf("create volume %s on engine %s: %w", s.Name, e.opts.Name, err)
		}
	}
	return &container.Volume{Name: s.Name, Labels: s.Labels}, nil
}

// claimGoneTimeout is how long a new claim waits for an old one of its
// name to finish being deleted.
var claimGoneTimeout = 2 * time.Minute

func (e *Engine) waitClaimGone(ctx context.Context, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, claimGoneTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, kerr(err)
	})
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return usererr.New("a claim of the same name, %s, is still being deleted after %s", name, claimGoneTimeout).
			Hint("a Pod that used it has not gone yet: kubectl get pods,pvc -n %s shows which; run the command again once it has", e.ns)
	}
	return err
}

// RemoveVolume deletes a claim (its volume goes as the class says); a
// missing one is not an error.
func (e *Engine) RemoveVolume(ctx context.Context, name string) error {
	err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, objectName(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, kerr(err))
	}
	return nil
}

// ListVolumes returns the engine's claims carrying every label.
func (e *Engine) ListVolumes(ctx context.Context, labels ...string) ([]container.Volume, error) {
	list, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManaged + "=1"})
	if err != nil {
		return nil, fmt.Errorf("list volumes on engine %s: %w", e.opts.Name, kerr(err))
	}
	var out []container.Volume
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		var l map[string]string
		_ = json.Unmarshal([]byte(p.Annotations[annLabels]), &l)
		if hasLabels(l, labels) {
			out = append(out, container.Volume{Name: p.Annotations[annName], Labels: l})
		}
	}
	return out, nil
}

// CreateNetwork makes a network: a NetworkPolicy that lets its members
// (Pods labelled with it) reach each other, and anywhere when it is not
// internal. Enforcement is the cluster's network plugin's.
func (e *Engine) CreateNetwork(ctx context.Context, s container.NetworkSpec) (*container.Network, error) {
	if err := e.ensureIsolation(ctx); err != nil {
		return nil, err
	}
	object := objectName(s.Name)
	member := metav1.LabelSelector{MatchLabels: map[string]string{labelNetPrefix + object: "1"}}
	peers := []networkingv1.NetworkPolicyPeer{{PodSelector: &member}}
	egress := []networkingv1.NetworkPolicyEgressRule{{To: peers}}
	if !s.Internal {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0"}},
		}})
	}
	labels, _ := json.Marshal(s.Labels)
	internal := ""
	if s.Internal {
		internal = "1"
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:        object,
			Labels:      map[string]string{labelManaged: "1"},
			Annotations: map[string]string{annName: s.Name, annLabels: string(labels), annInternal: internal},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: member,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: peers}},
			Egress:      egress,
		},
	}
	got, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Starts that race for the shared egress network all join it.
		got, err = e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, object, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create network %s on engine %s: %w", s.Name, e.opts.Name, kerr(err))
	}
	return networkOf(got), nil
}

func networkOf(np *networkingv1.NetworkPolicy) *container.Network {
	var l map[string]string
	_ = json.Unmarshal([]byte(np.Annotations[annLabels]), &l)
	return &container.Network{
		ID: np.Name, Name: np.Annotations[annName], Internal: np.Annotations[annInternal] != "",
		Labels: l, Created: np.CreationTimestamp.Time,
	}
}

// ConnectNetwork makes a container a member of a network: its record
// says so for its next Pods, and a running Pod is labelled now. A Pod's
// address is the cluster's to give (no Abilities.FixedAddresses): addr
// must be the zero Addr.
func (e *Engine) ConnectNetwork(ctx context.Context, networkID, containerID string, addr netip.Addr) error {
	if addr.IsValid() {
		return container.WithKind(container.ErrNotSupported, fmt.Errorf("connect %s to network %s at %v: a cluster gives a Pod its address", containerID, networkID, addr))
	}
	net := objectName(networkID)
	if _, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, net, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("connect %s to network %s: %w", containerID, networkID, kerr(err))
	}
	r, err := e.getRecord(ctx, containerID)
	if err != nil {
		return err
	}
	nets := r.networks()
	for _, n := range nets {
		if n == net {
			return nil
		}
	}
	nets = append(nets, net)
	b, _ := json.Marshal(nets)
	if err := e.patchRecord(ctx, r.object(), map[string]string{annNetworks: string(b)}); err != nil {
		return err
	}
	if p, err := e.getPod(ctx, r, r.run()); err == nil && p != nil && !podEnded(p) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{labelNetPrefix + net: "1"}}})
		if _, err := e.cs.CoreV1().Pods(e.ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("connect %s to network %s: %w", containerID, networkID, kerr(err))
		}
	}
	return nil
}

// RemoveNetwork deletes a network's policy; a missing one is not an
// error.
func (e *Engine) RemoveNetwork(ctx context.Context, networkID string) error {
	err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Delete(ctx, objectName(networkID), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove network %s: %w", networkID, kerr(err))
	}
	return nil
}

// ListNetworks returns the engine's networks carrying every label, oldest
// first.
func (e *Engine) ListNetworks(ctx context.Context, labels ...string) ([]container.Network, error) {
	list, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManaged + "=1"})
	if err != nil {
		return nil, fmt.Errorf("list networks on engine %s: %w", e.opts.Name, kerr(err))
	}
	var out []container.Network
	for i := range list.Items {
		np := &list.Items[i]
		if np.Annotations[annName] == "" || np.DeletionTimestamp != nil {
			continue // the isolate and open policies
		}
		if n := networkOf(np); hasLabels(n.Labels, labels) {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// ensureIsolation makes the namespace's isolate policy: every Pod of the
// engine is denied all traffic in and out but what its networks allow.
func (e *Engine) ensureIsolation(ctx context.Context) error {
	if e.isolated.Load() {
		return nil
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: isolatePolicy, Labels: map[string]string{labelManaged: "1"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelManaged: "1"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if err := e.ensurePolicy(ctx, np); err != nil {
		return err
	}
	e.isolated.Store(true)
	return nil
}

// ensureOpenPolicy lets Pods labelled open reach anywhere.
func (e *Engine) ensureOpenPolicy(ctx context.Context) error {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: openPolicy, Labels: map[string]string{labelManaged: "1"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelOpen: "1"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "::/0"}},
			}}},
		},
	}
	return e.ensurePolicy(ctx, np)
}

func (e *Engine) ensurePolicy(ctx context.Context, np *networkingv1.NetworkPolicy) error {
	_, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("engine %s: NetworkPolicy %s: %w", e.opts.Name, np.Name, kerr(err))
	}
	return nil
}

// MemoryBytes is the allocatable memory of the cluster's ready nodes.
func (e *Engine) MemoryBytes(ctx context.Context) (int64, error) {
	nodes, err := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("read the cluster's nodes: %w", kerr(err))
	}
	var total int64
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if m, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok && ready && !n.Spec.Unschedulable {
			total += m.Value()
		}
	}
	return total, nil
}

// Events reports the containers' changes, read every second (what a
// watch would give, without its reconnects).
func (e *Engine) Events(ctx context.Context, labels ...string) (<-chan container.Event, <-chan error) {
	out := make(chan container.Event, 64)
	errc := make(chan error, 1)
	go func() {
		defer close(out)
		last := map[string]container.State{}
		first := true
		for {
			list, err := e.List(ctx, labels...)
			if err != nil {
				if ctx.Err() == nil {
					errc <- err
				}
				return
			}
			now := map[string]container.State{}
			for _, st := range list {
				now[st.ID] = st
				if first {
					continue
				}
				for _, ev := range transitions(last[st.ID], st, e.now()) {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
			}
			if !first {
				for id, st := range last {
					if _, ok := now[id]; !ok {
						select {
						case out <- container.Event{ID: id, Name: st.Name, Action: container.EventDestroy, Labels: st.Labels, Time: e.now()}:
						case <-ctx.Done():
							return
						}
					}
				}
			}
			last, first = now, false
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return out, errc
}

// transitions are the events between two states of a container.
func transitions(before, after container.State, now time.Time) []container.Event {
	ev := func(a container.EventAction) container.Event {
		return container.Event{ID: after.ID, Name: after.Name, Action: a, Labels: after.Labels, Time: now}
	}
	var out []container.Event
	if before.ID == "" {
		out = append(out, ev(container.EventCreate))
	}
	switch {
	case before.Status == after.Status && before.Started.Equal(after.Started):
	case after.Status == "running" && before.Status == "paused":
		out = append(out, ev(container.EventUnpause))
	case after.Status == "paused":
		out = append(out, ev(container.EventPause))
	case after.Status == "running":
		out = append(out, ev(container.EventStart))
	case after.Status == "exited" || after.Status == container.StatusLost:
		d := ev(container.EventDie)
		code := after.ExitCode
		d.ExitCode = &code
		out = append(out, d)
	}
	return out
}
