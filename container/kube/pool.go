package kube

// The warm pool (warm_pods = N): copy-mode helpers made ahead of the
// starts that take them, the idea of kubernetes-sigs/agent-sandbox's
// SandboxWarmPool. A helper of the pool is a record, its four claims and
// its Pod, running: scheduled, its image pulled on its node, its claims
// bound and empty. A start takes one (its record changes hands under the
// API server's optimistic lock, so two starts never take the same) and
// then ships its files into it; the agent's Pod follows it onto its node,
// where the image already is. The agent's own Pod is not pooled: a Pod's
// command, environment and mounts are fixed when it is made.
//
// Isolation: a helper of the pool holds nothing of a sandbox until taken
// (its claims are new and empty, the entry is never given back), joins no
// network (the namespace's isolate policy covers it from the start, as it
// covers every helper), and is labelled with its sandbox only once taken.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/git-sandbox/git-sandbox/container"
)

const (
	// labelPool marks the objects of a helper of the pool with its kind
	// (poolKey); a taken helper loses it.
	labelPool = "git-sandbox.io/pool"
	// specPoolLabel carries the kind in the spec of a pool's helper.
	specPoolLabel = "git-sandbox.pool"
	// poolPrefix begins the names of the pool's helpers and claims.
	poolPrefix = "git-sandbox-pool-"
	// poolClaims is how many claims a pooled helper holds: a copy-mode
	// sandbox's worktree, git directory, home and helper state.
	poolClaims = 4
	// poolFillTimeout bounds the top-up made when the engine is closed.
	poolFillTimeout = 30 * time.Second
)

var _ container.HelperPool = (*Engine)(nil)

// poolKey is the kind of helper spec s makes: everything of it but its
// name, its sandbox's labels and its volumes' names, with the engine's
// settings that shape its Pod. Only a helper of the same kind is taken.
func (e *Engine) poolKey(s *container.Spec) string {
	n := s.Clone()
	n.Name = ""
	delete(n.Labels, container.LabelRepo)
	delete(n.Labels, container.LabelBranch)
	delete(n.Labels, specPoolLabel)
	for i := range n.Mounts {
		n.Mounts[i].Source = ""
	}
	uid, gid := e.runAs()
	b, _ := json.Marshal(struct {
		Spec                               *container.Spec
		Image, RuntimeClass, Storage, Size string
		UID, GID                           int64
	}{n, e.opts.Image, e.opts.RuntimeClass, e.opts.StorageClass, e.opts.VolumeSize, uid, gid})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// TakeHelper hands a ready helper of spec's kind over to spec's sandbox,
// and has the pool topped up for that kind when the engine is closed.
func (e *Engine) TakeHelper(ctx context.Context, spec *container.Spec, volumeLabels map[string]string) (*container.TakenHelper, error) {
	if e.opts.WarmPods <= 0 {
		return nil, nil
	}
	e.poolMu.Lock()
	e.poolFill = spec.Clone()
	e.poolMu.Unlock()
	key := e.poolKey(spec)
	cms, err := e.cs.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelPool + "=" + key})
	if err != nil {
		return nil, fmt.Errorf("engine %s: read the warm pool: %w", e.opts.Name, kerr(err))
	}
	// Starts at the same moment try the helpers in different orders.
	mrand.Shuffle(len(cms.Items), func(i, j int) { cms.Items[i], cms.Items[j] = cms.Items[j], cms.Items[i] })
	for i := range cms.Items {
		r, err := recordOf(&cms.Items[i])
		if err != nil {
			continue
		}
		p, err := e.getPod(ctx, r, r.run())
		if err != nil || !poolReady(p) {
			continue
		}
		taken, err := e.take(ctx, r, p, spec, volumeLabels)
		if errors.Is(err, errTakenAlready) {
			continue
		}
		return taken, err
	}
	return nil, nil
}

var errTakenAlready = errors.New("taken by another start")

// take makes a pooled helper spec's sandbox's: its record first, under
// the API server's optimistic lock (another start that took it first
// makes this one fail with errTakenAlready), then its Pod's and claims'
// labels. A helper taken halfway is removed.
func (e *Engine) take(ctx context.Context, r *record, p *corev1.Pod, spec *container.Spec, volumeLabels map[string]string) (*container.TakenHelper, error) {
	s := r.spec.Clone()
	s.Labels = spec.Clone().Labels
	delete(s.Labels, specPoolLabel)
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	labels, _ := json.Marshal(s.Labels)
	cm := r.cm.DeepCopy()
	cm.Data["spec"] = string(b)
	cm.Labels = objectLabels(s, cm.Name)
	cm.Annotations[annLabels] = string(labels)
	if _, err := e.cs.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil, errTakenAlready
		}
		return nil, fmt.Errorf("engine %s: take a helper of the warm pool: %w", e.opts.Name, kerr(err))
	}
	podLabels := map[string]any{labelPool: nil}
	for k, v := range objectLabels(s, cm.Name) {
		podLabels[k] = v
	}
	err = e.patchMeta(ctx, "pods", p.Name, podLabels, map[string]any{annLabels: string(labels)})
	vl, _ := json.Marshal(volumeLabels)
	taken := &container.TakenHelper{Name: s.Name, Volumes: map[string]string{}}
	for _, m := range s.Mounts {
		taken.Volumes[m.Target] = m.Source
		if err == nil {
			err = e.patchMeta(ctx, "persistentvolumeclaims", objectName(m.Source), nil, map[string]any{annLabels: string(vl)})
		}
	}
	if err != nil {
		e.removeEntry(context.WithoutCancel(ctx), s)
		return nil, fmt.Errorf("engine %s: take a helper of the warm pool: %w", e.opts.Name, err)
	}
	return taken, nil
}

// patchMeta merges labels and annotations (nil values remove) into a
// Pod's or a claim's.
func (e *Engine) patchMeta(ctx context.Context, resource, name string, labels, annotations map[string]any) error {
	meta := map[string]any{}
	if labels != nil {
		meta["labels"] = labels
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	switch resource {
	case "pods":
		_, err = e.cs.CoreV1().Pods(e.ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	default:
		_, err = e.cs.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	}
	return kerr(err)
}

// poolReady reports whether a pooled helper's Pod runs and may be taken.
func poolReady(p *corev1.Pod) bool {
	return p != nil && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !mainEnded(p)
}

// poolBroken reports whether a pooled helper will never run: its Pod is
// gone, ended, or cannot start.
func poolBroken(p *corev1.Pod) bool {
	if p == nil || podEnded(p) || mainEnded(p) || p.DeletionTimestamp != nil {
		return true
	}
	return permanent(pendingReason(p))
}

// fillPool tops the pool up to WarmPods helpers of template's kind, made
// without waiting for them: the cluster brings them up while nobody
// waits. Helpers of another kind (an image or a version of the past) and
// broken ones are removed.
func (e *Engine) fillPool(ctx context.Context, template *container.Spec) error {
	key := e.poolKey(template)
	entries, err := e.poolEntries(ctx)
	if err != nil {
		return err
	}
	have := 0
	for _, en := range entries {
		if en.key != key || poolBroken(en.pod) || have >= e.opts.WarmPods {
			e.removeEntry(ctx, &en.r.spec)
			continue
		}
		have++
	}
	for ; have < e.opts.WarmPods; have++ {
		if err := e.makeEntry(ctx, template, key); err != nil {
			return err
		}
	}
	return nil
}

// poolEntry is a helper of the pool, with its Pod (nil when it has none).
type poolEntry struct {
	r   *record
	pod *corev1.Pod
	key string
}

// poolEntries lists the pool's helpers.
func (e *Engine) poolEntries(ctx context.Context) ([]poolEntry, error) {
	sel := metav1.ListOptions{LabelSelector: labelPool}
	cms, err := e.cs.CoreV1().ConfigMaps(e.ns).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("engine %s: read the warm pool: %w", e.opts.Name, kerr(err))
	}
	pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("engine %s: read the warm pool: %w", e.opts.Name, kerr(err))
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	var out []poolEntry
	for i := range cms.Items {
		r, err := recordOf(&cms.Items[i])
		if err != nil {
			continue
		}
		out = append(out, poolEntry{r: r, pod: byName[podName(r.object(), r.run())], key: cms.Items[i].Labels[labelPool]})
	}
	return out, nil
}

// makeEntry makes one helper of the pool: its record first (whatever else
// is made is found through it), its claims, then its Pod, not waited for.
func (e *Engine) makeEntry(ctx context.Context, template *container.Spec, key string) error {
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	name := poolPrefix + hex.EncodeToString(rnd[:])
	s := template.Clone()
	s.Name = name + "-helper"
	delete(s.Labels, container.LabelRepo)
	delete(s.Labels, container.LabelBranch)
	s.Labels[specPoolLabel] = key
	for i := range s.Mounts {
		// name-ws, name-git, … as the sandbox's own would be.
		s.Mounts[i].Source = name + "-" + s.Mounts[i].Source[strings.LastIndex(s.Mounts[i].Source, "-")+1:]
	}
	id, err := e.Create(ctx, s)
	if err != nil {
		return err
	}
	err = func() error {
		for _, m := range s.Mounts {
			if _, err := e.CreateVolume(ctx, container.VolumeSpec{Name: m.Source, Labels: map[string]string{specPoolLabel: key}}); err != nil {
				return err
			}
		}
		return e.start(ctx, id, false)
	}()
	if err != nil {
		e.removeEntry(context.WithoutCancel(ctx), s)
	}
	return err
}

// removeEntry removes a helper and its claims.
func (e *Engine) removeEntry(ctx context.Context, s *container.Spec) {
	_ = e.Remove(ctx, s.Name)
	for _, m := range s.Mounts {
		_ = e.RemoveVolume(ctx, m.Source)
	}
}

// Pool says what the pool holds and reserves, removing its broken helpers
// (or, with drain, all of them).
func (e *Engine) Pool(ctx context.Context, drain bool) (container.PoolStatus, error) {
	st := container.PoolStatus{Size: e.opts.WarmPods, Cost: e.poolCost()}
	entries, err := e.poolEntries(ctx)
	if err != nil {
		return st, err
	}
	for _, en := range entries {
		switch {
		case drain || poolBroken(en.pod):
			e.removeEntry(ctx, &en.r.spec)
			st.Removed++
		case poolReady(en.pod):
			st.Ready++
		default:
			st.Starting++
		}
	}
	return st, nil
}

// poolCost says what a full pool reserves on the cluster.
func (e *Engine) poolCost() string { return PoolCost(e.opts.WarmPods, e.opts.VolumeSize) }

// PoolCost says what a pool of warmPods helpers reserves on a cluster
// whose claims ask for volumeSize ("": 10Gi): each helper's Pod requests,
// and its claims.
func PoolCost(warmPods int, volumeSize string) string {
	if warmPods <= 0 {
		return "nothing (warm_pods = 0)"
	}
	if volumeSize == "" {
		volumeSize = "10Gi"
	}
	mem := resource.NewQuantity(waiterRequest.MemoryBytes, resource.BinarySI)
	return fmt.Sprintf("%d helper Pods requesting %s of memory and %dm CPU each, and %d claims of %s",
		warmPods, mem, waiterRequest.MilliCPU, warmPods*poolClaims, volumeSize)
}

// fillOnClose tops the pool up for the kind of helper the last start of
// this process asked for (Close calls it).
func (e *Engine) fillOnClose() {
	e.poolMu.Lock()
	s := e.poolFill
	e.poolFill = nil
	e.poolMu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), poolFillTimeout)
	defer cancel()
	_ = e.fillPool(ctx, s)
}
