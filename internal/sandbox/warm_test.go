package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

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
		if c.Spec.Labels[container.LabelRole] == toolchain.RoleSetup && slices.Contains(o.Env, "GIT_SANDBOX_SETUP=make deps") {
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
	te.env.Engines = ConnectorFunc(func(context.Context, string) (Engine, error) { return committer, nil })
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
		setupC.Spec.Labels[container.LabelPrompt] != "" || setupC.Spec.Argv[0] != "/bin/sh" || !strings.Contains(strings.Join(setupC.Spec.Argv, " "), "sleep 3600") {
		t.Errorf("committed container: status %s, env %q, labels %v, argv %q", setupC.Status, setupC.Spec.Env, setupC.Spec.Labels, setupC.Spec.Argv)
	}
	if !slices.Equal(setupC.Spec.Mounts, sb.Spec.ToSpec().Mounts) || setupC.Spec.User != sb.Spec.User || setupC.Spec.Network != sb.Spec.Network {
		t.Errorf("the setup container is not made like the sandbox's")
	}
	if _, ok := te.fake.Get(setupC.ID); ok {
		t.Errorf("the setup container was left")
	}
	tag := commits[0].Options.Tag
	l := commits[0].Options.Labels
	if !strings.HasPrefix(tag, toolchain.WarmRepository+":repo-") || l[toolchain.LabelWarmRepo] != te.env.Repo.ID || l[toolchain.LabelWarmKey] == "" || l[toolchain.LabelWarmWorkspace] == "" || l[toolchain.LabelWarmFrom] == "" {
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
