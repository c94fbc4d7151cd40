// Package kube is the Kubernetes engine: it runs sandboxes as Pods of a
// cluster, behind the same engine seam (sandbox.Engine) as Docker, and
// always in copy mode (a Pod cannot mount this machine's files).
//
// The engine speaks container.Spec like the Docker one. A container is a
// ConfigMap (the record: its spec, its networks, whether it was stopped or
// paused, how many times it was started) plus, while it runs and after it
// ended, one Pod per start. Volumes are PersistentVolumeClaims, networks
// are NetworkPolicy objects over labels of the Pods that join them, pause
// is SIGSTOP of every process of the Pod (they share one process
// namespace), and logs, attach and exec go through the API server.
// Client: k8s.io/client-go.
package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Options are a Kubernetes engine's settings ([[engine]] kind =
// "kubernetes").
type Options struct {
	// Name is the engine's name in the user's config, for messages.
	Name string
	// Kubeconfig is the kubeconfig file ("": KUBECONFIG, else
	// ~/.kube/config); Context one of its contexts ("": its current one).
	Kubeconfig, Context string
	// Namespace holds every object of the engine ("": the context's,
	// else "default").
	Namespace string
	// Image replaces every container's image when set: the reference the
	// cluster's nodes run.
	Image string
	// RuntimeClass is the Pods' runtimeClassName.
	RuntimeClass string
	// StorageClass is the claims' class ("": the cluster's default);
	// VolumeSize what each claim asks for ("": 10Gi).
	StorageClass, VolumeSize string
}

// OptionsOf reads an engine's options from the user's config.
func OptionsOf(c *config.Engine) Options {
	return Options{
		Name: c.Name, Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace,
		Image: c.Image, RuntimeClass: c.RuntimeClass, StorageClass: c.StorageClass, VolumeSize: c.VolumeSize,
	}
}

// Engine runs sandboxes on a Kubernetes cluster.
type Engine struct {
	opts Options
	cs   kubernetes.Interface
	rest *rest.Config
	ns   string
	// isolated is set once the namespace's isolate policy is known to
	// exist (made by the first start of this engine's process).
	isolated atomic.Bool
	// now is the clock (tests).
	now func() time.Time
}

func init() {
	// client-go logs through klog to stderr; what matters reaches the
	// user as errors.
	klog.SetLogger(klog.NewKlogr().V(100))
	klog.LogToStderr(false)
}

// Connect reaches the cluster of o and checks that it answers.
func Connect(ctx context.Context, o Options) (*Engine, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = expandHome(o.Kubeconfig)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, usererr.Wrap(err, "engine %s: cannot read its kubeconfig: %v", o.Name, err).
			Hint("set kubeconfig (and context) of [[engine]] %s in %s, or KUBECONFIG", o.Name, config.UserPath())
	}
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "git-sandbox"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", o.Name, err)
	}
	e := &Engine{opts: o, cs: cs, rest: rc, ns: ns, now: time.Now}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().RESTClient().Get().AbsPath("/version").DoRaw(pctx); err != nil {
		return nil, usererr.Wrap(err, "engine %s: the cluster at %s does not answer: %v", o.Name, rc.Host, err).
			Hint("check the cluster (kubectl version), or the kubeconfig and context of [[engine]] %s", o.Name)
	}
	return e, nil
}

// newEngine is an engine over a given client (tests).
func newEngine(cs kubernetes.Interface, o Options, ns string) *Engine {
	return &Engine{opts: o, cs: cs, ns: ns, rest: &rest.Config{Host: "http://fake"}, now: time.Now}
}

// Namespace is where the engine keeps its objects.
func (e *Engine) Namespace() string { return e.ns }

// Close releases nothing: the client keeps no connection of its own.
func (e *Engine) Close() error { return nil }

// ServerVersion is the cluster's version.
func (e *Engine) ServerVersion(ctx context.Context) (string, error) {
	v, err := e.cs.Discovery().ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// Check says whether the engine can hold sandboxes: the cluster answers,
// and the namespace's Pods, claims and policies can be listed.
func (e *Engine) Check(ctx context.Context) (string, error) {
	sv, err := e.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	if _, err := e.cs.CoreV1().Pods(e.ns).List(ctx, listOne); err != nil {
		return "", fmt.Errorf("cannot list Pods in namespace %s: %w", e.ns, err)
	}
	if _, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).List(ctx, listOne); err != nil {
		return "", fmt.Errorf("cannot list NetworkPolicies in namespace %s: %w", e.ns, err)
	}
	return fmt.Sprintf("kubernetes %s, namespace %s", sv, e.ns), nil
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}

// Labels and annotations of the engine's objects.
const (
	labelManaged   = "git-sandbox.io/managed"
	labelContainer = "git-sandbox.io/container"
	labelRun       = "git-sandbox.io/run"
	labelRole      = "git-sandbox.io/role"
	labelSandbox   = "git-sandbox.io/sandbox"
	labelOpen      = "git-sandbox.io/open"
	// labelNetPrefix + a network's object name marks its members.
	labelNetPrefix = "net.git-sandbox.io/"

	annName     = "git-sandbox.io/name"
	annLabels   = "git-sandbox.io/labels"
	annRun      = "git-sandbox.io/run"
	annNetworks = "git-sandbox.io/networks"
	annPaused   = "git-sandbox.io/paused"
	annStopped  = "git-sandbox.io/stopped"
	annInternal = "git-sandbox.io/internal"

	// isolatePolicy selects every Pod of the engine and allows nothing:
	// what a Pod may reach is only what its networks' policies add.
	isolatePolicy = "git-sandbox-isolate"
	// openPolicy lets Pods labelled open go anywhere (network "open"
	// without a network of its own: sandboxes of older versions).
	openPolicy = "git-sandbox-open"

	mainContainer = "main"
)

var objectUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// objectName is the Kubernetes name of a Docker-style name (letters of
// both cases, digits, '_', '.', '-'): the name itself when it is a valid
// DNS label already, else a lower-case form cut to fit with a hash of the
// original, so that two names never meet and the mapping is idempotent.
func objectName(name string) string {
	if config.IsDNSLabel(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	s := strings.Trim(objectUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > 54 {
		s = strings.Trim(s[:54], "-")
	}
	if s == "" {
		s = "x"
	}
	return s + "-" + hex.EncodeToString(sum[:])[:8]
}

// hashLabel is a label value standing for a string that need not be a
// valid one.
func hashLabel(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

// kerr maps an API error onto the engine-neutral ones.
func kerr(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return container.WithKind(container.ErrNotFound, err)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return container.WithKind(container.ErrConflict, err)
	}
	return err
}

// notRunning is the error of a request that needs a running container.
func notRunning(name string) error {
	return container.WithKind(container.ErrConflict, fmt.Errorf("container %s is not running", name))
}

// notFound is the error of a container that does not exist.
func notFound(what, name string) error {
	return container.WithKind(container.ErrNotFound, fmt.Errorf("%s %s not found", what, name))
}

var errLost = errors.New("its Pod is gone (deleted, evicted, or its node was lost)")
