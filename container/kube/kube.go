// Package kube is the Kubernetes backend of container.Engine: it runs
// sandboxes as Pods of a cluster, behind the same seam as Docker, and
// always in copy mode (a Pod cannot mount this machine's files). It does
// not import the Docker SDK (internal/lint checks it).
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
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/git-sandbox/git-sandbox/container"
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
	// Image replaces every container's image when set (git sandbox's own
	// proxy image excepted): the reference the cluster's nodes run.
	Image string
	// ProxyImage is where the nodes pull git sandbox's egress proxy image
	// from (pushed there by the user); "" means the nodes have it under its
	// own tag, loaded into their container runtime, and never pull it.
	ProxyImage string
	// RuntimeClass is the Pods' runtimeClassName.
	RuntimeClass string
	// StorageClass is the claims' class ("": the cluster's default);
	// VolumeSize what each claim asks for ("": 10Gi).
	StorageClass, VolumeSize string
	// MemoryRequest (bytes) and CPURequest are what the Pods of a
	// sandbox's own work (agent, verify, commit hooks) ask the scheduler
	// to reserve (0: nothing); never more than their limits.
	MemoryRequest int64
	CPURequest    float64
	// RunAsUser and RunAsGroup are the uid and gid of every Pod, whatever
	// user its spec names (0: DefaultRunAs): nothing on a cluster needs
	// this machine's uid, and no Pod runs as root.
	RunAsUser, RunAsGroup int64
	// NetworkPolicy is "" (allowlist mode only where the cluster enforces
	// NetworkPolicy) or NetworkPolicyUnenforcedOK.
	NetworkPolicy string
	// StateDir is where the NetworkPolicy probe's answers are kept ("":
	// nowhere, every first use probes).
	StateDir string
	// WarmPods is how many copy-mode helpers the engine keeps ready for
	// the next starts (0: none).
	WarmPods int
	// ConfigFile is the user's config file that names the engine, for
	// hints.
	ConfigFile string
}

// DefaultRunAs is the uid and gid of the Pods of an engine whose options
// name none.
const DefaultRunAs = 1000

var _ container.Engine = (*Engine)(nil)

// Engine runs sandboxes on a Kubernetes cluster.
type Engine struct {
	opts Options
	cs   kubernetes.Interface
	rest *rest.Config
	ns   string
	// isolated is set once the namespace's isolate policy is known to
	// exist (made by the first start of this engine's process).
	isolated atomic.Bool
	// probeMu keeps this process to one NetworkPolicy probe at a time.
	probeMu sync.Mutex
	// poolMu guards poolFill, the helper spec the pool is topped up
	// for when the engine is closed (nil: no start asked for one).
	poolMu   sync.Mutex
	poolFill *container.Spec
	// now is the clock (tests).
	now func() time.Time
}

func init() {
	// client-go logs through klog to stderr; what matters reaches the
	// user as errors, so its log is discarded. (A logger that writes
	// through klog itself, as klog.NewKlogr does, would call itself for
	// ever on the first error client-go logs: verbosity does not hold
	// errors back.)
	klog.SetLogger(logr.Discard())
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
			Hint("set kubeconfig (and context) of [[engine]] %s in %s, or KUBECONFIG", o.Name, o.ConfigFile)
	}
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "git-sandbox"
	if f := tracef; f != nil {
		rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return traced{rt, f} }
	}
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

// Close tops the warm pool up after a start that asked it for a helper;
// otherwise it releases nothing: the client keeps no connection of its
// own.
func (e *Engine) Close() error {
	e.fillOnClose()
	return nil
}

// ServerVersion is the cluster's version.
func (e *Engine) ServerVersion(ctx context.Context) (string, error) {
	v, err := e.cs.Discovery().ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// Check says whether the engine can hold sandboxes: the cluster answers,
// and the namespace's Pods and policies can be listed.
func (e *Engine) Check(ctx context.Context) (string, error) {
	sv, err := e.ServerVersion(ctx)
	if err == nil {
		if _, lerr := e.cs.CoreV1().Pods(e.ns).List(ctx, listOne); lerr != nil {
			err = fmt.Errorf("cannot list Pods in namespace %s: %w", e.ns, lerr)
		} else if _, lerr := e.cs.NetworkingV1().NetworkPolicies(e.ns).List(ctx, listOne); lerr != nil {
			err = fmt.Errorf("cannot list NetworkPolicies in namespace %s: %w", e.ns, lerr)
		}
	}
	if err != nil {
		return "", usererr.Wrap(err, "%v", err).
			Hint("the engine needs to create Pods, ConfigMaps, PersistentVolumeClaims and NetworkPolicies in namespace %s", e.ns)
	}
	return fmt.Sprintf("kubernetes %s, namespace %s", sv, e.ns), nil
}

// Abilities: a cluster mounts claims only, makes them writable by the
// Pods' group (fsGroup, or the cluster's provisioner), and does nothing
// with images but run them.
func (e *Engine) Abilities() container.Abilities {
	return container.Abilities{Kind: container.KindKubernetes, VolumesWritable: true}
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
	if isDNSLabel(name) {
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

// isDNSLabel reports whether s is a DNS label (RFC 1123): what a
// namespace, a hostname or most object names must be.
func isDNSLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

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
