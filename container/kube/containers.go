package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

var listOne = metav1.ListOptions{Limit: 1}

// record is a container as the engine keeps it: its ConfigMap.
type record struct {
	cm   *corev1.ConfigMap
	spec container.Spec
}

func (r *record) object() string { return r.cm.Name }
func (r *record) run() int {
	n, _ := strconv.Atoi(r.cm.Annotations[annRun])
	return n
}
func (r *record) networks() []string {
	var nets []string
	_ = json.Unmarshal([]byte(r.cm.Annotations[annNetworks]), &nets)
	return nets
}

// podName is the Pod of a container's nth start.
func podName(object string, run int) string { return object + "-" + strconv.Itoa(run) }

func (e *Engine) getRecord(ctx context.Context, id string) (*record, error) {
	cm, err := e.cs.CoreV1().ConfigMaps(e.ns).Get(ctx, objectName(id), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound("container", id)
		}
		return nil, kerr(err)
	}
	return recordOf(cm)
}

func recordOf(cm *corev1.ConfigMap) (*record, error) {
	if cm.Labels[labelManaged] != "1" {
		return nil, notFound("container", cm.Name)
	}
	r := &record{cm: cm}
	if err := json.Unmarshal([]byte(cm.Data["spec"]), &r.spec); err != nil {
		return nil, fmt.Errorf("container %s: its record is damaged: %w", cm.Name, err)
	}
	return r, nil
}

// getPod returns the Pod of a container's given start, or nil.
func (e *Engine) getPod(ctx context.Context, r *record, run int) (*corev1.Pod, error) {
	if run <= 0 {
		return nil, nil
	}
	p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, podName(r.object(), run), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return p, kerr(err)
}

// patchRecord merges annotations into a container's record ("" removes
// one).
func (e *Engine) patchRecord(ctx context.Context, object string, ann map[string]string) error {
	m := map[string]any{}
	for k, v := range ann {
		if v == "" {
			m[k] = nil
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
	if err != nil {
		return err
	}
	_, err = e.cs.CoreV1().ConfigMaps(e.ns).Patch(ctx, object, types.MergePatchType, b, metav1.PatchOptions{})
	return kerr(err)
}

// Create records the container; its Pod is made at Start.
func (e *Engine) Create(ctx context.Context, spec *container.Spec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
	}
	for _, m := range spec.Mounts {
		if !m.Volume {
			return "", fmt.Errorf("engine %s cannot mount %s from this machine: Pods mount claims only", e.opts.Name, m.Source)
		}
	}
	if len(spec.Ports) > 0 || spec.NetworkAlias != "" {
		return "", fmt.Errorf("engine %s does not publish ports", e.opts.Name)
	}
	s := spec.Clone()
	switch {
	case s.ToolImage && e.opts.ProxyImage != "":
		s.Image = e.opts.ProxyImage
	case !s.ToolImage && e.opts.Image != "":
		s.Image = e.opts.Image
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	labels, err := json.Marshal(s.Labels)
	if err != nil {
		return "", err
	}
	object := objectName(s.Name)
	var nets []string
	if s.NetworkName != "" {
		nets = append(nets, objectName(s.NetworkName))
	}
	netsJSON, _ := json.Marshal(nets)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:   object,
			Labels: objectLabels(s, object),
			Annotations: map[string]string{
				annName: s.Name, annLabels: string(labels), annRun: "0", annNetworks: string(netsJSON),
			},
		},
		Data: map[string]string{"spec": string(b)},
	}
	if _, err := e.cs.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return "", container.WithKind(container.ErrConflict, fmt.Errorf("container name %s is in use on engine %s", s.Name, e.opts.Name))
		}
		return "", fmt.Errorf("create container %s: %w", s.Name, kerr(err))
	}
	return object, nil
}

// objectLabels are the selectable labels of a container's objects.
func objectLabels(s *container.Spec, object string) map[string]string {
	l := map[string]string{labelManaged: "1", labelContainer: object}
	if role := s.Labels[container.LabelRole]; isLabelValue(role) {
		l[labelRole] = role
	}
	if repo, branch := s.Labels[container.LabelRepo], s.Labels[container.LabelBranch]; repo != "" || branch != "" {
		l[labelSandbox] = hashLabel(repo + "\x00" + branch)
	}
	if k := s.Labels[specPoolLabel]; isLabelValue(k) {
		l[labelPool] = k
	}
	return l
}

// isLabelValue reports whether s can be a label value as it is.
func isLabelValue(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			(i > 0 && i < len(s)-1 && (c == '-' || c == '_' || c == '.'))
		if !ok {
			return false
		}
	}
	return true
}

// Start makes the container's Pod for its next run and waits until its
// process runs (or the cluster says why it cannot).
func (e *Engine) Start(ctx context.Context, id string) error { return e.start(ctx, id, true) }

// start makes the container's Pod for its next run, and with wait waits
// until its process runs.
func (e *Engine) start(ctx context.Context, id string, wait bool) error {
	r, err := e.getRecord(ctx, id)
	if err != nil {
		return err
	}
	run := r.run()
	if old, err := e.getPod(ctx, r, run); err != nil {
		return err
	} else if old != nil && !podEnded(old) && !mainEnded(old) && old.DeletionTimestamp == nil {
		return nil // running already (a Pod whose main container ended is not, while its phase lags)
	}
	if err := e.ensureIsolation(ctx); err != nil {
		return err
	}
	if r.spec.Network == container.NetworkOpen && r.spec.NetworkName == "" {
		if err := e.ensureOpenPolicy(ctx); err != nil {
			return err
		}
	}
	aliases, err := e.hostAliases(ctx, r)
	if err != nil {
		return err
	}
	pod, err := e.podFor(r, run+1, aliases)
	if err != nil {
		return err
	}
	created, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("start %s: %w", r.spec.Name, kerr(err))
	}
	if err := e.patchRecord(ctx, r.object(), map[string]string{annRun: strconv.Itoa(run + 1), annStopped: "", annPaused: ""}); err != nil {
		_ = e.deletePod(context.WithoutCancel(ctx), created.Name, 0)
		return err
	}
	if run > 0 {
		_ = e.deletePod(ctx, podName(r.object(), run), 0)
	}
	if !wait {
		return nil
	}
	err = e.waitStarted(ctx, r.spec.Name, created.Name)
	if err != nil && r.spec.ToolImage {
		return e.toolImageError(r.spec.Image, err)
	}
	return e.imageError(podImage(pod), err)
}

// podImage is the image a Pod's main container runs.
func podImage(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	return p.Spec.Containers[0].Image
}

// pullFailed reports whether err is a Pod that does not start for its
// image.
func pullFailed(err error) (*startError, bool) {
	var s *startError
	ok := errors.As(err, &s) && slices.Contains([]string{"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName"}, s.reason)
	return s, ok
}

// imageError says what to do when the nodes cannot pull a sandbox's
// image: push it where the engine's image setting names.
func (e *Engine) imageError(image string, err error) error {
	s, ok := pullFailed(err)
	if !ok {
		return err
	}
	ue := usererr.Wrap(err, "engine %s: the cluster's nodes cannot pull the image %s (%s)", e.opts.Name, image, s.reason)
	if e.opts.Image == "" {
		return ue.Hint("set image = \"REGISTRY/NAME:TAG\" in [[engine]] %s, then git sandbox image push --engine %s puts your image there", e.opts.Name, e.opts.Name)
	}
	return ue.Hint("git sandbox image push --engine %s pushes your image (git sandbox image build makes it) to %s", e.opts.Name, e.opts.Image).
		Hint("or load it into each node's container runtime under that name")
}

// toolImageError says what to do when the cluster's node lacks git
// sandbox's own (proxy) image, which no registry holds unless the user
// pushed it there.
func (e *Engine) toolImageError(image string, err error) error {
	s, ok := pullFailed(err)
	if !ok {
		return err
	}
	ue := usererr.Wrap(err, "engine %s: the node has no image %s, git sandbox's egress proxy (%s)", e.opts.Name, image, s.reason)
	if e.opts.ProxyImage != "" {
		return ue.Hint("push the image git sandbox image proxy makes to %s, where the nodes pull it from (proxy_image of [[engine]] %s)", e.opts.ProxyImage, e.opts.Name)
	}
	return ue.Hint("git sandbox image proxy makes it on a local Docker engine; push it to a registry the nodes pull from and set proxy_image = \"REGISTRY/%s\" in [[engine]] %s", strings.TrimPrefix(image, "docker.io/library/"), e.opts.Name).
		Hint("or load it into each node's container runtime under that tag (docker save %s | ctr -n k8s.io images import -)", image).
		Hint("or start with --network none or --network open, which need no proxy")
}

// waitStarted waits until a new Pod's main container runs or ended, and
// turns what keeps it from running into an error with a hint.
func (e *Engine) waitStarted(ctx context.Context, name, pod string) error {
	var why error
	err := e.waitPod(ctx, pod, 5*time.Minute, func(p *corev1.Pod) (bool, error) {
		if p == nil {
			return false, notFound("Pod", pod)
		}
		if p.Status.Phase == corev1.PodRunning || podEnded(p) {
			return true, nil
		}
		why = pendingReason(p)
		if why != nil && permanent(why) {
			return false, why
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && why != nil {
		err = why
	}
	_ = e.deletePod(context.WithoutCancel(ctx), pod, 0)
	return fmt.Errorf("start %s on engine %s: %w", name, e.opts.Name, err)
}

// startError is a reason a Pod does not start.
type startError struct {
	reason, message string
	final           bool
}

func (s *startError) Error() string {
	msg := s.reason
	if s.message != "" {
		msg += ": " + s.message
	}
	switch s.reason {
	case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
		msg += " (the cluster's nodes must be able to pull or already have the image; set image = in the engine's config)"
	case "Unschedulable":
		msg += " (no node can take the Pod: its memory and CPU limits, or its claims)"
	}
	return msg
}

func permanent(err error) bool {
	var s *startError
	return errors.As(err, &s) && s.final
}

// pendingReason says why a pending Pod has not started, or nil.
func pendingReason(p *corev1.Pod) error {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			final := slices.Contains([]string{"ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}, w.Reason) ||
				imageNotThere(w.Reason, w.Message)
			return &startError{reason: w.Reason, message: w.Message, final: final}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return &startError{reason: c.Reason, message: c.Message}
		}
	}
	return nil
}

// imageNotThere reports whether a pull failed because the registry has no
// such image (an answer, not a registry out of reach: no wait mends it).
func imageNotThere(reason, message string) bool {
	if reason != "ErrImagePull" && reason != "ImagePullBackOff" {
		return false
	}
	m := strings.ToLower(message)
	return strings.Contains(m, ": not found") || strings.Contains(m, "manifest unknown")
}

func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (e *Engine) deletePod(ctx context.Context, name string, grace int64) error {
	err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return kerr(err)
}

// runningPod returns the Pod of the container's current run when it
// runs.
func (e *Engine) runningPod(ctx context.Context, id string) (*record, *corev1.Pod, error) {
	r, err := e.getRecord(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p, err := e.getPod(ctx, r, r.run())
	if err != nil {
		return nil, nil, err
	}
	if p == nil || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || mainEnded(p) {
		return r, nil, notRunning(r.spec.Name)
	}
	return r, p, nil
}

// mainEnded reports whether the Pod's main container has terminated
// (the phase follows a moment later).
func mainEnded(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == mainContainer && cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// signalScript sends $1 to the container's main process: the oldest
// process after the Pod's own init (PID 1) whose parent is outside the
// Pod's process namespace. Processes of execs have such a parent too,
// but start later.
const signalScript = `sig=$1
for p in $(ls /proc | grep -E '^[0-9]+$' | sort -n); do
	[ "$p" -gt 1 ] && [ "$p" != $$ ] || continue
	s=$(cat /proc/$p/stat 2>/dev/null) || continue
	s=${s##*) }
	set -- $s
	if [ "$2" = 0 ]; then kill -s "$sig" "$p"; exit $?; fi
done
exit 3`

// signal sends a signal to the main process of a running Pod.
func (e *Engine) signal(ctx context.Context, pod, sig string) error {
	sig = strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	code, err := e.execIn(ctx, pod, []string{"/bin/sh", "-c", signalScript, "git-sandbox-signal", sig}, container.Streams{})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("signal %s to the main process of %s: exit %d", sig, pod, code)
	}
	return nil
}

// Stop sends SIGTERM to the main process, SIGKILL after timeout; the
// ended Pod keeps its exit code and output.
func (e *Engine) Stop(ctx context.Context, id string, timeout time.Duration) error {
	r, p, err := e.runningPod(ctx, id)
	if container.IsNotFound(err) || container.IsConflict(err) {
		return nil // gone, or not running: nothing to stop
	}
	if err != nil {
		return err
	}
	if err := e.patchRecord(ctx, r.object(), map[string]string{annStopped: "1"}); err != nil {
		return err
	}
	_ = e.signal(ctx, p.Name, "TERM")
	if r.cm.Annotations[annPaused] != "" {
		_, _ = e.execIn(ctx, p.Name, []string{"/bin/sh", "-c", "kill -CONT -1"}, container.Streams{})
		_ = e.patchRecord(ctx, r.object(), map[string]string{annPaused: ""})
	}
	if e.waitEnded(ctx, p.Name, timeout) {
		return nil
	}
	_ = e.signal(ctx, p.Name, "KILL")
	if e.waitEnded(ctx, p.Name, 10*time.Second) {
		return nil
	}
	return e.deletePod(ctx, p.Name, 0)
}

// waitEnded waits up to d for a Pod's main container to end.
func (e *Engine) waitEnded(ctx context.Context, pod string, d time.Duration) bool {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		return podEnded(p) || mainEnded(p), nil
	})
	return err == nil
}

// Kill sends a signal to the container's main process.
func (e *Engine) Kill(ctx context.Context, id, sig string) error {
	r, p, err := e.runningPod(ctx, id)
	if err != nil {
		return err
	}
	if s := strings.TrimPrefix(strings.ToUpper(sig), "SIG"); s == "KILL" || s == "TERM" || s == "INT" {
		_ = e.patchRecord(ctx, r.object(), map[string]string{annStopped: "1"})
	}
	return e.signal(ctx, p.Name, sig)
}

// Pause stops every process of the Pod (SIGSTOP, twice: a process forked
// during the first pass is caught by the second).
func (e *Engine) Pause(ctx context.Context, id string) error {
	r, p, err := e.runningPod(ctx, id)
	if err != nil {
		return err
	}
	if r.cm.Annotations[annPaused] != "" {
		return container.WithKind(container.ErrConflict, fmt.Errorf("container %s is paused already", r.spec.Name))
	}
	if err := e.patchRecord(ctx, r.object(), map[string]string{annPaused: "1"}); err != nil {
		return err
	}
	if _, err := e.execIn(ctx, p.Name, []string{"/bin/sh", "-c", "kill -STOP -1; kill -STOP -1; exit 0"}, container.Streams{}); err != nil {
		_ = e.patchRecord(context.WithoutCancel(ctx), r.object(), map[string]string{annPaused: ""})
		return fmt.Errorf("pause %s: %w", r.spec.Name, err)
	}
	return nil
}

// Unpause continues every process of the Pod.
func (e *Engine) Unpause(ctx context.Context, id string) error {
	r, p, err := e.runningPod(ctx, id)
	if err != nil {
		return err
	}
	if r.cm.Annotations[annPaused] == "" {
		return container.WithKind(container.ErrConflict, fmt.Errorf("container %s is not paused", r.spec.Name))
	}
	if _, err := e.execIn(ctx, p.Name, []string{"/bin/sh", "-c", "kill -CONT -1; exit 0"}, container.Streams{}); err != nil {
		return fmt.Errorf("unpause %s: %w", r.spec.Name, err)
	}
	return e.patchRecord(ctx, r.object(), map[string]string{annPaused: ""})
}

// Remove deletes the container's Pods and its record.
func (e *Engine) Remove(ctx context.Context, id string) error {
	object := objectName(id)
	zero := int64(0)
	err := e.cs.CoreV1().Pods(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: labelContainer + "=" + object})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, kerr(err))
	}
	err = e.cs.CoreV1().ConfigMaps(e.ns).Delete(ctx, object, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, kerr(err))
	}
	return nil
}

// stateOf is a container's state from its record and current Pod.
func stateOf(r *record, p *corev1.Pod) container.State {
	st := container.State{
		ID: r.object(), Name: r.spec.Name, Labels: r.spec.Labels, Image: r.spec.Image,
		TTY: r.spec.TTY, OpenStdin: r.spec.OpenStdin, Mounts: map[string]string{},
	}
	switch {
	case r.run() == 0:
		st.Status = "created"
	case p == nil || p.Status.Phase == corev1.PodUnknown || (p.Status.Phase == corev1.PodFailed && !mainEnded(p)):
		if r.cm.Annotations[annStopped] != "" {
			st.Status, st.ExitCode = "exited", 137
		} else {
			st.Status, st.ExitCode = container.StatusLost, -1
		}
	case podEnded(p) || mainEnded(p) || p.DeletionTimestamp != nil:
		st.Status = "exited"
		st.ExitCode = -1
		if t := mainTerminated(p); t != nil {
			st.ExitCode, st.OOMKilled = int(t.ExitCode), t.Reason == "OOMKilled"
			st.Started, st.Finished = t.StartedAt.Time, t.FinishedAt.Time
		}
	case r.cm.Annotations[annPaused] != "":
		st.Status, st.Running, st.Paused = "paused", true, true
	default:
		st.Status, st.Running = "running", true
	}
	if p != nil && st.Started.IsZero() {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == mainContainer && cs.State.Running != nil {
				st.Started = cs.State.Running.StartedAt.Time
			}
		}
	}
	if st.Status == "exited" || st.Status == container.StatusLost {
		code := st.ExitCode
		st.ListExitCode = &code
	}
	return st
}

func mainTerminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == mainContainer && cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

// Inspect returns a container's state.
func (e *Engine) Inspect(ctx context.Context, id string) (*container.State, error) {
	r, err := e.getRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := e.getPod(ctx, r, r.run())
	if err != nil {
		return nil, err
	}
	st := stateOf(r, p)
	return &st, nil
}

// List returns the containers carrying every label (key=value).
func (e *Engine) List(ctx context.Context, labels ...string) ([]container.State, error) {
	sel := metav1.ListOptions{LabelSelector: labelManaged + "=1"}
	cms, err := e.cs.CoreV1().ConfigMaps(e.ns).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list containers on engine %s: %w", e.opts.Name, kerr(err))
	}
	pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list Pods on engine %s: %w", e.opts.Name, kerr(err))
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	var out []container.State
	for i := range cms.Items {
		r, err := recordOf(&cms.Items[i])
		if err != nil || !hasLabels(r.spec.Labels, labels) {
			continue
		}
		// Pause shows as Docker lists it: paused, not running.
		st := stateOf(r, byName[podName(r.object(), r.run())])
		if st.Paused {
			st.Running = false
		}
		out = append(out, st)
	}
	return out, nil
}

// hasLabels reports whether l carries every key=value (or key) given.
func hasLabels(l map[string]string, want []string) bool {
	for _, kv := range want {
		k, v, hasV := strings.Cut(kv, "=")
		got, ok := l[k]
		if !ok || (hasV && got != v) {
			return false
		}
	}
	return true
}

// WaitExit yields the container's exit. For WaitNextExit it waits for the
// end of the run going on, or of the next one when none is.
func (e *Engine) WaitExit(ctx context.Context, id string, cond container.WaitCondition) <-chan container.WaitResult {
	out := make(chan container.WaitResult, 1)
	r, err := e.getRecord(ctx, id)
	if err != nil {
		out <- container.WaitResult{Code: -1, Err: err}
		return out
	}
	target := r.run()
	if p, err := e.getPod(ctx, r, target); err != nil {
		out <- container.WaitResult{Code: -1, Err: err}
		return out
	} else if p == nil || podEnded(p) || mainEnded(p) {
		if cond == container.WaitNextExit || target == 0 {
			target++
		} else {
			st := stateOf(r, p)
			out <- container.WaitResult{Code: st.ExitCode, Err: lostErr(st)}
			return out
		}
	}
	go func() { out <- e.waitRun(ctx, r.object(), target) }()
	return out
}

func lostErr(st container.State) error {
	if st.Status == container.StatusLost {
		return fmt.Errorf("container %s: %w", st.Name, errLost)
	}
	return nil
}

// waitRun waits for the end of a container's given run.
func (e *Engine) waitRun(ctx context.Context, object string, run int) container.WaitResult {
	name := podName(object, run)
	seen := false
	for {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			seen = true
			if podEnded(p) || mainEnded(p) {
				code := -1
				if t := mainTerminated(p); t != nil {
					code = int(t.ExitCode)
				}
				return container.WaitResult{Code: code}
			}
		case apierrors.IsNotFound(err):
			// Gone, or not made yet: the record says which.
			r, rerr := e.getRecord(ctx, object)
			if rerr != nil {
				return container.WaitResult{Code: -1, Err: rerr}
			}
			if seen || r.run() > run {
				st := stateOf(r, nil)
				if st.Status == container.StatusLost {
					return container.WaitResult{Code: -1, Err: lostErr(st)}
				}
				return container.WaitResult{Code: st.ExitCode}
			}
		case ctx.Err() != nil:
			return container.WaitResult{Code: -1, Err: ctx.Err()}
		}
		select {
		case <-ctx.Done():
			return container.WaitResult{Code: -1, Err: ctx.Err()}
		case <-time.After(250 * time.Millisecond):
		}
	}
}
