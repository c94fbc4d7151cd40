package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// podCheck looks at a Pod's latest state (nil: it is gone) and says
// whether the wait is over, or why it cannot be.
type podCheck func(p *corev1.Pod) (done bool, err error)

// podRecheck is how often a wait reads the Pod again whatever its watch
// said: a watch the API server closed, or one that missed an event, costs
// at most that long.
var podRecheck = 2 * time.Second

// waitPod waits up to d until check is done with the Pod called name. It
// watches the Pod, so a change reaches it as the API server has it, not at
// the next tick of a poll (a Pod's start is seen up to a poll's period
// sooner, twice per sandbox start); it also reads the Pod again every
// podRecheck. It returns context.DeadlineExceeded when d passed.
func (e *Engine) waitPod(ctx context.Context, name string, d time.Duration, check podCheck) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	pods := e.cs.CoreV1().Pods(e.ns)
	// The watch first, then the read: nothing that happens in between is
	// missed.
	var events <-chan watch.Event
	if w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}); err == nil {
		defer w.Stop()
		events = w.ResultChan()
	}
	recheck := time.NewTicker(podRecheck)
	defer recheck.Stop()
	read := func() (bool, error) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return check(nil)
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, kerr(err)
		}
		return check(p)
	}
	done, err := read()
	for !done && err == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-recheck.C:
			done, err = read()
		case ev, ok := <-events:
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case !ok:
				events = nil // closed: the rechecks carry on
				done, err = read()
			case !isPod || p.Name != name:
			case ev.Type == watch.Deleted:
				done, err = check(nil)
			default:
				done, err = check(p)
			}
		}
	}
	return err
}
