package config

import (
	"strings"
	"testing"
)

func TestEngines(t *testing.T) {
	l, err := Load(setup(t, `default_engine = "auto"
[[engine]]
name = "big"
host = "ssh://me@box"
max_sandboxes = 3
[[engine]]
name = "lan"
host = "tcp://10.0.0.2:2376"
cert_path = "/certs"
mode = "bind"
[[engine]]
name = "sock"
host = "unix:///run/other.sock"
[[engine]]
name = "ctx"
context = "work"
[[engine]]
name = "k8s"
kind = "kubernetes"
kubeconfig = "~/.kube/config"
context = "prod"
namespace = "agents"
image = "registry.example/git-sandbox:1"
runtime_class = "gvisor"
storage_class = "fast-ssd"
volume_size = "20Gi"
network_policy = "unenforced-ok"
max_sandboxes = 10
`, ""))
	if err != nil {
		t.Fatal(err)
	}
	if l.DefaultEngine != "auto" || len(l.Engines) != 5 {
		t.Fatalf("loaded %+v", l.Engines)
	}
	for name, copyMode := range map[string]bool{"big": true, "lan": false, "sock": false, "ctx": true, "k8s": true} {
		e, err := l.EngineNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		if e.CopyMode() != copyMode {
			t.Errorf("%s: copy mode %v, want %v", name, e.CopyMode(), copyMode)
		}
	}
	if k, _ := l.EngineNamed("k8s"); k.NetworkPolicy != NetworkPolicyUnenforcedOK {
		t.Errorf("k8s network_policy = %q", k.NetworkPolicy)
	}
	if _, err := l.EngineNamed("nope"); err == nil || !strings.Contains(err.Error(), "no engine") {
		t.Errorf("EngineNamed(nope) = %v", err)
	}
}

func TestEnginesRefused(t *testing.T) {
	for _, tc := range []struct{ name, user, want string }{
		{"no name", "[[engine]]\nhost = \"ssh://a\"\n", "needs a name"},
		{"named auto", "[[engine]]\nname = \"auto\"\nhost = \"ssh://a\"\n", "needs a name"},
		{"twice", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\n[[engine]]\nname = \"a\"\nhost = \"ssh://b\"\n", "named twice"},
		{"no host", "[[engine]]\nname = \"a\"\n", "exactly one of host and context"},
		{"host and context", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\ncontext = \"x\"\n", "exactly one of host and context"},
		{"scheme", "[[engine]]\nname = \"a\"\nhost = \"http://a\"\n", "must start with"},
		{"cert for ssh", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\ncert_path = \"/c\"\n", "cert_path is for a tcp"},
		{"mode", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nmode = \"mirror\"\n", "must be auto, bind or copy"},
		{"negative cap", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nmax_sandboxes = -1\n", "max_sandboxes"},
		{"unknown kind", "[[engine]]\nname = \"a\"\nkind = \"nomad\"\n", "must be docker or kubernetes"},
		{"kubernetes with a host", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nhost = \"ssh://a\"\n", "reached through its kubeconfig"},
		{"kubernetes bind", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nmode = \"bind\"\n", "always copies"},
		{"kubernetes namespace", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nnamespace = \"Agents_1\"\n", "not a Kubernetes namespace"},
		{"kubernetes size", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nvolume_size = \"lots\"\n", "not a size"},
		{"kubernetes network_policy", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nnetwork_policy = \"off\"\n", "the one setting is"},
		{"network_policy on docker", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nnetwork_policy = \"unenforced-ok\"\n", "are for kind"},
		{"kubernetes keys on docker", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nnamespace = \"x\"\n", "are for kind"},
		{"requests on docker", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nmemory_request = \"1g\"\n", "are for kind"},
		{"run as on docker", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nrun_as_user = 1000\n", "are for kind"},
		{"kubernetes as root", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nrun_as_user = 0\n", "never runs as root"},
		{"kubernetes group root", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nrun_as_group = 0\n", "never runs as root"},
		{"kubernetes memory request", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\nmemory_request = \"lots\"\n", "memory_request"},
		{"kubernetes cpu request", "[[engine]]\nname = \"a\"\nkind = \"kubernetes\"\ncpu_request = -1.0\n", "cpu_request"},
		{"default names none", "default_engine = \"b\"\n[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\n", "names no [[engine]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(setup(t, tc.user, ""))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// A Kubernetes engine's Pods request little and run as a fixed non-root
// uid by default; the loaded config says so (config show prints it), and
// the user's settings replace the defaults.
func TestKubernetesPodSettings(t *testing.T) {
	l, err := Load(setup(t, `[[engine]]
name = "k8s"
kind = "kubernetes"
[[engine]]
name = "mine"
kind = "kubernetes"
memory_request = "1g"
cpu_request = 0.5
run_as_user = 4321
`, ""))
	if err != nil {
		t.Fatal(err)
	}
	k, mine := &l.Engines[0], &l.Engines[1]
	if k.MemoryRequest != DefaultMemoryRequest || k.CPURequest != DefaultCPURequest || *k.RunAsUser != DefaultRunAsUser || *k.RunAsGroup != DefaultRunAsUser {
		t.Errorf("defaults not in the loaded config: %+v", k)
	}
	if mem, cpus := k.Requests(); mem != 256<<20 || cpus != 0.1 {
		t.Errorf("default requests %d, %g", mem, cpus)
	}
	if mem, cpus := mine.Requests(); mem != 1<<30 || cpus != 0.5 {
		t.Errorf("requests %d, %g", mem, cpus)
	}
	if uid, gid := mine.RunAs(); uid != 4321 || gid != 4321 {
		t.Errorf("run as %d:%d, want 4321:4321 (the group follows the uid)", uid, gid)
	}
}

func TestRepositoryMayNotChooseEngines(t *testing.T) {
	for _, repo := range []string{"default_engine = \"x\"\n", "[[engine]]\nname = \"x\"\nhost = \"ssh://evil\"\n",
		"[[engine]]\nname = \"x\"\nkind = \"kubernetes\"\nnetwork_policy = \"unenforced-ok\"\n"} {
		if _, err := Load(setup(t, "", repo)); err == nil || !strings.Contains(err.Error(), "may not ask for") {
			t.Errorf("repository config %q: %v", repo, err)
		}
	}
}
