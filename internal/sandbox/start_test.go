package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

func TestStartDetachedCreatesEverything(t *testing.T) {
	te := newTestEnv(t)
	base := te.git("rev-parse", "main")
	sb := te.start("t1")
	l := te.env.Layout

	if got := te.git("rev-parse", "refs/heads/t1"); got != base {
		t.Errorf("branch t1 at %s, want the base %s", got, base)
	}
	if _, err := os.Stat(filepath.Join(l.Worktree("t1"), "README")); err != nil {
		t.Errorf("worktree not checked out: %v", err)
	}
	rec, err := record.Load(l.Record("t1"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Base != "main" || rec.BaseTip != base || rec.Start != base || rec.Agent != "shell" || rec.Container != sb.Container {
		t.Errorf("record = %+v", rec)
	}
	refs := rescue.Refs{Branch: "t1"}
	if got := te.git("rev-parse", refs.Baseline()); got != rec.Baseline {
		t.Errorf("baseline ref %s, record %s", got, rec.Baseline)
	}
	c, ok := te.fake.Get(sb.Container)
	if !ok {
		t.Fatal("no container")
	}
	if c.Status != enginefake.StatusRunning || c.Starts != 1 {
		t.Errorf("container %s started %d times, want running once", c.Status, c.Starts)
	}
	if c.Spec.Labels[container.LabelBaseline] != rec.Baseline || c.Spec.Labels[container.LabelBranch] != "t1" {
		t.Errorf("labels = %v", c.Spec.Labels)
	}
	if c.Spec.Network != container.NetworkNone {
		t.Errorf("network = %q, want the test config's none", c.Spec.Network)
	}
	mounts := map[string]string{}
	for _, m := range c.Spec.Mounts {
		mounts[m.Target] = m.Source
	}
	if mounts[container.Workspace] != l.Worktree("t1") || mounts[container.Workspace+"/.git"] != l.Gitfile("t1") {
		t.Errorf("mounts = %v", mounts)
	}
	if !slices.Equal(te.spawn, []string{"t1"}) {
		t.Errorf("supervisors started for %v, want [t1]", te.spawn)
	}
	if _, err := os.Stat(filepath.Join(l.PrivateGitDir("t1"), "HEAD")); err != nil {
		t.Errorf("private repository missing: %v", err)
	}
}

func TestStartDryRunCreatesNothing(t *testing.T) {
	te := newTestEnv(t)
	o := detached("t1")
	o.DryRun = true
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan == nil || res.Plan.Container == nil || res.Plan.Branch != "t1" {
		t.Fatalf("plan = %+v", res.Plan)
	}
	if calls := te.fake.Calls(); len(calls) != 0 {
		t.Errorf("dry run asked the engine: %v", calls)
	}
	te.assertNothingLeft("t1", false)
}

func TestStartRefusesBadInput(t *testing.T) {
	te := newTestEnv(t)
	te.git("branch", "taken")
	for name, o := range map[string]StartOptions{
		"existing branch": detached("taken"),
		"network host":    func() StartOptions { o := detached("n1"); o.Network = "host"; return o }(),
		"bad base":        func() StartOptions { o := detached("n2"); o.Base = "nope"; return o }(),
		"bad env":         func() StartOptions { o := detached("n3"); o.Env = []string{"A B"}; return o }(),
		"invalid branch":  detached("a..b"),
	} {
		if _, err := te.env.Start(context.Background(), o); err == nil {
			t.Errorf("%s: start succeeded", name)
		}
	}
	if n := len(te.fake.Containers()); n != 0 {
		t.Errorf("%d containers created", n)
	}
}

func TestStartBuildsMissingDefaultImage(t *testing.T) {
	te := newTestEnv(t)
	te.fake = enginefake.New(te.env.Config.BaseImage)
	te.reopen()
	te.start("t1")
	if te.fake.Count("Build") != 1 {
		t.Errorf("calls = %v, want one Build", te.fake.Methods())
	}
	// Another image that is missing is an error, and nothing is made.
	te.env.Config.Image = "elsewhere:1"
	if _, err := te.env.Start(context.Background(), detached("t2")); err == nil || !strings.Contains(err.Error(), "elsewhere:1") {
		t.Errorf("missing image: %v", err)
	}
	te.assertNothingLeft("t2", false)
}

// Every step of create that fails after the branch exists leaves nothing.
func TestStartRollsBackEachStep(t *testing.T) {
	for _, step := range []string{"state directory", "worktree", "baseline", "record", "private repository", "home", "network", "caches", "warm image", "container", "setup"} {
		t.Run(step, func(t *testing.T) {
			te := newTestEnv(t)
			te.write("README", "carried\n") // so --carry has something to do
			te.env.Faults = failAt{step, errors.New("injected failure at " + step)}
			o := detached("t1")
			o.Carry = true
			_, err := te.env.Start(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), "injected failure at "+step) {
				t.Fatalf("start = %v, want the injected failure", err)
			}
			te.assertNothingLeft("t1", false)
			// The user's checkout is untouched, carried work included.
			if b, _ := os.ReadFile(filepath.Join(te.repo, "README")); string(b) != "carried\n" {
				t.Errorf("checkout changed: %q", b)
			}
			// And the same start then works.
			te.env.Faults = nil
			te.start("t1")
		})
	}
}

func TestStartRollsBackRealFailures(t *testing.T) {
	t.Run("engine create", func(t *testing.T) {
		te := newTestEnv(t)
		te.fake.FailOnce("Create", fmt.Errorf("create: %w", container.ErrConflict))
		if _, err := te.env.Start(context.Background(), detached("t1")); !container.IsConflict(err) {
			t.Fatalf("start = %v, want the engine's conflict", err)
		}
		te.assertNothingLeft("t1", false)
	})
	t.Run("baseline", func(t *testing.T) {
		te := newTestEnv(t)
		// A file where the scratch git directory goes stops the snapshot.
		te.writeIn(te.env.Layout.Dir("t1"), "scratch", "in the way")
		if _, err := te.env.Start(context.Background(), detached("t1")); err == nil {
			t.Fatal("start succeeded")
		}
		te.assertNothingLeft("t1", false)
	})
	t.Run("private repository", func(t *testing.T) {
		te := newTestEnv(t)
		te.writeIn(te.env.Layout.Dir("t1"), "git", "in the way")
		if _, err := te.env.Start(context.Background(), detached("t1")); err == nil || !strings.Contains(err.Error(), "agent repository") {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
	})
	t.Run("carry with conflicts", func(t *testing.T) {
		te := newTestEnv(t)
		te.git("checkout", "-q", "-b", "other")
		te.write("lib.txt", "other\n")
		te.git("commit", "-qam", "other")
		te.git("checkout", "-q", "main")
		te.write("lib.txt", "main\n")
		te.git("commit", "-qam", "main")
		if _, err := te.gitErr("merge", "other"); err == nil {
			t.Fatal("the merge did not conflict")
		}
		o := detached("t1")
		o.Carry = true
		_, err := te.env.Start(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "--carry") {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
	})
	t.Run("setup fails", func(t *testing.T) {
		te := newTestEnv(t)
		te.env.Config.Setup = "make deps"
		te.fake.OnStart = func(c enginefake.Container) (int, bool) { return 2, true }
		_, err := te.env.Start(context.Background(), detached("t1"))
		if err == nil || !strings.Contains(err.Error(), "setup failed with exit code 2") {
			t.Fatalf("start = %v", err)
		}
		te.assertNothingLeft("t1", false)
	})
}

func TestStartRunsSetupThenRebaselines(t *testing.T) {
	te := newTestEnv(t)
	te.env.Config.Setup = "make deps"
	var wt string
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		if c.Starts == 1 {
			// Setup writes a generated file into /workspace and exits.
			te.writeIn(wt, "generated.txt", "deps\n")
			return 0, true
		}
		return 0, false
	}
	wt = te.env.Layout.Worktree("t1")
	sb := te.start("t1")
	c, _ := te.fake.Get(sb.Container)
	if c.Starts != 2 || c.Status != enginefake.StatusRunning {
		t.Errorf("container started %d times (%s), want setup then the agent", c.Starts, c.Status)
	}
	if !slices.Contains(c.Spec.Env, "GIT_SANDBOX_SETUP=make deps") || c.Spec.Argv[0] != "/bin/sh" {
		t.Errorf("setup not wrapped: argv %v env %v", c.Spec.Argv, c.Spec.Env)
	}
	rec := te.find("t1").Record
	if rec.Baseline == c.Spec.Labels[container.LabelBaseline] {
		t.Error("the baseline was not taken again after setup")
	}
	if got := te.git("ls-tree", "--name-only", rec.Baseline); !strings.Contains(got, "generated.txt") {
		t.Errorf("setup's file is not in the baseline: %s", got)
	}
	// What setup wrote is not the agent's change.
	taken, err := te.find("t1").Snapshotter().Take(context.Background(), rescue.ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	if taken.Changes != 0 {
		t.Errorf("changes after setup = %d, want 0", taken.Changes)
	}
}

func TestStartAttachedReturnsAgentExitAndSnapshots(t *testing.T) {
	te := newTestEnv(t)
	wt := te.env.Layout.Worktree("t1")
	te.fake.Output = "agent says hi\n"
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		te.writeIn(wt, "work.txt", "done\n")
		return 3, true
	}
	var out bytes.Buffer
	o := StartOptions{Branch: "t1", Args: []string{"make"}, IO: IO{Stdout: &out, Stderr: &out}}
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want the agent's 3", res.ExitCode)
	}
	if !strings.Contains(out.String(), "agent says hi") {
		t.Errorf("output not streamed: %q", out.String())
	}
	snaps, err := rescue.List(context.Background(), te.env.Git(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 2 || snaps[0].Reason != rescue.ReasonExit || snaps[0].Changes != 1 {
		t.Errorf("snapshots = %+v, want an exit snapshot with the agent's file", snaps)
	}
}

func TestStartExistingDryRunRefused(t *testing.T) {
	te := newTestEnv(t)
	te.start("t1")
	o := detached("t1")
	o.DryRun = true
	if _, err := te.env.Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "would resume") {
		t.Errorf("dry run of an existing sandbox: %v", err)
	}
}

func TestResumeRules(t *testing.T) {
	t.Run("running is refused", func(t *testing.T) {
		te := newTestEnv(t)
		te.start("t1")
		_, err := te.env.Start(context.Background(), detached("t1"))
		if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "already running") {
			t.Errorf("resume of a running sandbox: %v", err)
		}
	})
	t.Run("missing container is made again for a follow-up", func(t *testing.T) {
		te := newTestEnv(t)
		ctx := context.Background()
		sb := te.start("t1")
		te.fake.Exit(sb.Container, 0)
		if _, err := sb.Snapshotter().Take(ctx, rescue.ReasonExit); err != nil {
			t.Fatal(err)
		}
		before := te.sandboxRefs()
		_ = te.fake.Remove(ctx, sb.Container)
		o := detached("t1")
		o.Args, o.Prompt = []string{"sh", "-c", "echo again"}, "go on"
		if _, err := te.env.Start(ctx, o); err != nil {
			t.Fatalf("follow-up of a sandbox whose container was removed: %v", err)
		}
		c, ok := te.fake.Get(sb.Container)
		if !ok || !strings.Contains(strings.Join(c.Spec.Argv, " "), "echo again") || c.Spec.Mounts[0] != sb.Spec.ToSpec().Mounts[0] {
			t.Errorf("the new container: %+v, %v", c.Spec, ok)
		}
		again := te.find("t1")
		if again.Worktree != sb.Worktree || again.Baseline != sb.Baseline || !slices.Equal(again.Tasks, []string{"go on"}) {
			t.Errorf("the record after: %+v", again.Record)
		}
		if after := te.sandboxRefs(); !slices.Equal(after[:len(before)], before) {
			t.Errorf("snapshot refs %v, then %v", before, after)
		}
		if te.git("rev-parse", "--verify", "refs/heads/t1") == "" {
			t.Error("the branch is gone")
		}
	})
	t.Run("missing container without a recorded spec has a hint", func(t *testing.T) {
		te := newTestEnv(t)
		sb := te.start("t1")
		_ = te.fake.Remove(context.Background(), sb.Container)
		if err := sb.Update(func(r *record.Record) error { r.Spec = nil; return nil }); err != nil {
			t.Fatal(err)
		}
		_, err := te.env.Start(context.Background(), detached("t1"))
		ue, ok := usererr.As(err)
		if !ok || !strings.Contains(ue.Msg, "no container any more") || !strings.Contains(strings.Join(ue.Hints, "\n"), "git sandbox rescue list t1") {
			t.Errorf("resume without a container: %#v", err)
		}
	})
	t.Run("mount source swapped for a symlink", func(t *testing.T) {
		te := newTestEnv(t)
		sb := te.start("t1")
		te.fake.Exit(sb.Container, 0)
		priv := te.env.Layout.PrivateGitDir("t1")
		if err := os.Rename(priv, priv+".moved"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(priv+".moved", priv); err != nil {
			t.Fatal(err)
		}
		starts := te.fake.Count("Start")
		_, err := te.env.Start(context.Background(), detached("t1"))
		if err == nil || !strings.Contains(err.Error(), "now resolves to") {
			t.Errorf("resume with a swapped mount source: %v", err)
		}
		if te.fake.Count("Start") != starts {
			t.Error("the container was started")
		}
	})
	t.Run("stopped flag cleared and container started again by --rerun", func(t *testing.T) {
		te := newTestEnv(t)
		sb := te.start("t1")
		if _, err := sb.Stop(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if !te.find("t1").Stopped {
			t.Fatal("stop did not set the stopped flag")
		}
		o := detached("t1")
		o.Args, o.Rerun = nil, true
		res, err := te.env.Start(context.Background(), o)
		if err != nil || !res.Resumed {
			t.Fatalf("resume = %+v, %v", res, err)
		}
		if te.find("t1").Stopped {
			t.Error("stopped flag not cleared")
		}
		if c, _ := te.fake.Get(sb.Container); c.Status != enginefake.StatusRunning || c.Starts != 2 {
			t.Errorf("container %s after %d starts", c.Status, c.Starts)
		}
	})
}

func TestEngineUnreachable(t *testing.T) {
	te := newTestEnv(t)
	te.start("t1")
	te.reopen()
	down := errors.New("daemon down")
	te.env.Engines = ConnectorFunc(func(context.Context, string) (Engine, error) { return nil, down })
	// ps works and says unknown.
	st, err := te.env.Statuses(context.Background())
	if err != nil || len(st) != 1 || st[0].State != StateUnknown {
		t.Errorf("statuses = %+v, %v", st, err)
	}
	sb, _ := te.env.Find("t1")
	// Deleting needs the engine: it does not guess.
	if _, err := sb.Remove(context.Background(), RemoveOptions{Force: true}); !errors.Is(err, down) {
		t.Errorf("remove with the engine down: %v", err)
	}
	if _, err := sb.Running(context.Background()); !errors.Is(err, down) {
		t.Errorf("running with the engine down: %v", err)
	}
	// A snapshot cannot pause the agent, so it fails rather than read.
	if _, err := sb.Snapshotter().Take(context.Background(), rescue.ReasonManual); !errors.Is(err, down) {
		t.Errorf("snapshot with the engine down: %v", err)
	}
}

// An agent whose CLI the image lacks is refused before anything exists,
// with a hint; the same image runs an agent it has, and the shell agent
// always.
func TestStartRefusesAgentMissingFromImage(t *testing.T) {
	te := newTestEnv(t)
	te.fake.AddImage(te.env.Config.Image, "codex")
	o := detached("t1")
	o.Agent, o.Args, o.Prompt = "claude", nil, "fix it"
	_, err := te.env.Start(context.Background(), o)
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(ue.Msg, "has no claude CLI (agent CLIs it has: codex)") ||
		!strings.Contains(strings.Join(ue.Hints, "\n"), "git sandbox image build") ||
		!strings.Contains(strings.Join(ue.Hints, "\n"), "--agent (codex, shell)") {
		t.Fatalf("start = %#v", err)
	}
	if n := te.fake.Count("Create"); n != 0 {
		t.Errorf("%d containers created", n)
	}
	te.assertNothingLeft("t1", false)

	o.Branch, o.Agent = "t2", "codex"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Fatalf("codex: %v", err)
	}
	te.start("t3") // shell
}

// A devcontainer at the start commit gives the plan its setup command and
// image source (built at start, so a dry run asks no engine); its ignored
// keys are printed; an image from the config or --image leaves it unused.
func TestStartPlanFromDevcontainer(t *testing.T) {
	te := newTestEnv(t)
	te.write(".devcontainer.json", `{"image": "proj:1", "postCreateCommand": "make deps", "runArgs": ["--privileged"]}`)
	te.git("add", "-A")
	te.git("commit", "-q", "-m", "devcontainer")
	o := detached("t1")
	o.DryRun = true
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plan
	if p.Devcontainer == nil || p.Setup != "make deps" || p.Container.Image != devImagePending+".devcontainer.json" {
		t.Errorf("plan: devcontainer %+v, setup %q, image %q", p.Devcontainer, p.Setup, p.Container.Image)
	}
	if !strings.Contains(te.err.String(), ".devcontainer.json: runArgs ignored") {
		t.Errorf("ignored keys not printed:\n%s", te.err.String())
	}
	if calls := te.fake.Calls(); len(calls) != 0 {
		t.Errorf("dry run asked the engine: %v", calls)
	}
	o.Image = "other:1"
	if res, err = te.env.Start(context.Background(), o); err != nil || res.Plan.Devcontainer != nil || res.Plan.Setup != "" || res.Plan.Container.Image != "other:1" {
		t.Errorf("--image: %v %+v", err, res.Plan)
	}
	// A real start refuses the image the user has not allowed, naming it
	// and where it comes from; once allowed, an engine that cannot build
	// images says so. Either way nothing is made.
	o.Image, o.DryRun = "", false
	if _, err := te.env.Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "proj:1 from .devcontainer.json line 1 (image)") {
		t.Errorf("start of a repository's image not allowed: %v", err)
	}
	te.assertNothingLeft("t1", false)
	te.env.Config.AllowedImages = []string{"proj:1"}
	if _, err := te.env.Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "cannot build the image .devcontainer.json describes") {
		t.Errorf("start on the fake engine: %v", err)
	}
	te.assertNothingLeft("t1", false)
}

// --publish: loopback only, a free host port chosen where none is given,
// fixed at creation (labels, record, ps); refused without a network. (In
// allowlist mode the proxy publishes them: TestAllowlistProxyPublishesPorts.)
func TestStartPublishesPorts(t *testing.T) {
	te := newTestEnv(t)
	o := detached("t1")
	o.Network = "open"
	o.Publish = []string{"3000", "18080:8080"}
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := te.fake.Get(res.Sandbox.Container)
	ps := c.Spec.Ports
	if len(ps) != 2 || ps[0].Port != 3000 || ps[0].HostPort == 0 || ps[0].HostIP != "127.0.0.1" ||
		ps[1] != (container.Port{HostIP: "127.0.0.1", HostPort: 18080, Port: 8080}) {
		t.Fatalf("ports %+v", ps)
	}
	if c.Spec.Labels[container.LabelPorts] != container.PortsLabel(ps) {
		t.Errorf("label %q", c.Spec.Labels[container.LabelPorts])
	}
	list, err := te.env.Statuses(context.Background())
	if err != nil || len(list) != 1 || len(list[0].Ports) != 2 || list[0].Ports[0].HostPort != ps[0].HostPort {
		t.Errorf("ps: %+v %v", list, err)
	}
	for name, o := range map[string]StartOptions{
		"all interfaces": func() StartOptions {
			o := detached("t2")
			o.Publish = []string{"0.0.0.0:80:80"}
			o.Network = "open"
			return o
		}(),
		"no network": func() StartOptions { o := detached("t3"); o.Publish = []string{"80"}; o.Network = "none"; return o }(),
		"twice": func() StartOptions {
			o := detached("t4")
			o.Publish = []string{"80", "1:80"}
			o.Network = "open"
			return o
		}(),
	} {
		if _, err := te.env.Start(context.Background(), o); err == nil {
			t.Errorf("%s: start succeeded", name)
		} else if _, ok := usererr.As(err); !ok {
			t.Errorf("%s: %v is not a user error", name, err)
		}
	}
}

// An image the repository chose runs only when the user allowed it: in
// allowed_images, or by answering yes on a terminal.
func TestStartAsksForTheRepositorysImage(t *testing.T) {
	te := newTestEnv(t)
	te.fake = enginefake.New(config.DefaultImage(), "repo:img")
	te.reopen()
	repoImage := func() {
		te.env.Config.Image = "repo:img"
		te.env.Config.RepoImage = "repo:img"
	}
	repoImage()
	if _, err := te.env.Start(context.Background(), detached("t1")); err == nil || !strings.Contains(err.Error(), "repo:img") {
		t.Errorf("without a terminal: %v", err)
	}
	te.assertNothingLeft("t1", false)
	onTerminal := func(branch, answer string) (StartOptions, *strings.Reader, *bytes.Buffer) {
		o := detached(branch)
		in := strings.NewReader(answer)
		var prompt bytes.Buffer
		o.IO.Stdin, o.IO.StdinIsTerminal, o.IO.Stderr = in, true, &prompt
		return o, in, &prompt
	}
	o, _, prompt := onTerminal("t2", "n\n")
	if _, err := te.env.Start(context.Background(), o); err == nil {
		t.Errorf("answered no: started")
	}
	if !strings.Contains(prompt.String(), "[y/N]") {
		t.Errorf("no question asked: %q", prompt.String())
	}
	te.assertNothingLeft("t2", false)
	o, in, _ := onTerminal("t3", "y\nfor the agent")
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Errorf("answered yes: %v", err)
	}
	if in.Len() != len("for the agent") {
		t.Errorf("the question read %d bytes past its line", len("for the agent")-in.Len())
	}
	te.reopen()
	repoImage()
	te.env.Config.AllowedImages = []string{"repo:img"}
	if _, err := te.env.Start(context.Background(), detached("t4")); err != nil {
		t.Errorf("allowed in the config: %v", err)
	}
	// --image is the user's own choice.
	te.env.Config.AllowedImages = nil
	o = detached("t5")
	o.Image = "repo:img"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Errorf("--image: %v", err)
	}
}

// A [[cache]] is a volume of the repository, created (labelled) before the
// container and made writable by a throwaway root container with no
// capabilities; the next sandbox reuses it.
func TestStartMountsCaches(t *testing.T) {
	te := newTestEnv(t)
	te.env.Config.Caches = []config.Cache{{Target: "/home/sandbox/go/pkg/mod"}}
	var chmod []string
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		if c.Spec.Labels[container.LabelRole] != "probe" {
			return 0, false
		}
		if c.Spec.User != "0:0" || c.Spec.CapDrop[0] != "ALL" || c.Spec.Network != container.NetworkNone {
			t.Errorf("chmod container %+v", c.Spec)
		}
		chmod = c.Spec.Argv
		return 0, true
	}
	sb := te.start("t1")
	if strings.Join(chmod, " ") != "chmod 1777 /cache" {
		t.Errorf("chmod container ran %q", chmod)
	}
	c, _ := te.fake.Get(sb.Container)
	var vol container.Mount
	for _, m := range c.Spec.Mounts {
		if m.Volume {
			vol = m
		}
	}
	if vol.Target != "/home/sandbox/go/pkg/mod" || vol.Source != container.CacheVolume(te.env.Repo.ID, vol.Target) {
		t.Fatalf("mounts %+v", c.Spec.Mounts)
	}
	vols, err := te.fake.ListVolumes(context.Background(), container.LabelCache+"=1", container.LabelRepo+"="+te.env.Repo.ID)
	if err != nil || len(vols) != 1 || vols[0].Name != vol.Source || vols[0].Labels[container.LabelCacheTarget] != vol.Target {
		t.Fatalf("volumes %+v %v", vols, err)
	}
	// The mount point exists in the sandbox's home, made by the user.
	if fi, err := os.Stat(filepath.Join(te.env.Layout.Home(c.Spec.Labels[container.LabelBranch]), "go", "pkg", "mod")); err != nil || !fi.IsDir() {
		t.Errorf("mount point in the agent home: %v", err)
	}
	probes := 0
	for _, pc := range te.fake.Containers() {
		if pc.Spec.Labels[container.LabelRole] == "probe" {
			probes++
		}
	}
	if creates := te.fake.Count("Create"); creates != 2 || probes != 0 {
		t.Errorf("%d creates, %d probe containers left; want the sandbox's and the removed chmod container", creates, probes)
	}
	te.start("t2")
	if n := te.fake.Count("CreateVolume"); n != 1 {
		t.Errorf("%d volumes created, want one shared", n)
	}
}
