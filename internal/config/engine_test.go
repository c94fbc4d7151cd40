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
		{"kubernetes keys on docker", "[[engine]]\nname = \"a\"\nhost = \"ssh://a\"\nnamespace = \"x\"\n", "are for kind"},
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

func TestRepositoryMayNotChooseEngines(t *testing.T) {
	for _, repo := range []string{"default_engine = \"x\"\n", "[[engine]]\nname = \"x\"\nhost = \"ssh://evil\"\n"} {
		if _, err := Load(setup(t, "", repo)); err == nil || !strings.Contains(err.Error(), "may not ask for") {
			t.Errorf("repository config %q: %v", repo, err)
		}
	}
}
