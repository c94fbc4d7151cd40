package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Engine is one container engine from the user's config ([[engine]]):
// a Docker Engine reached over a unix socket, TCP with TLS, SSH, or a
// Docker context; or a Kubernetes cluster (kind = "kubernetes").
type Engine struct {
	// Name is how start --engine and default_engine name it.
	Name string `toml:"name"`
	// Kind is "docker" (the default) or "kubernetes".
	Kind string `toml:"kind"`
	// Host is the engine's address: unix://PATH, tcp://HOST:PORT or
	// ssh://[USER@]HOST[:PORT]. Exclusive with Context.
	Host string `toml:"host"`
	// CertPath is a directory with ca.pem, cert.pem and key.pem for a
	// tcp:// host with mutual TLS (as DOCKER_CERT_PATH).
	CertPath string `toml:"cert_path"`
	// Context names a Docker context (docker context ls) to read the
	// address and TLS files from; for a Kubernetes engine, a context of
	// its kubeconfig.
	Context string `toml:"context"`
	// Kubeconfig is a Kubernetes engine's kubeconfig file (default: the
	// KUBECONFIG variable, else ~/.kube/config).
	Kubeconfig string `toml:"kubeconfig"`
	// Namespace is where a Kubernetes engine's sandboxes live (default:
	// the context's namespace, else "default").
	Namespace string `toml:"namespace"`
	// Image is the image a Kubernetes engine's Pods run: a reference its
	// nodes can pull (git sandbox image push puts the local image there)
	// or already have.
	Image string `toml:"image"`
	// ProxyImage is where a Kubernetes engine's nodes pull git sandbox's
	// egress proxy image from: the image git sandbox image proxy makes,
	// pushed there by git sandbox image push. Without it the nodes must
	// have the image under its own tag (loaded into their runtime).
	ProxyImage string `toml:"proxy_image"`
	// RuntimeClass is the RuntimeClass of a Kubernetes engine's Pods
	// (gVisor, Kata, …).
	RuntimeClass string `toml:"runtime_class"`
	// StorageClass is the StorageClass of a Kubernetes engine's claims
	// (default: the cluster's default class).
	StorageClass string `toml:"storage_class"`
	// VolumeSize is the size each claim asks for (default 10Gi).
	VolumeSize string `toml:"volume_size"`
	// MemoryRequest and CPURequest are what a Kubernetes engine's Pods
	// of a sandbox's own work (its agent, verify, commit hooks) ask the
	// scheduler to reserve on a node: default 256m and 0.1, never more
	// than the limits ([limits]), which stay what they are. The helper and
	// the egress proxy, which mostly wait, ask for a little of their own.
	MemoryRequest string  `toml:"memory_request"`
	CPURequest    float64 `toml:"cpu_request"`
	// RunAsUser and RunAsGroup are the uid and gid every Pod of a
	// Kubernetes engine runs as (default 1000, the group the uid): the
	// files of a sandbox on a cluster belong to no user of this machine,
	// so no Pod runs as the caller's uid, nor as root.
	RunAsUser  *int64 `toml:"run_as_user"`
	RunAsGroup *int64 `toml:"run_as_group"`
	// NetworkPolicy is a Kubernetes engine's stance on a cluster that
	// does not enforce NetworkPolicy: "" refuses allowlist sandboxes there
	// (git sandbox probes the cluster at the first one), "unenforced-ok"
	// runs them with a warning at every start. Only the user's config sets
	// it: a repository's config has no [[engine]].
	NetworkPolicy string `toml:"network_policy"`
	// WarmPods is how many copy-mode helpers a Kubernetes engine keeps
	// ready (scheduled, image pulled, claims bound and empty) for the
	// next starts, which then only ship their files (0, the default:
	// none). Each costs its Pod's requests and four claims.
	WarmPods int `toml:"warm_pods"`
	// MaxSandboxes caps the sandboxes placed on the engine (0: no cap).
	MaxSandboxes int `toml:"max_sandboxes"`
	// Mode is how the sandbox's files reach the engine: "bind" mounts
	// host paths (the engine must share this machine's files), "copy"
	// keeps them in volumes on the engine, "auto" (the default) binds for
	// a local unix socket and copies otherwise.
	Mode string `toml:"mode"`
}

// Engine kinds.
const (
	EngineKindDocker     = "docker"
	EngineKindKubernetes = "kubernetes"
)

// NetworkPolicyUnenforcedOK is network_policy = "unenforced-ok".
const NetworkPolicyUnenforcedOK = "unenforced-ok"

// IsKubernetes reports whether the engine is a Kubernetes cluster.
func (e *Engine) IsKubernetes() bool { return e.Kind == EngineKindKubernetes }

// A Kubernetes engine's defaults for its Pods.
const (
	// DefaultRunAsUser is the uid (and gid) of every Pod.
	DefaultRunAsUser = 1000
	// DefaultMemoryRequest and DefaultCPURequest are what a sandbox's
	// agent Pod asks the scheduler to reserve.
	DefaultMemoryRequest = "256m"
	DefaultCPURequest    = 0.1
)

// RunAs is the uid and gid a Kubernetes engine's Pods run as.
func (e *Engine) RunAs() (uid, gid int64) {
	uid = DefaultRunAsUser
	if e.RunAsUser != nil {
		uid = *e.RunAsUser
	}
	gid = uid
	if e.RunAsGroup != nil {
		gid = *e.RunAsGroup
	}
	return uid, gid
}

// Requests are the memory (bytes) and CPUs a Kubernetes engine's agent
// Pods ask the scheduler to reserve.
func (e *Engine) Requests() (memoryBytes int64, cpus float64) {
	mem := e.MemoryRequest
	if mem == "" {
		mem = DefaultMemoryRequest
	}
	memoryBytes, _ = MemoryBytes(mem) // checked when the config was read
	cpus = e.CPURequest
	if cpus == 0 {
		cpus = DefaultCPURequest
	}
	return memoryBytes, cpus
}

// fillKubernetesDefaults writes the defaults of the Kubernetes engines'
// Pod settings into the config, so that config show prints what applies.
func fillKubernetesDefaults(engines []Engine) {
	for i := range engines {
		e := &engines[i]
		if !e.IsKubernetes() {
			continue
		}
		if e.MemoryRequest == "" {
			e.MemoryRequest = DefaultMemoryRequest
		}
		if e.CPURequest == 0 {
			e.CPURequest = DefaultCPURequest
		}
		uid, gid := e.RunAs()
		e.RunAsUser, e.RunAsGroup = &uid, &gid
	}
}

// Engine modes.
const (
	EngineModeAuto = "auto"
	EngineModeBind = "bind"
	EngineModeCopy = "copy"
)

// EngineAuto as default_engine places each new sandbox on the engine with
// the most memory left.
const EngineAuto = "auto"

// EngineNamed returns the configured engine called name.
func (l *Loaded) EngineNamed(name string) (*Engine, error) {
	for i := range l.Engines {
		if l.Engines[i].Name == name {
			return &l.Engines[i], nil
		}
	}
	var names []string
	for _, e := range l.Engines {
		names = append(names, e.Name)
	}
	ue := usererr.New("no engine %q in your config", name)
	if len(names) == 0 {
		return nil, ue.Hint("add one to %s: [[engine]] name = %q, host = \"ssh://user@box\", mode = \"copy\"", UserPath(), name)
	}
	return nil, ue.Hint("engines in %s: %s", UserPath(), strings.Join(names, ", "))
}

// CopyMode reports whether sandboxes on the engine keep their files in
// volumes on it rather than bind-mounting host paths.
func (e *Engine) CopyMode() bool {
	if e.IsKubernetes() {
		return true // a Pod cannot mount this machine's files
	}
	switch e.Mode {
	case EngineModeCopy:
		return true
	case EngineModeBind:
		return false
	}
	return !strings.HasPrefix(e.Host, "unix://") || e.Context != ""
}

// validateEngines checks the [[engine]] tables and default_engine.
func validateEngines(where string, engines []Engine, def string) error {
	seen := map[string]bool{}
	for _, e := range engines {
		bad := func(f string, a ...any) error {
			return usererr.New("%s: engine %q: %s", where, e.Name, fmt.Sprintf(f, a...)).
				Hint("an engine is [[engine]] name = \"big\", host = \"ssh://me@box\" (or tcp://… with cert_path, or context = \"NAME\"), mode = \"auto\" | \"bind\" | \"copy\"")
		}
		switch {
		case e.Name == "" || e.Name == EngineAuto || strings.ContainsAny(e.Name, " \t\n/\x00"):
			return bad("needs a name without spaces or slashes, other than %q", EngineAuto)
		case seen[e.Name]:
			return bad("is named twice")
		case e.Kind != "" && e.Kind != EngineKindDocker && e.Kind != EngineKindKubernetes:
			return bad("kind %q must be docker or kubernetes", e.Kind)
		case e.IsKubernetes():
			if err := validateKubernetes(where, e); err != nil {
				return err
			}
			seen[e.Name] = true
			continue
		case e.Kubeconfig != "" || e.Namespace != "" || e.Image != "" || e.ProxyImage != "" || e.RuntimeClass != "" || e.StorageClass != "" || e.VolumeSize != "" || e.NetworkPolicy != "":
			return bad("kubeconfig, namespace, image, proxy_image, runtime_class, storage_class, volume_size and network_policy are for kind = \"kubernetes\" (a Docker engine gets the proxy's image from git sandbox itself)")
		case e.MemoryRequest != "" || e.CPURequest != 0 || e.RunAsUser != nil || e.RunAsGroup != nil || e.WarmPods != 0:
			return bad("memory_request, cpu_request, run_as_user, run_as_group and warm_pods are for kind = \"kubernetes\" (a Docker engine's containers reserve nothing, and run as your uid)")
		case (e.Host == "") == (e.Context == ""):
			return bad("needs exactly one of host and context")
		case e.Host != "" && !hasAnyPrefix(e.Host, "unix://", "tcp://", "ssh://"):
			return bad("host %q must start with unix://, tcp:// or ssh://", e.Host)
		case e.CertPath != "" && !strings.HasPrefix(e.Host, "tcp://"):
			return bad("cert_path is for a tcp:// host")
		case e.MaxSandboxes < 0:
			return bad("max_sandboxes must be 0 (no cap) or more")
		}
		switch e.Mode {
		case "", EngineModeAuto, EngineModeBind, EngineModeCopy:
		default:
			return bad("mode %q must be auto, bind or copy", e.Mode)
		}
		seen[e.Name] = true
	}
	if def != "" && def != EngineAuto && !seen[def] {
		return usererr.New("%s: default_engine = %q names no [[engine]]", where, def).
			Hint("name one of your engines, or \"auto\"")
	}
	return nil
}

// validateKubernetes checks a kind = "kubernetes" engine.
func validateKubernetes(where string, e Engine) error {
	bad := func(f string, a ...any) error {
		return usererr.New("%s: engine %q: %s", where, e.Name, fmt.Sprintf(f, a...)).
			Hint("a Kubernetes engine is [[engine]] name = \"k8s\", kind = \"kubernetes\", kubeconfig = \"~/.kube/config\" (or context = \"NAME\"), namespace = \"agents\", image = \"registry.example/git-sandbox:latest\"")
	}
	switch {
	case e.Host != "" || e.CertPath != "":
		return bad("host and cert_path are for Docker engines; a Kubernetes engine is reached through its kubeconfig")
	case e.Mode != "" && e.Mode != EngineModeAuto && e.Mode != EngineModeCopy:
		return bad("mode %q: a Kubernetes engine always copies (its Pods cannot mount this machine's files)", e.Mode)
	case e.MaxSandboxes < 0:
		return bad("max_sandboxes must be 0 (no cap) or more")
	case e.Namespace != "" && !IsDNSLabel(e.Namespace):
		return bad("namespace %q is not a Kubernetes namespace name (lower-case letters, digits and -)", e.Namespace)
	case e.RuntimeClass != "" && !isDNSSubdomain(e.RuntimeClass):
		return bad("runtime_class %q is not a Kubernetes object name", e.RuntimeClass)
	case e.StorageClass != "" && !isDNSSubdomain(e.StorageClass):
		return bad("storage_class %q is not a Kubernetes object name", e.StorageClass)
	case e.VolumeSize != "" && !volumeSize.MatchString(e.VolumeSize):
		return bad("volume_size %q is not a size such as 10Gi or 500Mi", e.VolumeSize)
	case e.NetworkPolicy != "" && e.NetworkPolicy != NetworkPolicyUnenforcedOK:
		return bad("network_policy %q: the one setting is %q (allowlist sandboxes on a cluster that does not enforce NetworkPolicy); leave it out to refuse them there", e.NetworkPolicy, NetworkPolicyUnenforcedOK)
	case e.WarmPods < 0 || e.WarmPods > 100:
		return bad("warm_pods %d: give how many ready helpers to keep, 0 to 100", e.WarmPods)
	case e.CPURequest < 0:
		return bad("cpu_request %g: give a number of CPUs such as 0.1", e.CPURequest)
	case e.RunAsUser != nil && *e.RunAsUser < 1, e.RunAsGroup != nil && *e.RunAsGroup < 1:
		return bad("run_as_user and run_as_group must be a uid and gid above 0: a Pod never runs as root")
	}
	if _, err := MemoryBytes(e.MemoryRequest); e.MemoryRequest != "" && err != nil {
		return bad("memory_request %q: %v", e.MemoryRequest, err)
	}
	return nil
}

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	volumeSize = regexp.MustCompile(`^[1-9][0-9]*(Ki|Mi|Gi|Ti|K|M|G|T)?$`)
)

// IsDNSLabel reports whether s is a Kubernetes DNS label (a namespace or
// Pod host name): lower-case letters, digits and '-', at most 63.
func IsDNSLabel(s string) bool { return len(s) <= 63 && dnsLabel.MatchString(s) }

// isDNSSubdomain reports whether s is a Kubernetes object name.
func isDNSSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !IsDNSLabel(part) {
			return false
		}
	}
	return true
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
