package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/enginefake"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
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
	for _, target := range []string{in.VisibleObjects, in.VisibleObjects + "/pack", in.GivenObjects, "/workspace/.git"} {
		in.RepoCaches = []config.RepoCache{{Name: "x", Target: target}}
		if _, err := BuildSpec(in); err == nil || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("a cache on %s: %v", target, err)
		}
	}
}

// warmTestEnv is a test environment whose engine can commit images, with a
// setup that writes a file into /workspace when it runs. te.find reopens
// the Env with the plain fake: call commits() again after it.
func warmTestEnv(t *testing.T) (*testEnv, *int) {
	te := newTestEnv(t)
	te.env.Config.Setup = "make deps"
	te.env.Config.SetupInputs = []string{"lib.txt"}
	te.env.Config.Env = []string{"USER_SECRET=s3cret"}
	withCommits(te)
	runs := 0
	te.fake.OnExec = func(c enginefake.Container, o container.ExecOptions) int {
		if c.Spec.Labels[container.LabelRole] == RoleSetup && slices.Contains(o.Env, "GIT_SANDBOX_SETUP=make deps") {
			runs++
			te.writeIn(te.env.Layout.Worktree(c.Spec.Labels[container.LabelBranch]), "generated.txt", "deps\n")
		}
		return 0
	}
	return te, &runs
}

// withCommits gives te's Env the fake with image commits.
func withCommits(te *testEnv) {
	te.reopen() // an Env keeps the engine it first connected to
	committer := te.fake.WithCommit()
	te.env.Connect = func(context.Context) (Engine, error) { return committer, nil }
	te.env.Config.Setup = "make deps"
	te.env.Config.SetupInputs = []string{"lib.txt"}
	te.env.Config.Env = []string{"USER_SECRET=s3cret"}
}

func TestWarmStartOrchestration(t *testing.T) {
	te, runs := warmTestEnv(t)
	sb := te.start("t1")
	if *runs != 1 {
		t.Fatalf("setup ran %d times", *runs)
	}
	commits := te.fake.Commits()
	if len(commits) != 1 {
		t.Fatalf("%d commits", len(commits))
	}
	setupC := commits[0].Container
	if setupC.Status != enginefake.StatusExited || len(setupC.Spec.Env) != 0 || len(setupC.Spec.Ports) != 0 ||
		setupC.Spec.Labels[container.LabelPrompt] != "" || !slices.Equal(setupC.Spec.Argv, holdArgv) {
		t.Errorf("committed container: status %s, env %q, labels %v, argv %q", setupC.Status, setupC.Spec.Env, setupC.Spec.Labels, setupC.Spec.Argv)
	}
	if !slices.Equal(setupC.Spec.Mounts, sb.Spec.Mounts) || setupC.Spec.User != sb.Spec.User || setupC.Spec.Network != sb.Spec.Network {
		t.Errorf("the setup container is not made like the sandbox's")
	}
	if _, ok := te.fake.Get(setupC.ID); ok {
		t.Errorf("the setup container was left")
	}
	tag := commits[0].Options.Tag
	l := commits[0].Options.Labels
	if !strings.HasPrefix(tag, WarmRepository+":repo-") || l[LabelWarmRepo] != te.env.Repo.ID || l[LabelWarmKey] == "" || l[LabelWarmWorkspace] == "" || l[LabelWarmFrom] == "" {
		t.Errorf("commit %s labels %v", tag, l)
	}
	c, _ := te.fake.Get(sb.Container)
	if c.Spec.Image != tag || slices.ContainsFunc(c.Spec.Env, func(kv string) bool { return strings.HasPrefix(kv, "GIT_SANDBOX_SETUP=") }) || c.Starts != 1 {
		t.Errorf("sandbox container: image %s env %q starts %d", c.Spec.Image, c.Spec.Env, c.Starts)
	}
	if got := te.find("t1").Record; got.WarmImage != tag || !strings.Contains(te.git("ls-tree", "--name-only", got.Baseline), "generated.txt") {
		t.Errorf("record: warm %q, baseline without setup's file", got.WarmImage)
	}

	// Same inputs: setup skipped, its file written again, no commit.
	withCommits(te)
	sb2 := te.start("t2")
	if *runs != 1 || len(te.fake.Commits()) != 1 {
		t.Errorf("second start: setup ran %d times, %d commits", *runs, len(te.fake.Commits()))
	}
	c2, _ := te.fake.Get(sb2.Container)
	if c2.Spec.Image != tag {
		t.Errorf("second sandbox runs %s", c2.Spec.Image)
	}
	taken, err := te.find("t2").Snapshotter().Take(context.Background(), rescue.ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	if taken.Changes != 0 || !strings.Contains(te.git("ls-tree", "--name-only", taken.Tree), "generated.txt") {
		t.Errorf("warm start: setup's file missing or counted as the agent's (%d changes)", taken.Changes)
	}

	// A changed input: setup runs again, another image.
	te.write("lib.txt", "changed\n")
	te.git("commit", "-qam", "change")
	withCommits(te)
	te.start("t3")
	if *runs != 2 || len(te.fake.Commits()) != 2 || te.fake.Commits()[1].Options.Tag == tag {
		t.Errorf("changed input: setup ran %d times, commits %d", *runs, len(te.fake.Commits()))
	}
}

func TestWarmStartFailuresLeaveNothing(t *testing.T) {
	t.Run("setup fails", func(t *testing.T) {
		te, _ := warmTestEnv(t)
		te.fake.OnExec = func(enginefake.Container, container.ExecOptions) int { return 3 }
		_, err := te.env.Start(context.Background(), detached("t1"))
		if err == nil || !strings.Contains(err.Error(), "setup failed with exit code 3") {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
		if len(te.fake.Containers()) != 0 || len(te.fake.Commits()) != 0 {
			t.Errorf("left: %d containers, %d commits", len(te.fake.Containers()), len(te.fake.Commits()))
		}
	})
	t.Run("commit fails", func(t *testing.T) {
		te, _ := warmTestEnv(t)
		te.fake.Fail("CommitContainer", errors.New("no space left on device"))
		_, err := te.env.Start(context.Background(), detached("t1"))
		ue, ok := usererr.As(err)
		if !ok || !strings.Contains(ue.Msg, "no space left") || len(ue.Hints) == 0 {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
		if len(te.fake.Containers()) != 0 {
			t.Errorf("containers left: %d", len(te.fake.Containers()))
		}
	})
}

// The setup inputs are read from a commit of the user's store: a file's
// blob, a directory's tree, nothing for a path the commit lacks — and
// never from the worktree.
func TestReadSetupInputs(t *testing.T) {
	te := newTestEnv(t)
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
