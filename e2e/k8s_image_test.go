package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testKubernetesImagePush: a Kubernetes engine whose image and
// proxy_image name a registry (one the test runs on this machine, plain
// HTTP on 127.0.0.1, as the node's runtime and Docker both take) that has
// neither: start fails at once saying which image and what to run, and
// leaves nothing; git sandbox image push --engine puts both there from the
// local engine, and the node pulls the sandbox's image from the registry
// for the next start.
func testKubernetesImagePush(t *testing.T) {
	reg := startRegistry(t)
	k := k8sEnv(t, "")
	ref := func(what string) string { return fmt.Sprintf("%s/git-sandbox-e2e/%s:%s", reg, what, k.RepoID()[:12]) }
	k.image = ref("sandbox")
	k.engineExtra = fmt.Sprintf("proxy_image = %q\n", ref("proxy"))
	k.config("", "1s")
	t.Cleanup(func() {
		// The names the push gave the test's own images here, and the
		// node's copy of what it pulled.
		_ = exec.Command("docker", "image", "rm", ref("sandbox"), ref("proxy")).Run()
		k.c.RemoveImage(t, ref("sandbox"))
	})
	start := func() Result {
		return k.Sandbox("start", "t1", "-d", "--engine", "k8s", "--network", "none", "--agent", "shell", "--", "sleep", "600")
	}
	began := time.Now()
	r := start()
	if r.Code == 0 || !strings.Contains(r.Stderr, "cannot pull the image "+ref("sandbox")) || !strings.Contains(r.Stderr, "git sandbox image push --engine k8s") {
		t.Fatalf("start with the image missing from the registry: want the refusal with what to run, got %s", r)
	}
	if took := time.Since(began); took > 2*time.Minute {
		t.Errorf("the refusal took %s: a registry's 'not found' is an answer, not to be waited out", took)
	}
	k.assertNothingLeft(t)

	r = k.MustSandbox("image", "push", "--engine", "k8s", "--image", baseImage)
	for _, want := range []string{"pushed " + baseImage + " as " + ref("sandbox"), " as " + ref("proxy")} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("image push does not say %q:\n%s", want, r)
		}
	}
	for _, what := range []string{"sandbox", "proxy"} {
		if !registryHas(t, reg, "git-sandbox-e2e/"+what, k.RepoID()[:12]) {
			t.Errorf("the registry has no %s image after the push", what)
		}
	}
	k.MustSandbox("start", "t1", "-d", "--engine", "k8s", "--network", "none", "--agent", "shell", "--", "sleep", "600")
	if out := k.MustSandbox("exec", "t1", "--", "echo", "pulled").Stdout; out != "pulled\n" {
		t.Errorf("exec in the sandbox from the pushed image: %q", out)
	}
	if imgs := k.c.MustKubectl(t, nil, "get", "pods", "-n", k.ns, "-l", "git-sandbox.io/managed=1", "-o", "jsonpath={.items[*].spec.containers[*].image}"); !strings.Contains(imgs, ref("sandbox")) {
		t.Errorf("the Pods run %q, not the pushed image", imgs)
	}
	k.MustSandbox("rm", "--force", "t1")
	k.assertNothingLeft(t)
}

var registryBuild struct {
	once sync.Once
	err  error
}

// startRegistry runs a registry (go-containerregistry's, built from the
// module proxy once a run) on a free port of this machine until the test
// ends, and returns its address.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "registry")
	registryBuild.once.Do(func() {
		cmd := exec.Command("go", "install", "github.com/google/go-containerregistry/cmd/registry@v0.22.1")
		cmd.Dir = os.TempDir()
		cmd.Env = append(os.Environ(), "GOBIN="+binDir, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			registryBuild.err = fmt.Errorf("build the test registry: %v\n%s", err, out)
		}
	})
	if registryBuild.err != nil {
		t.Fatal(registryBuild.err)
	}
	port, err := freePort()
	must(t, err)
	cmd := exec.Command(bin, "-port", strconv.Itoa(port))
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	Eventually(t, 30*time.Second, "the test registry to answer", func() bool {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return addr
}

// registryHas reports whether the registry at addr has a manifest for
// repo:tag.
func registryHas(t *testing.T, addr, repo, tag string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodHead, "http://"+addr+"/v2/"+repo+"/manifests/"+tag, nil)
	must(t, err)
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
