package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/enginetest"
)

// The Kubernetes engine keeps the contract every engine keeps, over
// client-go's fake clientset with a fake kubelet that runs the suite's
// programs as far as a Pod's status shows them. The fake clientset has no
// exec, attach or log streams: what needs them is declared and skipped;
// the test cluster runs those (e2e, TestKubernetes/EngineConformance).
func TestConformance(t *testing.T) {
	const ns = "agents"
	noStreams := "client-go's fake clientset has no exec, attach or log streams"
	enginetest.Suite{
		Image: "suite-image",
		New: func(t *testing.T) container.Engine {
			cs := fake.NewClientset()
			fakeKubelet(t, cs, ns)
			return newEngine(cs, Options{Name: "k8s"}, ns)
		},
		Cannot: map[enginetest.Feature]string{
			enginetest.Exec:    noStreams,
			enginetest.Signals: "stop and kill signal the main process through an exec: " + noStreams,
			enginetest.Pause:   "pause stops the Pod's processes through an exec: " + noStreams,
			enginetest.Attach:  noStreams,
			enginetest.Logs:    noStreams + " (its logs are a fixed text)",
			enginetest.Files:   "the fake clientset runs no Pods: claims hold no files",
		},
	}.RunTests(t)
}

// fakeKubelet plays a node's kubelet for the Pods made in ns until the
// test ends: each Pod runs (its main container's status says so) and, when
// its command is one of the suite's programs that ends, terminates with
// the program's exit code.
func fakeKubelet(t *testing.T, cs kubernetes.Interface, ns string) {
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
				if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
					go runPod(ctx, cs, p)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
}

// runPod moves a new Pod to running, then to its program's end.
func runPod(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) {
	now := metav1.NewTime(time.Now())
	setStatus(ctx, cs, p, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}})
	prog, ok := enginetest.ProgramOf(p.Spec.Containers[0].Command)
	if !ok || prog.Forever {
		return
	}
	phase := corev1.PodSucceeded
	if prog.Code != 0 {
		phase = corev1.PodFailed
	}
	// A kubelet reports the container's end first and the Pod's phase a
	// moment later: an engine must not take the Pod for running then.
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(prog.Code), StartedAt: now, FinishedAt: metav1.NewTime(time.Now()),
	}}
	setStatus(ctx, cs, p, corev1.PodRunning, ended)
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Second):
	}
	setStatus(ctx, cs, p, phase, ended)
}

// setStatus writes a Pod's phase and its main container's state, as a
// kubelet does.
func setStatus(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase, st corev1.ContainerState) {
	for range 20 {
		cur, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return // deleted
		}
		cur.Status.Phase = phase
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: st}}
		if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
}
