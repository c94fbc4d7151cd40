package engines

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// The images an engine's Pods pull go to its image and proxy_image; an
// engine with no image is refused with what to set, and a missing local
// image stops every push before the first.
func TestPushesForAnEngine(t *testing.T) {
	if _, err := PushesFor(&config.Engine{Name: "k8s"}, "git-sandbox:latest", ""); err == nil || !strings.Contains(strings.Join(usererrHints(err), "\n"), `image = "REGISTRY/NAME:TAG"`) {
		t.Errorf("an engine with no image: %v", err)
	}
	eng := &config.Engine{Name: "k8s", Image: "reg.test:5000/sandbox:1", ProxyImage: "reg.test:5000/proxy:1"}
	pushes, err := PushesFor(eng, "git-sandbox:latest", "git-sandbox-proxy:abc")
	if err != nil {
		t.Fatal(err)
	}
	want := []Push{{"git-sandbox:latest", "reg.test:5000/sandbox:1"}, {"git-sandbox-proxy:abc", "reg.test:5000/proxy:1"}}
	if !slices.Equal(pushes, want) {
		t.Errorf("pushes = %v, want %v", pushes, want)
	}
	f := fake.New("git-sandbox:latest")
	var out bytes.Buffer
	if err := PushAll(context.Background(), f.Images(), pushes, &out); err == nil || !strings.Contains(err.Error(), "git-sandbox-proxy:abc is not on the local engine") {
		t.Errorf("a missing local image: %v", err)
	}
	if got := f.Pushed(); len(got) != 0 {
		t.Errorf("pushed %v before finding an image missing", got)
	}
	f.AddImage("git-sandbox-proxy:abc")
	if err := PushAll(context.Background(), f.Images(), pushes, &out); err != nil {
		t.Fatal(err)
	}
	if got := f.Pushed(); !slices.Equal(got, []string{"reg.test:5000/sandbox:1", "reg.test:5000/proxy:1"}) {
		t.Errorf("pushed %v", got)
	}
}

func usererrHints(err error) []string {
	if ue, ok := usererr.As(err); ok {
		return ue.Hints
	}
	return nil
}
