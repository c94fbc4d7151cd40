package sandbox

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
)

func TestWarmKeyChangesWithEachInput(t *testing.T) {
	base := WarmInputs{Format: warmFormat, Repo: "r-1", BaseImage: "sha256:a", Setup: "make deps", Agent: "claude", User: "1000:1000",
		Inputs: []WarmInput{{Path: "go.sum", Mode: "100644", Object: "aa"}, {Path: "missing.lock"}}}
	if h := base.Hash(); h != (WarmInputs{Format: warmFormat, Repo: "r-1", BaseImage: "sha256:a", Setup: "make deps", Agent: "claude", User: "1000:1000", Inputs: slices.Clone(base.Inputs)}).Hash() || len(h) != 64 {
		t.Fatalf("hash not stable: %s", base.Hash())
	}
	change := map[string]func(*WarmInputs){
		"repository": func(w *WarmInputs) { w.Repo = "r-2" },
		"base image": func(w *WarmInputs) { w.BaseImage = "sha256:b" },
		"setup":      func(w *WarmInputs) { w.Setup = "make deps2" },
		"agent":      func(w *WarmInputs) { w.Agent = "codex" },
		"user":       func(w *WarmInputs) { w.User = "1001:1001" },
		"input":      func(w *WarmInputs) { w.Inputs[0].Object = "bb" },
		"mode":       func(w *WarmInputs) { w.Inputs[0].Mode = "100755" },
		"appeared":   func(w *WarmInputs) { w.Inputs[1].Object = "cc" },
		"path":       func(w *WarmInputs) { w.Inputs[0].Path = "x/go.sum" },
	}
	for name, f := range change {
		w := base
		w.Inputs = slices.Clone(base.Inputs)
		f(&w)
		if w.Hash() == base.Hash() {
			t.Errorf("a changed %s keeps the key", name)
		}
	}
}

func TestWithoutSetup(t *testing.T) {
	in := planInput(t)
	in.Setup = "make deps"
	spec, err := BuildSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Argv[2] != setupScript {
		t.Fatalf("argv = %q", spec.Argv)
	}
	withoutSetup(spec, "git-sandbox-warm:repo-abc")
	if spec.Image != "git-sandbox-warm:repo-abc" || !slices.Equal(spec.Argv, []string{"make", "test"}) {
		t.Errorf("spec = %s %q", spec.Image, spec.Argv)
	}
	for _, kv := range spec.Env {
		if strings.HasPrefix(kv, "GIT_SANDBOX_SETUP=") {
			t.Errorf("setup still in the environment: %q", spec.Env)
		}
	}
	if err := checkWarmMounts(spec); err != nil {
		t.Errorf("checkWarmMounts: %v", err)
	}
	spec.Mounts = slices.DeleteFunc(spec.Mounts, func(m container.Mount) bool { return m.Target == container.Home })
	if err := checkWarmMounts(spec); err == nil {
		t.Errorf("a spec without a home mount may be committed")
	}
}

func TestStaleWarmImagesKeepTheNewest(t *testing.T) {
	now := time.Now()
	imgs := []container.Image{{ID: "old", Created: now.Add(-time.Hour)}, {ID: "new", Created: now}, {ID: "older", Created: now.Add(-2 * time.Hour)}}
	var ids []string
	for _, i := range StaleWarmImages(imgs) {
		ids = append(ids, i.ID)
	}
	if !slices.Equal(ids, []string{"old", "older"}) {
		t.Errorf("stale = %v", ids)
	}
	if StaleWarmImages(imgs[:1]) != nil {
		t.Errorf("the only image is stale")
	}
}

func TestRepoCacheMounts(t *testing.T) {
	in := planInput(t)
	in.RepoCaches = []config.RepoCache{{Name: "gomod", Target: "/home/sandbox/go/pkg/mod"}}
	spec, err := BuildSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	m := spec.Mounts[len(spec.Mounts)-1]
	if !m.Volume || m.Source != container.RepoCacheVolume("repo-1", "gomod") || m.Target != "/home/sandbox/go/pkg/mod" {
		t.Errorf("mount = %+v", m)
	}
	if container.RepoCacheVolume("repo-1", "gomod") == container.RepoCacheVolume("repo-2", "gomod") ||
		container.RepoCacheVolume("repo-1", "gomod") == container.CacheVolume("repo-1", "/home/sandbox/go/pkg/mod") {
		t.Errorf("repository caches share volumes")
	}
	for _, target := range []string{in.HostObjects, in.HostObjects + "/pack", "/workspace/.git"} {
		in.RepoCaches = []config.RepoCache{{Name: "x", Target: target}}
		if _, err := BuildSpec(in); err == nil || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("a cache on %s: %v", target, err)
		}
	}
}
