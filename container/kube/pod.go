package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/git-sandbox/git-sandbox/container"
)

// podFor is the Pod of a container's given run: the spec's process,
// environment, limits and claims, hardened as the Docker engine hardens a
// container and as the "restricted" Pod Security Standard asks (the
// engine's non-root uid, never privileged, no capabilities, no privilege
// escalation, the runtime's default seccomp profile), with no
// service-account token and no service links, and one process namespace
// (pause signals every process of it). The claims are the Pods' group's
// (fsGroup), changed only where their root is not yet.
func (e *Engine) podFor(r *record, run int, aliases []corev1.HostAlias) (*corev1.Pod, error) {
	s := &r.spec
	if _, _, err := parseUser(s.User); err != nil {
		return nil, fmt.Errorf("container %s: %w", s.Name, err)
	}
	uid, gid := e.runAs()
	labels := objectLabels(s, r.object())
	labels[labelRun] = strconv.Itoa(run)
	for _, n := range r.networks() {
		labels[labelNetPrefix+n] = "1"
	}
	if s.Network == container.NetworkOpen && s.NetworkName == "" {
		labels[labelOpen] = "1"
	}
	yes, no := true, false
	grace := int64(10)
	onMismatch := corev1.FSGroupChangeOnRootMismatch
	c := mainContainerOf(s, uid, gid)
	c.ImagePullPolicy = e.pullPolicy(s)
	c.Resources = resourcesOf(s.Limits, e.requestOf(s))
	volumes, mounts, err := e.claimsOf(s)
	if err != nil {
		return nil, err
	}
	c.VolumeMounts = mounts
	hostname := strings.ToLower(s.Hostname)
	if !isDNSLabel(hostname) {
		hostname = ""
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        podName(r.object(), run),
			Labels:      labels,
			Annotations: map[string]string{annName: s.Name, annLabels: r.cm.Annotations[annLabels]},
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			Volumes:                       volumes,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ShareProcessNamespace:         &yes,
			Hostname:                      hostname,
			HostAliases:                   aliases,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:           &uid,
				RunAsGroup:          &gid,
				RunAsNonRoot:        &yes,
				FSGroup:             &gid,
				FSGroupChangePolicy: &onMismatch,
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	if e.opts.RuntimeClass != "" {
		rc := e.opts.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	if g := labels[labelSandbox]; g != "" && len(volumes) > 0 {
		// A sandbox's Pods share its claims: keep them on one node (the
		// first Pod of a sandbox matches itself, which the scheduler
		// allows).
		pod.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelSandbox: g}},
				TopologyKey:   "kubernetes.io/hostname",
			}},
		}}
	}
	return pod, nil
}

// runAs is the uid and gid of every Pod of the engine.
func (e *Engine) runAs() (uid, gid int64) {
	uid, gid = e.opts.RunAsUser, e.opts.RunAsGroup
	if uid <= 0 {
		uid = DefaultRunAs
	}
	if gid <= 0 {
		gid = uid
	}
	return uid, gid
}

// mainContainerOf is the Pod's one container: the spec's process,
// environment and limits, as uid and gid, hardened.
func mainContainerOf(s *container.Spec, uid, gid int64) corev1.Container {
	no, nonRoot := false, true
	c := corev1.Container{
		Name:            mainContainer,
		Image:           s.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         commandOf(s),
		Args:            argsOf(s),
		WorkingDir:      s.WorkDir,
		TTY:             s.TTY,
		Stdin:           s.OpenStdin,
		StdinOnce:       s.StdinOnce,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                &uid,
			RunAsGroup:               &gid,
			RunAsNonRoot:             &nonRoot,
			Privileged:               &no,
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &s.ReadOnlyRoot,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	return c
}

// claimsOf are the Pod's volumes, one per claim the spec mounts, and the
// main container's mounts of them; a host path is refused.
func (e *Engine) claimsOf(s *container.Spec) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	claimVolume := map[string]string{}
	for _, m := range s.Mounts {
		if !m.Volume {
			return nil, nil, fmt.Errorf("container %s: engine %s cannot mount %s from this machine", s.Name, e.opts.Name, m.Source)
		}
		claim := objectName(m.Source)
		vname, ok := claimVolume[claim]
		if !ok {
			vname = "v" + strconv.Itoa(len(volumes))
			claimVolume[claim] = vname
			volumes = append(volumes, corev1.Volume{Name: vname, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}})
		}
		mounts = append(mounts, corev1.VolumeMount{Name: vname, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	return volumes, mounts, nil
}

// commandOf is the Pod's command, which replaces the image's entrypoint:
// the spec's entrypoint when it names one, else its command (argsOf is
// then nil).
func commandOf(s *container.Spec) []string {
	if len(s.Entrypoint) > 0 {
		return s.Entrypoint
	}
	return s.Argv
}

// argsOf is the Pod's arguments: the spec's command after its entrypoint.
func argsOf(s *container.Spec) []string {
	if len(s.Entrypoint) > 0 {
		return s.Argv
	}
	return nil
}

// pullPolicy is how a node gets the container's image: git sandbox's own
// proxy image is never pulled unless the engine names a registry's copy
// (proxy_image): its own tag names no registry, so a node without it says
// so at once instead of trying one.
func (e *Engine) pullPolicy(s *container.Spec) corev1.PullPolicy {
	if s.ToolImage && e.opts.ProxyImage == "" {
		return corev1.PullNever
	}
	return corev1.PullIfNotPresent
}

// parseUser reads "uid[:gid]".
func parseUser(u string) (int64, int64, error) {
	us, gs, hasG := strings.Cut(u, ":")
	uid, err := strconv.ParseInt(us, 10, 64)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("user %q: Pods run as a numeric uid[:gid]", u)
	}
	gid := uid
	if hasG {
		if gid, err = strconv.ParseInt(gs, 10, 64); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("user %q: Pods run as a numeric uid[:gid]", u)
		}
	}
	return uid, gid, nil
}

// request is what a Pod asks the scheduler to reserve on a node.
type request struct {
	MemoryBytes int64
	MilliCPU    int64
}

// waiterRequest is the request of the Pods that mostly wait beside a
// sandbox: its helper (busy only while a snapshot is read) and its egress
// proxy.
var waiterRequest = request{MemoryBytes: 32 << 20, MilliCPU: 10}

// requestOf is what the container's Pod reserves: the engine's request for
// a sandbox's own work (its agent, verify, commit hooks), a little for
// its helper and its egress proxy.
func (e *Engine) requestOf(s *container.Spec) request {
	switch s.Labels[container.LabelRole] {
	case container.RoleHelper, container.RoleProxy:
		return waiterRequest
	}
	return request{MemoryBytes: e.opts.MemoryRequest, MilliCPU: int64(e.opts.CPURequest * 1000)}
}

// resourcesOf maps the sandbox limits onto the Pod's: the limits as they
// are, the requests as asked and never above the limits (a request of the
// whole limit, 8 GiB of memory by default, is more than a small node can
// give each sandbox before anything runs). A request is written even when
// it is 0: left out, Kubernetes would make it the limit. Kubernetes has
// no pids limit per Pod; the kubelet's podPidsLimit is the cluster's.
func resourcesOf(l container.Limits, req request) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if l.MemoryBytes > 0 {
		r.Limits[corev1.ResourceMemory] = *resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
		req.MemoryBytes = min(req.MemoryBytes, l.MemoryBytes)
	}
	if l.MemoryBytes > 0 || req.MemoryBytes > 0 {
		r.Requests[corev1.ResourceMemory] = *resource.NewQuantity(req.MemoryBytes, resource.BinarySI)
	}
	if l.CPUs > 0 {
		limit := int64(l.CPUs * 1000)
		r.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(limit, resource.DecimalSI)
		req.MilliCPU = min(req.MilliCPU, limit)
	}
	if l.CPUs > 0 || req.MilliCPU > 0 {
		r.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(req.MilliCPU, resource.DecimalSI)
	}
	return r
}

// hostAliases are the names of the other running members of the
// container's networks, so that it reaches them by name as on a Docker
// network (the agent finds its egress proxy so), and its spec's Hosts.
// They are fixed when the Pod is made.
func (e *Engine) hostAliases(ctx context.Context, r *record) ([]corev1.HostAlias, error) {
	byIP := map[string]map[string]bool{}
	for _, h := range r.spec.Hosts {
		byIP[h.Addr.String()] = map[string]bool{h.Name: true}
	}
	for _, n := range r.networks() {
		pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelNetPrefix + n + "=1"})
		if err != nil {
			return nil, fmt.Errorf("find the members of network %s: %w", n, kerr(err))
		}
		for _, p := range pods.Items {
			if p.Labels[labelContainer] == r.object() || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			names := byIP[p.Status.PodIP]
			if names == nil {
				names = map[string]bool{}
				byIP[p.Status.PodIP] = names
			}
			names[p.Labels[labelContainer]] = true
			if n := strings.ToLower(p.Annotations[annName]); n != "" && isHostname(n) {
				names[n] = true
			}
		}
	}
	var out []corev1.HostAlias
	for ip, names := range byIP {
		a := corev1.HostAlias{IP: ip}
		for n := range names {
			a.Hostnames = append(a.Hostnames, n)
		}
		sort.Strings(a.Hostnames)
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP < out[j].IP })
	return out, nil
}

// isHostname reports whether s is a lower-case DNS name.
func isHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !isDNSLabel(part) {
			return false
		}
	}
	return true
}
