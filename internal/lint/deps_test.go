package lint

import (
	"os/exec"
	"strings"
	"testing"
)

// withoutDockerSDK are packages that must not link anything of Docker's
// (github.com/docker/...): the engine-neutral side, and every backend but
// Docker's own. A Kubernetes user's engine, the fake the tests use and
// the record on disk then do not change when the Docker SDK does, and a
// type of the SDK cannot leak into the interface every engine implements.
var withoutDockerSDK = []string{
	"./container",
	"./container/kube",
	"./container/fake",
	"./container/enginetest",
	"./internal/record",
}

// TestDockerSDKOnlyBehindContainerDocker fails when one of the packages
// above links a package of github.com/docker, directly or through another
// (go list -deps, what the linker sees).
func TestDockerSDKOnlyBehindContainerDocker(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go list needs the go command: %v", err)
	}
	for _, pkg := range withoutDockerSDK {
		cmd := exec.Command(goTool, "list", "-deps", pkg)
		cmd.Dir = moduleRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s listed %d packages: the check saw nothing", pkg, len(deps))
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "github.com/docker/") {
				t.Errorf("%s links %s: the Docker SDK belongs behind container/docker", pkg, d)
			}
		}
	}
}
