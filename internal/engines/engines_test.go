package engines

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// fakeDocker answers a Docker client's ping on a unix socket, as a
// daemon of Engine API 1.41 would; it returns the socket's address and
// how many pings it answered.
func fakeDocker(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var pings atomic.Int32
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			pings.Add(1)
			w.Header().Set("Api-Version", "1.41")
			w.Header().Set("Ostype", "linux")
			fmt.Fprint(w, "OK")
			return
		}
		http.NotFound(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix://" + sock, &pings
}

// fakeCluster answers /version as an API server would, and writes a
// kubeconfig naming it.
func fakeCluster(t *testing.T) (kubeconfig string, versions *atomic.Int32) {
	t.Helper()
	versions = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			versions.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"major":"1","minor":"33","gitVersion":"v1.33.0"}`)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
contexts:
- name: ctx
  context:
    cluster: c
    user: u
    namespace: from-context
current-context: ctx
users:
- name: u
  user:
    token: t
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, versions
}

func TestConnect(t *testing.T) {
	host, pings := fakeDocker(t)
	kubeconfig, versions := fakeCluster(t)
	other, otherPings := fakeDocker(t)
	cfg := &config.Loaded{}
	cfg.Engines = []config.Engine{
		{Name: "remote", Host: other},
		{Name: "cluster", Kind: config.EngineKindKubernetes, Kubeconfig: kubeconfig, Namespace: "sandboxes"},
	}
	t.Setenv("DOCKER_HOST", host)
	t.Setenv("DOCKER_CONTEXT", "")
	ctx := context.Background()

	tests := []struct {
		name   string
		engine string
		kind   string
		answer *atomic.Int32
	}{
		{"the environment's daemon", "", container.KindDocker, pings},
		{"a configured Docker endpoint", "remote", container.KindDocker, otherPings},
		{"a configured cluster", "cluster", container.KindKubernetes, versions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.answer.Load()
			e, err := Connect(ctx, cfg, tt.engine)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if k := e.Abilities().Kind; k != tt.kind {
				t.Errorf("kind %q, want %q", k, tt.kind)
			}
			if tt.answer.Load() == before {
				t.Error("connecting did not check that the engine answers")
			}
		})
	}
}

func TestConnectFailures(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := &config.Loaded{}
	cfg.Engines = []config.Engine{
		{Name: "gone", Host: "unix://" + filepath.Join(dir, "missing.sock")},
		{Name: "nocluster", Kind: config.EngineKindKubernetes, Kubeconfig: filepath.Join(dir, "missing-kubeconfig")},
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "none.sock"))
	t.Setenv("DOCKER_CONTEXT", "")
	for _, name := range []string{"", "gone", "nocluster", "unknown"} {
		e, err := Connect(ctx, cfg, name)
		if err == nil {
			e.Close()
			t.Errorf("Connect(%q) succeeded", name)
			continue
		}
		if ue, ok := usererr.As(err); !ok || len(ue.Hints) == 0 {
			t.Errorf("Connect(%q) = %v: not a user error with a hint", name, err)
		}
	}
}

func TestKubeOptions(t *testing.T) {
	t.Setenv("GIT_SANDBOX_CONFIG", "/cfg/config.toml")
	c := &config.Engine{Name: "k", Kind: config.EngineKindKubernetes, Kubeconfig: "~/kc", Context: "ctx", Namespace: "ns",
		Image: "reg/img:1", RuntimeClass: "gvisor", StorageClass: "fast", VolumeSize: "5Gi", Host: "ignored"}
	o := KubeOptions(c)
	if o.Name != "k" || o.Kubeconfig != "~/kc" || o.Context != "ctx" || o.Namespace != "ns" || o.Image != "reg/img:1" ||
		o.RuntimeClass != "gvisor" || o.StorageClass != "fast" || o.VolumeSize != "5Gi" || o.ConfigFile != "/cfg/config.toml" {
		t.Errorf("KubeOptions = %+v", o)
	}
}

func TestAllAndCopyMode(t *testing.T) {
	cfg := &config.Loaded{}
	cfg.Engines = []config.Engine{
		{Name: "local", Host: "unix:///run/other.sock"},
		{Name: "far", Host: "ssh://box"},
		{Name: "pinned", Host: "ssh://box", Mode: config.EngineModeBind},
	}
	all := All(cfg)
	var names []string
	for _, n := range all {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != ",local,far,pinned" || all[0].Config != nil || all[2].Config != &cfg.Engines[1] {
		t.Fatalf("All = %+v", all)
	}
	binds := container.Abilities{BindMounts: true}
	tests := []struct {
		n    Named
		a    container.Abilities
		want bool
	}{
		{all[0], binds, false},
		{all[0], container.Abilities{}, true}, // the engine cannot bind-mount
		{all[1], binds, false},                // a local socket
		{all[2], binds, true},                 // a remote host: auto is copy
		{all[3], binds, false},                // bind asked for
	}
	for i, tt := range tests {
		if got := tt.n.CopyMode(tt.a); got != tt.want {
			t.Errorf("%d: %q CopyMode(%+v) = %v, want %v", i, tt.n.Name, tt.a, got, tt.want)
		}
	}
}
