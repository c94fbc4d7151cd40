package e2e

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
	"github.com/git-sandbox/git-sandbox/container/docker"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// devImageRepository is where this suite's devcontainer images are tagged;
// every tag in it is the tests' own and is removed by them.
const devImageRepository = "git-sandbox-e2e-dev"

// devcontainerBuild is the project's toolchain as a test can have it
// offline: a Dockerfile on the offline base that leaves a marker, and a tool
// copied from the repository (standing in for python3, which cannot be
// installed without a network).
func devcontainerFiles(e *Env, dockerfileExtra string) {
	e.WriteFile(".devcontainer/devcontainer.json", `{
	// The project's development container.
	"name": "demo",
	"build": {
		"dockerfile": "Dockerfile",
		"context": "..",
		"args": {"GREETING": "hello from the build",},
	},
	"postCreateCommand": ["projtool", "--setup"],
	"containerEnv": {"PROJ_MODE": "dev", "GITHUB_TOKEN": "from-the-repo"},
	"remoteEnv": {"PATH": "${containerEnv:PATH}:/opt/proj/bin"},
	"privileged": true,
	"mounts": ["source=/,target=/host,type=bind"],
}
`)
	e.WriteFile(".devcontainer/Dockerfile", "FROM "+baseImage+`
ARG GREETING
RUN echo "marker: $GREETING" > /opt/devcontainer-marker
COPY tools/projtool /usr/local/bin/projtool
COPY . /opt/context
`+dockerfileExtra)
	e.WriteFile("tools/projtool", "#!/bin/sh\necho \"projtool ran: $*\"\n")
	must(e.t, os.Chmod(filepath.Join(e.Repo, "tools", "projtool"), 0o755))
	e.WriteFile(".dockerignore", "secret.txt\n")
	e.WriteFile("secret.txt", "not for the image\n")
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "devcontainer")
}

// devLoadPlan loads and plans the devcontainer image of HEAD.
func devLoadPlan(t *testing.T, ctx context.Context, d container.Images, repo *worktree.Repo, noAgents bool) (*devcontainer.Config, *devcontainer.Plan, devcontainer.Source) {
	t.Helper()
	head, err := repo.Git().Output(ctx, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	src := devcontainer.Source{Git: repo.Git(), Commit: head}
	cfg, err := devcontainer.Load(ctx, src)
	if err != nil || cfg == nil {
		t.Fatalf("load: %v, %v", cfg, err)
	}
	plan, err := devcontainer.PlanImage(ctx, d, src, cfg, devcontainer.ImageOptions{
		Repository: devImageRepository, RepoName: repo.Name, RepoID: repo.ID, NoAgents: noAgents,
	})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return cfg, plan, src
}

// devPlan plans the devcontainer image of HEAD without building it.
func devPlan(t *testing.T, ctx context.Context, d container.Images, repo *worktree.Repo, noAgents bool) *devcontainer.Plan {
	t.Helper()
	_, p, _ := devLoadPlan(t, ctx, d, repo, noAgents)
	return p
}

// devImage loads, plans and ensures the devcontainer image of HEAD; fresh
// first removes an image of that tag left by an interrupted run.
func devImage(t *testing.T, ctx context.Context, d container.Images, repo *worktree.Repo, noAgents, fresh bool) (*devcontainer.Config, *devcontainer.Plan, *devcontainer.Image, string) {
	t.Helper()
	cfg, plan, src := devLoadPlan(t, ctx, d, repo, noAgents)
	t.Cleanup(func() { removeImage(plan.Tag) })
	if fresh {
		removeImage(plan.Tag)
	}
	var out strings.Builder
	img, err := devcontainer.EnsureImage(ctx, d, src, plan, devcontainer.BuildOptions{Out: &out, Network: "none"})
	if err != nil {
		t.Fatalf("ensure image: %v\n%s", err, out.String())
	}
	return cfg, plan, img, out.String()
}

// removeImage removes a test-owned tag (and the untagged parents only it
// had). The daemon finishes a removal it started even when the client gives
// up, so a wedged daemon costs the test two minutes, not its whole run.
func removeImage(tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = exec.CommandContext(ctx, "docker", "rmi", tag).Run()
}

// runIn runs a shell command in a throwaway container of image as a
// non-root uid, as sandboxes run, and returns its output.
func runIn(t *testing.T, image string, env []string, script string) string {
	t.Helper()
	args := []string{"run", "--rm", "--network", "none", "--user", "4321:4321", "--cap-drop", "ALL"}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	args = append(args, image, "/bin/sh", "-c", script)
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", image, err, out)
	}
	return string(out)
}

// TestDevcontainerImage builds a repository's devcontainer image through the
// package start will use: the repository's Dockerfile (with its build
// context from the commit, .dockerignore applied) is the base, git
// sandbox's layer is on top, labels record the hash and the agent CLIs; the
// setup command and environment come out of the file, what reaches past the
// sandbox is ignored with reasons; unchanged inputs reuse the image without
// building, a changed Dockerfile makes a new tag.
func TestDevcontainerImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewEnv(t)
	devcontainerFiles(e, "")
	repo, err := worktree.Open(ctx, e.Repo)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := eng.Images()

	cfg, plan, img, out := devImage(t, ctx, d, repo, true, true)
	if !img.Built || !strings.HasPrefix(img.Tag, devImageRepository+":repo-") || img.Tag != plan.Tag {
		t.Fatalf("first build: %+v\n%s", img, out)
	}
	t.Logf("first build's progress:\n%s", out)
	for _, line := range []string{"building image " + plan.Tag, "the base: .devcontainer/Dockerfile (context .)", "Step 1/", "built " + plan.Tag + "; agent CLIs: "} {
		if !strings.Contains(out, line) {
			t.Errorf("progress lacks %q:\n%s", line, out)
		}
	}

	// What the file asks for and does not get, each with its reason.
	ignored := map[string]string{}
	for _, i := range cfg.Ignored {
		ignored[i.Key] = i.String()
	}
	for key, reason := range map[string]string{
		"privileged":                "never privileged",
		"mounts":                    "your own config",
		"containerEnv.GITHUB_TOKEN": "credential",
	} {
		if !strings.Contains(ignored[key], reason) {
			t.Errorf("%s: %q, want it ignored saying %q", key, ignored[key], reason)
		}
	}

	// The image: the project's toolchain, the context as committed and
	// filtered, git sandbox's layer.
	env := cfg.Environ(img.Env)
	got := runIn(t, img.Tag, env, `cat /opt/devcontainer-marker
projtool --check
test -e /opt/context/secret.txt && echo "secret.txt copied"
test -x /opt/context/tools/projtool && echo "context has tools/projtool"
git --version | cut -d' ' -f1-2
stat -c '%a %n' /home/sandbox /workspace
test -e /etc/git-sandbox-agents && echo "agent list present"
echo "HOME=$HOME PROJ_MODE=$PROJ_MODE TOKEN=${GITHUB_TOKEN:-unset}"
case ":$PATH:" in *:/opt/proj/bin:*) echo "PATH extended";; esac
pwd
`+cfg.SetupCommand())
	for _, want := range []string{
		"marker: hello from the build", "projtool ran: --check", "context has tools/projtool",
		"git version", "1777 /home/sandbox", "1777 /workspace", "agent list present",
		"HOME=/home/sandbox PROJ_MODE=dev TOKEN=unset", "PATH extended", "/workspace",
		// The setup command runs the project's tool.
		"projtool ran: --setup",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("image lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "secret.txt copied") {
		t.Errorf(".dockerignore was not applied:\n%s", got)
	}
	if cfg.SetupCommand() != "projtool --setup" {
		t.Errorf("setup command %q", cfg.SetupCommand())
	}

	// The labels record what it was built from and which agent CLIs it has
	// (none asked for; the label is there all the same).
	info, ok, err := d.Inspect(ctx, img.Tag)
	if err != nil || !ok {
		t.Fatalf("inspect: %v %v", ok, err)
	}
	agents, labelled := info.Labels[container.LabelAgents]
	if !labelled || info.Labels[devcontainer.LabelHash] != plan.Hash || info.Labels[container.LabelImage] != "1" ||
		info.Labels[devcontainer.LabelDevcontainer] != ".devcontainer/devcontainer.json" || info.Labels[devcontainer.LabelRepo] != repo.ID {
		t.Errorf("labels %v", info.Labels)
	}
	if probed, err := d.Agents(ctx, img.Tag); err != nil || strings.Join(probed, ",") != agents || !slices.Equal(img.Agents, probed) {
		t.Errorf("agents label %q, image says %v (%v), EnsureImage said %v", agents, probed, err, img.Agents)
	}

	// A new commit that changes only what the build does not see (a file
	// .dockerignore excludes): the same tag, the same image, nothing built.
	e.WriteFile("secret.txt", "changed, and still ignored\n")
	e.Git("commit", "-q", "-am", "only an ignored file")
	began := time.Now()
	_, plan2, reused, out2 := devImage(t, ctx, d, repo, true, false)
	t.Logf("planning and reusing an existing image took %v", time.Since(began))
	if plan2.Tag != plan.Tag || reused.Built || reused.ID != img.ID || out2 != "" {
		t.Errorf("unchanged inputs were not reused: %s vs %s, built %v, id %s vs %s\n%s", plan2.Tag, plan.Tag, reused.Built, reused.ID, img.ID, out2)
	}

	// A changed Dockerfile, or a changed file of the context: a new tag
	// (the unit tests show every input counts; building those would only
	// show the engine's cache at work again).
	e.WriteFile("README.md", "changed\n")
	e.Git("commit", "-q", "-am", "a context file")
	if p := devPlan(t, ctx, d, repo, true); p.Tag == plan.Tag {
		t.Errorf("a changed context file kept the tag %s", p.Tag)
	}
	devcontainerFiles(e, "RUN echo second > /opt/second\n")
	if p := devPlan(t, ctx, d, repo, true); p.Tag == plan.Tag {
		t.Errorf("a changed Dockerfile kept the tag %s", p.Tag)
	} else if _, ok, _ := d.Inspect(ctx, p.Tag); ok {
		t.Errorf("the new tag %s exists before any build", p.Tag)
	}
}

// TestDevcontainerNamedImage: a devcontainer that names an image gets git
// sandbox's layer on that image, tagged by the image's id.
func TestDevcontainerNamedImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewEnv(t)
	e.WriteFile(".devcontainer.json", `{"image": "`+baseImage+`", "postCreateCommand": "echo ready > /tmp/ready"}`)
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "devcontainer")
	repo, err := worktree.Open(ctx, e.Repo)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := eng.Images()
	_, plan, img, out := devImage(t, ctx, d, repo, true, true)
	base, _, err := d.Inspect(ctx, baseImage)
	if err != nil {
		t.Fatal(err)
	}
	if !img.Built || plan.Inputs.BaseImageID != base.ID || strings.Contains(out, "the base:") {
		t.Errorf("plan %+v, image %+v\n%s", plan.Inputs, img, out)
	}
	if got := runIn(t, img.Tag, nil, "stat -c '%a %n' /home/sandbox; git --version"); !strings.Contains(got, "1777 /home/sandbox") || !strings.Contains(got, "git version") {
		t.Errorf("layer missing: %q", got)
	}
}

// TestDevcontainerBuildFailure: a failing step of the repository's
// Dockerfile is an error that says so, the quiet progress shows the
// failing step's own output, and nothing is tagged.
func TestDevcontainerBuildFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewEnv(t)
	e.WriteFile(".devcontainer/devcontainer.json", `{"build": {"dockerfile": "Dockerfile"}}`)
	e.WriteFile(".devcontainer/Dockerfile", "FROM "+baseImage+"\nRUN echo 'the toolchain is missing' >&2; exit 3\n")
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "broken devcontainer")
	repo, err := worktree.Open(ctx, e.Repo)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := eng.Images()
	_, plan, src := devLoadPlan(t, ctx, d, repo, true)
	var out strings.Builder
	_, err = devcontainer.EnsureImage(ctx, d, src, plan, devcontainer.BuildOptions{Out: &out, Network: "none"})
	if err == nil {
		removeImage(plan.Tag)
		t.Fatal("a failing Dockerfile built")
	}
	if !strings.Contains(err.Error(), "the base image of .devcontainer/devcontainer.json did not build") || !strings.Contains(err.Error(), "returned a non-zero code: 3") {
		t.Errorf("error: %v", err)
	}
	if !strings.Contains(out.String(), "Step 2/2 : RUN") || !strings.Contains(out.String(), "the toolchain is missing") {
		t.Errorf("progress does not show the failing step:\n%s", out.String())
	}
	if _, ok, _ := d.Inspect(ctx, plan.Tag); ok {
		t.Errorf("%s was tagged", plan.Tag)
	}
}
