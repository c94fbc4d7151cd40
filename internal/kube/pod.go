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
	"github.com/git-sandbox/git-sandbox/internal/config"
)

// podFor is the Pod of a container's given run: the spec's process,
// environment, limits and claims, hardened as the Docker engine hardens a
// container (the spec's user, never privileged, no capabilities, no
// privilege escalation, the runtime's default seccomp profile), with no
// service-account token and no service links, and one process namespace
// (pause signals every process of it).
func (e *Engine) podFor(r *record, run int, aliases []corev1.HostAlias) (*corev1.Pod, error) {
	s := &r.spec
	uid, gid, err := parseUser(s.User)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", s.Name, err)
	}
	labels := objectLabels(s, r.object())
	labels[labelRun] = strconv.Itoa(run)
	for _, n := range r.networks() {
		labels[labelNetPrefix+n] = "1"
	}
	if s.Network == container.NetworkOpen && s.NetworkName == "" {
		labels[labelOpen] = "1"
	}
	yes, no := true, false
	nonRoot := uid != 0
	grace := int64(10)
	c := corev1.Container{
		Name:            mainContainer,
		Image:           s.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         s.Argv,
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
		Resources: resourcesOf(s.Limits),
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	var volumes []corev1.Volume
	claimVolume := map[string]string{}
	for _, m := range s.Mounts {
		if !m.Volume {
			return nil, fmt.Errorf("container %s: engine %s cannot mount %s from this machine", s.Name, e.opts.Name, m.Source)
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
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vname, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	hostname := strings.ToLower(s.Hostname)
	if !config.IsDNSLabel(hostname) {
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
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				RunAsNonRoot:   &nonRoot,
				FSGroup:        &gid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
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

// resourcesOf maps the sandbox limits onto the Pod's: the limits as they
// are, and requests of the whole memory (a sandbox is not overcommitted)
// and a tenth of the CPU (agents mostly wait). Kubernetes has no pids
// limit per Pod; the kubelet's podPidsLimit is the cluster's.
func resourcesOf(l container.Limits) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if l.MemoryBytes > 0 {
		q := *resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
		r.Limits[corev1.ResourceMemory] = q
		r.Requests[corev1.ResourceMemory] = q
	}
	if l.CPUs > 0 {
		r.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(l.CPUs*1000), resource.DecimalSI)
		req := int64(l.CPUs * 100)
		if req < 10 {
			req = 10
		}
		r.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(req, resource.DecimalSI)
	}
	return r
}

// hostAliases are the names of the other running members of the
// container's networks, so that it reaches them by name as on a Docker
// network (the agent finds its egress proxy so). They are fixed when the
// Pod is made.
func (e *Engine) hostAliases(ctx context.Context, r *record) ([]corev1.HostAlias, error) {
	byIP := map[string]map[string]bool{}
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
		if !config.IsDNSLabel(part) {
			return false
		}
	}
	return true
}
