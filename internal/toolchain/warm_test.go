package toolchain

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/worktree"
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
	spec := &container.Spec{
		Image: "git-sandbox:latest",
		Argv:  []string{"/bin/sh", "-c", SetupScript, "git-sandbox-setup", "make", "test"},
		Env:   []string{"HOME=" + container.Home, "GIT_SANDBOX_SETUP=make deps", "GIT_SANDBOX=1"},
		Mounts: []container.Mount{
			{Source: "/state/ws", Target: container.Workspace},
			{Source: "/state/home", Target: container.Home},
		},
	}
	WithoutSetup(spec, "git-sandbox-warm:repo-abc")
	if spec.Image != "git-sandbox-warm:repo-abc" || !slices.Equal(spec.Argv, []string{"/bin/sh", "-c", HomeLayerScript, "git-sandbox-home", "make", "test"}) {
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

// The setup inputs are read from a commit of the user's store: a file's
// blob, a directory's tree, nothing for a path the commit lacks — and
// never from the worktree.
func TestReadSetupInputs(t *testing.T) {
	te := newRepo(t)
	te.write("go.sum", "a v1\n")
	te.write("web/package-lock.json", "{}\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "inputs")
	head := te.git("rev-parse", "HEAD")
	te.write("go.sum", "changed in the checkout, not committed\n")
	got, err := te.env.readSetupInputs(context.Background(), head, []string{"go.sum", "web", "missing.lock"})
	if err != nil {
		t.Fatal(err)
	}
	want := []WarmInput{
		{Path: "go.sum", Mode: "100644", Object: te.git("rev-parse", "HEAD:go.sum")},
		{Path: "web", Mode: "040000", Object: te.git("rev-parse", "HEAD:web")},
		{Path: "missing.lock"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("inputs = %+v, want %+v", got, want)
	}
}

// testRepo is a repository with a commit, and a toolchain Env for it.
type testRepo struct {
	t   *testing.T
	dir string
	env *Env
}

func newRepo(t *testing.T) *testRepo {
	t.Helper()
	dir := t.TempDir()
	te := &testRepo{t: t, dir: dir}
	te.git("init", "-q", "-b", "main")
	te.write("README", "hello\n")
	te.git("add", "-A")
	te.git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "initial")
	repo, err := worktree.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	te.env = &Env{Repo: repo, Config: &config.Loaded{Config: config.Defaults()}, UI: ui.Discard()}
	return te
}

func (te *testRepo) git(args ...string) string {
	te.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = te.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		te.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (te *testRepo) write(rel, content string) {
	te.t.Helper()
	p := filepath.Join(te.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		te.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		te.t.Fatal(err)
	}
}
