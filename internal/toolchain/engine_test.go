package toolchain

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// sandboxSpec is a sandbox container's spec as start makes it, with a home
// mounted and the caches given.
func sandboxSpec(mounts ...container.Mount) *container.Spec {
	s := &container.Spec{Name: "git-sandbox-repo-b1", Image: "img", User: "1000:1000", Network: container.NetworkNone,
		Argv: []string{"/bin/sh", "-c", SetupScript, "git-sandbox-setup", "agent"}, Env: []string{"GIT_SANDBOX_SETUP=make deps", "A=1"},
		Limits: container.Limits{Pids: 64}, Labels: map[string]string{container.LabelManaged: "1", container.LabelPrompt: "secret prompt"},
		Mounts: append([]container.Mount{{Source: "/state/home", Target: container.Home}}, mounts...)}
	s.Harden()
	return s
}

func TestEnsureCaches(t *testing.T) {
	te := newRepo(t)
	id := te.env.Repo.ID
	te.env.Config.RepoCaches = []config.RepoCache{{Name: "deps", Target: "/deps"}}
	npm := container.CacheVolume(id, container.Home+"/.npm")
	deps := container.RepoCacheVolume(id, "deps")
	spec := sandboxSpec(
		container.Mount{Source: npm, Target: container.Home + "/.npm", Volume: true},
		container.Mount{Source: deps, Target: "/deps", Volume: true},
	)
	home := t.TempDir()
	f := enginefake.New("img")
	var chmods []container.Spec
	f.OnStart = func(c enginefake.Container) (int, bool) {
		chmods = append(chmods, c.Spec)
		return 0, true
	}
	ctx := context.Background()
	if err := te.env.EnsureCaches(ctx, f, spec, home); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(home, ".npm")); err != nil || !fi.IsDir() {
		t.Errorf("the mount point in the home was not made: %v", err)
	}
	if len(chmods) != 2 {
		t.Fatalf("%d containers opened the new volumes, want 2", len(chmods))
	}
	for _, c := range chmods {
		if c.User != "0:0" || c.Network != container.NetworkNone || c.CapDrop[0] != "ALL" || !slices.Equal(c.Argv, []string{"chmod", "1777", "/cache"}) || c.Mounts[0].Target != "/cache" {
			t.Errorf("volume opened by %+v", c)
		}
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left", n)
	}
	caches, err := te.env.CachesOn(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Cache{}
	for _, c := range caches {
		got[c.Volume] = c
	}
	if got[npm] != (Cache{Volume: npm, Target: container.Home + "/.npm"}) || got[deps] != (Cache{Volume: deps, Target: "/deps", Name: "deps"}) {
		t.Errorf("caches %+v", caches)
	}
	// A second start finds them: nothing is made again.
	creates := f.Count("CreateVolume")
	if err := te.env.EnsureCaches(ctx, f, spec, home); err != nil || f.Count("CreateVolume") != creates {
		t.Errorf("a second EnsureCaches = %v, made volumes again: %v", err, f.Count("CreateVolume") != creates)
	}
	// No cache mounts: no call at all.
	f2 := enginefake.New("img")
	if err := te.env.EnsureCaches(ctx, f2, sandboxSpec(), home); err != nil || len(f2.Calls()) != 0 {
		t.Errorf("EnsureCaches without caches = %v, calls %v", err, f2.Calls())
	}
}

func TestEnsureCachesFailures(t *testing.T) {
	te := newRepo(t)
	npm := container.CacheVolume(te.env.Repo.ID, "/npm")
	tests := []struct {
		name    string
		setup   func(f *enginefake.Engine)
		want    string
		volumes int
	}{
		{"the volume cannot be made", func(f *enginefake.Engine) { f.Fail("CreateVolume", errors.New("disk full")) }, "cache /npm: disk full", 0},
		{"the volumes cannot be listed", func(f *enginefake.Engine) { f.Fail("ListVolumes", errors.New("daemon gone")) }, "daemon gone", 0},
		{"chmod fails in the image", func(f *enginefake.Engine) {
			f.OnStart = func(enginefake.Container) (int, bool) { return 1, true }
		}, "could not make the new volume writable", 0},
		{"the opening container cannot start", func(f *enginefake.Engine) { f.Fail("Start", errors.New("no runtime")) }, "no runtime", 0},
		{"writable volumes need no opening", func(f *enginefake.Engine) {
			f.VolumesWritable = true
			f.Fail("Start", errors.New("must not start"))
		}, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := enginefake.New("img")
			tt.setup(f)
			err := te.env.EnsureCaches(context.Background(), f, sandboxSpec(container.Mount{Source: npm, Target: "/npm", Volume: true}), "")
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("EnsureCaches = %v, want %q", err, tt.want)
			}
			f.Fail("ListVolumes", nil)
			if vols, _ := f.ListVolumes(context.Background()); len(vols) != tt.volumes {
				t.Errorf("%d volumes left, want %d", len(vols), tt.volumes)
			}
		})
	}
}

// TestMkdirInsideNeverFollowsALink: the agent's home is the agent's; a
// symbolic link or a file on the way stops the walk.
func TestMkdirInsideNeverFollowsALink(t *testing.T) {
	home, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mkdirInside(home, "link/x")
	mkdirInside(home, "file/x")
	mkdirInside(home, "../escape")
	mkdirInside(home, ".cache/go/mod")
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a directory was made through the link: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(home), "escape")); err == nil {
		t.Error("a directory was made outside the home")
	}
	if fi, err := os.Stat(filepath.Join(home, ".cache", "go", "mod")); err != nil || !fi.IsDir() {
		t.Errorf("the plain path was not made: %v", err)
	}
}

func TestRunSetup(t *testing.T) {
	te := newRepo(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		code     int
		followUp bool
		want     string
	}{
		{"passes", 0, false, ""},
		{"fails in a new sandbox", 2, false, "setup failed with exit code 2; the sandbox was not created"},
		{"fails in a follow-up", 3, true, "setup failed with exit code 3 in the new container of b1; the agent did not run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := enginefake.New("img")
			f.Output = "installing\x1b]0;pwn\x07\n"
			id, err := f.Create(ctx, sandboxSpec())
			if err != nil {
				t.Fatal(err)
			}
			f.OnStart = func(enginefake.Container) (int, bool) { return tt.code, true }
			var out bytes.Buffer
			err = te.env.RunSetup(ctx, f, SetupRun{Container: id, Display: "b1", FollowUp: tt.followUp, Out: &out})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("RunSetup = %v, want %q", err, tt.want)
			}
			if ue, ok := usererr.As(err); err != nil && (!ok || len(ue.Hints) == 0) {
				t.Errorf("not a user error with a hint: %v", err)
			}
			if !strings.Contains(out.String(), `installing\x1b]0;pwn\x07`) || strings.Contains(out.String(), "\x1b") {
				t.Errorf("setup output %q: not escaped", out.String())
			}
		})
	}
	f := enginefake.New("img")
	f.Fail("Attach", errors.New("no attach"))
	if err := te.env.RunSetup(ctx, f, SetupRun{Container: "c", Out: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "no attach") {
		t.Errorf("RunSetup whose attach failed = %v", err)
	}
}

// TestWarmImageMadeThenFound: the first sandbox runs setup in a container
// of its own and keeps it as the warm image; the next one with the same
// inputs finds it; a change of an input misses it.
func TestWarmImageMadeThenFound(t *testing.T) {
	te := newRepo(t)
	ctx := context.Background()
	te.env.Config.SetupInputs = []string{"README"}
	head := te.git("rev-parse", "HEAD")
	baseline := &rescue.Taken{Snapshot: rescue.Snapshot{ID: head, Tree: te.git("rev-parse", "HEAD^{tree}")}}
	f := enginefake.New("img")
	d := f.WithCommit()
	spec := sandboxSpec()

	if w, err := te.env.PlanWarm(ctx, f, spec, baseline, "make deps", "claude"); err != nil || w != nil {
		t.Fatalf("an engine that cannot commit planned %+v, %v", w, err)
	}
	w, err := te.env.PlanWarm(ctx, d, spec, baseline, "make deps", "claude")
	if err != nil || w == nil || w.Found || !strings.HasPrefix(w.Tag, WarmRepository+":") {
		t.Fatalf("PlanWarm = %+v, %v; want a warm image to make", w, err)
	}
	var execd, kept container.ExecOptions
	f.OnExec = func(c enginefake.Container, o container.ExecOptions) int {
		if len(o.Argv) == 3 && o.Argv[2] == keepHomeScript(spec.Mounts) {
			kept = o // what setup wrote under the home, kept in the image
			return 0
		}
		execd = o
		if c.Spec.Env != nil || c.Spec.Labels[container.LabelPrompt] != "" || c.Spec.Labels[container.LabelRole] != RoleSetup {
			t.Errorf("the setup container carries the sandbox's configuration: %+v", c.Spec)
		}
		return 0
	}
	var out bytes.Buffer
	snap := func(context.Context) (string, string, error) { return "", "", nil }
	if err := te.env.SetupWarm(ctx, d, spec, w, WarmRun{Branch: "b1", Display: "b1", Out: &out, Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	if execd.User != "1000:1000" || execd.WorkDir != container.Workspace || !slices.Equal(execd.Env, spec.Env) || execd.Argv[2] != SetupScript {
		t.Errorf("setup ran as %+v", execd)
	}
	if kept.User != "1000:1000" || len(kept.Env) != 0 {
		t.Errorf("the home was kept as %+v; want it copied as setup's user, after setup", kept)
	}
	commits := f.Commits()
	if len(commits) != 1 || commits[0].Options.Tag != w.Tag || commits[0].Container.Status == enginefake.StatusRunning ||
		commits[0].Options.Labels[LabelWarmKey] != w.inputs.Hash() || commits[0].Options.Labels[LabelWarmFrom] != "" {
		t.Fatalf("commits %+v", commits)
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left", n)
	}

	again, err := te.env.PlanWarm(ctx, d, spec, baseline, "make deps", "claude")
	if err != nil || !again.Found || again.Tag != w.Tag {
		t.Errorf("the next sandbox's plan = %+v, %v; want the warm image found", again, err)
	}
	other, err := te.env.PlanWarm(ctx, d, spec, baseline, "make deps && make more", "claude")
	if err != nil || other.Found || other.Tag == w.Tag {
		t.Errorf("another setup's plan = %+v, %v; want another image to make", other, err)
	}
}

// TestWarmImageThatWroteIntoTheWorkspace is replayed only onto the tree it
// was made from, and only while the tree it left is in the repository.
func TestWarmImageThatWroteIntoTheWorkspace(t *testing.T) {
	te := newRepo(t)
	ctx := context.Background()
	from := te.git("rev-parse", "HEAD^{tree}")
	te.write("generated.txt", "made by setup\n")
	te.git("add", "-A")
	te.git("commit", "-qm", "setup's files")
	to := te.git("rev-parse", "HEAD^{tree}")
	f := enginefake.New("img")
	d := f.WithCommit()
	spec := sandboxSpec()
	baseline := &rescue.Taken{Snapshot: rescue.Snapshot{ID: te.git("rev-parse", "HEAD~1"), Tree: from}}
	w, err := te.env.PlanWarm(ctx, d, spec, baseline, "make gen", "claude")
	if err != nil {
		t.Fatal(err)
	}
	snap := func(context.Context) (string, string, error) { return from, to, nil }
	if err := te.env.SetupWarm(ctx, d, spec, w, WarmRun{Branch: "b1", Display: "b1", Out: &bytes.Buffer{}, Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	if l := f.Commits()[0].Options.Labels; l[LabelWarmFrom] != from || l[LabelWarmWorkspace] != to {
		t.Errorf("labels %v", l)
	}
	same, _ := te.env.PlanWarm(ctx, d, spec, baseline, "make gen", "claude")
	if !same.Found || same.Replay != [2]string{from, to} {
		t.Errorf("from the same tree: %+v", same)
	}
	elsewhere := &rescue.Taken{Snapshot: rescue.Snapshot{ID: baseline.ID, Tree: to}}
	if w2, _ := te.env.PlanWarm(ctx, d, spec, elsewhere, "make gen", "claude"); w2.Found {
		t.Errorf("from another tree the warm image was used: %+v", w2)
	}
}

func TestSetupWarmFailures(t *testing.T) {
	te := newRepo(t)
	ctx := context.Background()
	baseline := &rescue.Taken{Snapshot: rescue.Snapshot{ID: te.git("rev-parse", "HEAD"), Tree: te.git("rev-parse", "HEAD^{tree}")}}
	snap := func(context.Context) (string, string, error) { return "", "", nil }
	tests := []struct {
		name  string
		setup func(f *enginefake.Engine, spec *container.Spec, run *WarmRun)
		want  string
	}{
		{"setup fails", func(f *enginefake.Engine, _ *container.Spec, _ *WarmRun) {
			f.OnExec = func(enginefake.Container, container.ExecOptions) int { return 4 }
		}, "setup failed with exit code 4"},
		{"the exec fails", func(f *enginefake.Engine, _ *container.Spec, _ *WarmRun) { f.Fail("Exec", errors.New("exec refused")) }, "setup: exec refused"},
		{"the container cannot start", func(f *enginefake.Engine, _ *container.Spec, _ *WarmRun) { f.Fail("Start", errors.New("no")) }, "setup container: no"},
		{"the container cannot be made", func(f *enginefake.Engine, _ *container.Spec, _ *WarmRun) { f.Fail("Create", errors.New("no")) }, "setup container: no"},
		{"it cannot be stopped", func(f *enginefake.Engine, _ *container.Spec, _ *WarmRun) { f.Fail("Stop", errors.New("stuck")) }, "stop the setup container: stuck"},
		{"the snapshot fails", func(_ *enginefake.Engine, _ *container.Spec, run *WarmRun) {
			run.Snapshot = func(context.Context) (string, string, error) { return "", "", errors.New("disk full") }
		}, "disk full"},
		{"the commit fails", func(f *enginefake.Engine, _ *container.Spec, _ *WarmRun) {
			f.Fail("CommitContainer", errors.New("no space"))
		}, "keep setup's result as image"},
		{"the home is not a mount", func(_ *enginefake.Engine, spec *container.Spec, _ *WarmRun) { spec.Mounts = nil }, "the agent's home is not a mount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := enginefake.New("img")
			d := f.WithCommit()
			spec := sandboxSpec()
			w, err := te.env.PlanWarm(ctx, d, spec, baseline, "make deps", "claude")
			if err != nil {
				t.Fatal(err)
			}
			run := WarmRun{Branch: "b1", Display: "b1", Out: &bytes.Buffer{}, Snapshot: snap}
			tt.setup(f, spec, &run)
			if err := te.env.SetupWarm(ctx, d, spec, w, run); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SetupWarm = %v, want %q", err, tt.want)
			}
			if n := len(f.Containers()); n != 0 {
				t.Errorf("%d containers left", n)
			}
		})
	}
}
