package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// sshSockEnv makes this test binary, run as the ssh program
// ($GIT_SANDBOX_SSH), write the arguments it got to the file named by
// sshArgsEnv and carry its stdin and stdout to the unix socket named by
// sshSockEnv, as `ssh HOST docker system dial-stdio` carries them to the
// remote daemon.
const (
	sshSockEnv = "GIT_SANDBOX_DOCKER_TEST_SSH_SOCK"
	sshArgsEnv = "GIT_SANDBOX_DOCKER_TEST_SSH_ARGS"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(sshSockEnv); sock != "" {
		os.WriteFile(os.Getenv(sshArgsEnv), []byte(strings.Join(os.Args[1:], " ")), 0o600)
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(255)
		}
		go func() { io.Copy(c, os.Stdin); c.(*net.UnixConn).CloseWrite() }()
		io.Copy(os.Stdout, c)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeDaemon answers the calls connecting makes (ping, version, info) as
// an Engine API 1.41 daemon would, on a unix socket; it returns the
// socket's path and the paths it was asked for.
func fakeDaemon(t *testing.T) (string, func() []string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var paths []string
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			fmt.Fprint(w, "OK")
		case strings.HasSuffix(r.URL.Path, "/version"):
			fmt.Fprint(w, `{"Version":"20.10.24","ApiVersion":"1.41"}`)
		case strings.HasSuffix(r.URL.Path, "/info"):
			fmt.Fprint(w, `{"MemTotal":8589934592}`)
		default:
			http.Error(w, `{"message":"not here"}`, http.StatusNotFound)
		}
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return sock, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), paths...)
	}
}

// contextStore writes a Docker CLI context store holding the context name
// with host (and TLS files when tls), as docker context create does.
func contextStore(t *testing.T, name, meta string, tls bool) string {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	mdir := filepath.Join(dir, "contexts", "meta", id)
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mdir, "meta.json"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
	if tls {
		tdir := filepath.Join(dir, "contexts", "tls", id, "docker")
		if err := os.MkdirAll(tdir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tdir, "ca.pem"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestConnectToEndpoints(t *testing.T) {
	ctx := context.Background()
	sock, paths := fakeDaemon(t)
	store := contextStore(t, "far", fmt.Sprintf(`{"Name":"far","Endpoints":{"docker":{"Host":"unix://%s","SkipTLSVerify":false}}}`, sock), false)
	t.Setenv("DOCKER_CONFIG", store)
	argsFile := filepath.Join(t.TempDir(), "ssh-args")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(proc.SSHEnv, exe)
	t.Setenv(sshSockEnv, sock)
	t.Setenv(sshArgsEnv, argsFile)

	for _, ep := range []Endpoint{
		{Name: "here", Host: "unix://" + sock},
		{Name: "ctx", Context: "far"},
		{Name: "box", Host: "ssh://me@box.example:2222"},
	} {
		t.Run(ep.Name, func(t *testing.T) {
			before := len(paths())
			d, err := ConnectTo(ctx, ep)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if len(paths()) == before {
				t.Error("connecting did not ping the daemon")
			}
			if d.APIVersion() != "1.41" {
				t.Errorf("API version %q, want the daemon's 1.41", d.APIVersion())
			}
			if got, err := d.Check(ctx); err != nil || got != "engine 20.10.24, API 1.41" {
				t.Errorf("Check = %q, %v", got, err)
			}
			if mem, err := d.MemoryBytes(ctx); err != nil || mem != 8<<30 {
				t.Errorf("MemoryBytes = %d, %v", mem, err)
			}
			if a := d.Abilities(); a.Kind != container.KindDocker || !a.BindMounts || !a.CommitImages || !a.BuildImages || !a.MoveImages || a.VolumesWritable {
				t.Errorf("abilities %+v", a)
			}
		})
	}
	if b, _ := os.ReadFile(argsFile); string(b) != "-o ConnectTimeout=10 -T -l me -p 2222 -- box.example docker system dial-stdio" {
		t.Errorf("ssh ran with %q", b)
	}
}

func TestConnectFromTheEnvironment(t *testing.T) {
	sock, _ := fakeDaemon(t)
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("DOCKER_CONTEXT", "")
	d, err := Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	_, err = Connect(context.Background())
	if ue, ok := usererr.As(err); !ok || !strings.Contains(ue.Msg, "cannot reach the Docker daemon at unix://") || len(ue.Hints) != 2 {
		t.Errorf("Connect to nothing = %v", err)
	}
}

func TestConnectToFailures(t *testing.T) {
	dir := t.TempDir()
	store := contextStore(t, "bad", `{"Endpoints":`, false)
	tests := []struct {
		name  string
		store string
		ep    Endpoint
		want  string
	}{
		{"no daemon", "", Endpoint{Name: "gone", Host: "unix://" + filepath.Join(dir, "none.sock")}, "cannot reach engine gone at unix://"},
		{"not an address", "", Endpoint{Name: "odd", Host: "://x"}, "cannot reach engine odd at ://x"},
		{"no such context", t.TempDir(), Endpoint{Name: "c", Context: "missing"}, `engine c: no Docker context "missing"`},
		{"a damaged context", store, Endpoint{Name: "c", Context: "bad"}, `read Docker context "bad"`},
		{"a context of no daemon", contextStore(t, "k8s", `{"Endpoints":{"kubernetes":{"Host":"https://k"}}}`, false), Endpoint{Name: "c", Context: "k8s"}, "names no Docker endpoint"},
		{"a context whose daemon is gone", contextStore(t, "gone", fmt.Sprintf(`{"Endpoints":{"docker":{"Host":"unix://%s/none.sock"}}}`, dir), false), Endpoint{Name: "c", Context: "gone"}, "cannot reach engine c at context gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_CONFIG", tt.store)
			d, err := ConnectTo(context.Background(), tt.ep)
			if err == nil {
				d.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ConnectTo = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestContextTLSFiles: a context made with TLS files has them read from
// the store's tls directory.
func TestContextTLSFiles(t *testing.T) {
	store := contextStore(t, "tls", `{"Endpoints":{"docker":{"Host":"tcp://box:2376"}}}`, true)
	t.Setenv("DOCKER_CONFIG", store)
	ep := Endpoint{Name: "e", Context: "tls"}
	if err := ep.fromContext(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("tls"))
	if ep.Host != "tcp://box:2376" || ep.CertPath != filepath.Join(store, "contexts", "tls", hex.EncodeToString(sum[:]), "docker") {
		t.Errorf("endpoint %+v", ep)
	}
	// Without DOCKER_CONFIG the store is ~/.docker.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", "")
	if err := os.Rename(filepath.Join(store), filepath.Join(home, ".docker")); err != nil {
		t.Fatal(err)
	}
	ep = Endpoint{Name: "e", Context: "tls"}
	if err := ep.fromContext(); err != nil || ep.Host != "tcp://box:2376" {
		t.Errorf("from ~/.docker: %+v, %v", ep, err)
	}
}
