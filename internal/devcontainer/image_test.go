package devcontainer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
)

// fakeEngine records builds and keeps images in memory.
type fakeEngine struct {
	images map[string]container.ImageInfo
	builds []fakeBuild
	agents []string
	fail   int // the build (1-based) that fails
	probes []string
}

type fakeBuild struct {
	files      map[string]string // name -> content, or "-> target" for links
	modes      map[string]int64
	dockerfile string
	opts       container.ContextBuild
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{images: map[string]container.ImageInfo{}}
}

func (f *fakeEngine) Inspect(_ context.Context, ref string) (container.ImageInfo, bool, error) {
	info, ok := f.images[ref]
	return info, ok, nil
}

func (f *fakeEngine) BuildContext(_ context.Context, o container.ContextBuild) (string, error) {
	b := fakeBuild{files: map[string]string{}, modes: map[string]int64{}, opts: o}
	tr := tar.NewReader(o.Context)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		body, _ := io.ReadAll(tr)
		b.files[h.Name] = string(body)
		if h.Typeflag == tar.TypeSymlink {
			b.files[h.Name] = "-> " + h.Linkname
		}
		b.modes[h.Name] = h.Mode
	}
	b.dockerfile = b.files[o.Dockerfile]
	f.builds = append(f.builds, b)
	if len(f.builds) == f.fail {
		return "", fmt.Errorf("build %d failed", f.fail)
	}
	id := fmt.Sprintf("sha256:%064d", len(f.builds))
	info := container.ImageInfo{ID: id, Labels: o.Labels, Env: []string{"PATH=/usr/bin", "HOME=/home/sandbox"}}
	f.images[id] = info
	for _, t := range o.Tags {
		f.images[t] = info
	}
	return id, nil
}

func (f *fakeEngine) Agents(_ context.Context, image string) ([]string, error) {
	f.probes = append(f.probes, image)
	return f.agents, nil
}

func (f *fakeEngine) ProbeAgents(ctx context.Context, image string) ([]string, error) {
	return f.Agents(ctx, image)
}

func planOf(t *testing.T, r *testRepo, eng Engine, commit string, o ImageOptions) *Plan {
	t.Helper()
	c, err := r.load(commit)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanImage(context.Background(), eng, Source{Git: r.g, Commit: commit}, c, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var buildRepo = map[string]string{
	".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "1"}}}`,
	".devcontainer/Dockerfile":        "FROM base\nCOPY tool.sh /usr/local/bin/tool\n",
	".dockerignore":                   "node_modules\n*.log\n!keep.log\n",
	"tool.sh":                         "exec:#!/bin/sh\necho tool\n",
	"src/main.go":                     "package main\n",
	"node_modules/x/index.js":         "junk",
	"debug.log":                       "junk",
	"keep.log":                        "kept",
	"link":                            "link:src/main.go",
}

func TestTag(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	for name, want := range map[string]string{
		"my-repo":                "git-sandbox-dev:my-repo-abababababab",
		"My Repo!":               "git-sandbox-dev:My-Repo-abababababab",
		".hidden":                "git-sandbox-dev:hidden-abababababab",
		"":                       "git-sandbox-dev:repo-abababababab",
		strings.Repeat("x", 100): "git-sandbox-dev:" + strings.Repeat("x", 40) + "-abababababab",
	} {
		if got := Tag("", name, hash); got != want {
			t.Errorf("Tag(%q) = %q, want %q", name, got, want)
		}
	}
	if got := Tag("git-sandbox-e2e-dev", "r", hash); got != "git-sandbox-e2e-dev:r-abababababab" {
		t.Errorf("own repository: %s", got)
	}
	valid := regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	if got := Tag("", "ünïcödé/…", hash); !valid.MatchString(got) {
		t.Errorf("invalid tag %q", got)
	}
}

// TestHashFollowsEveryInput: the same inputs give the same tag; a change of
// the Dockerfile, a context file, an argument, the target or the agent
// choice gives another; files the build cannot see (ignored, outside the
// context) do not count.
func TestHashFollowsEveryInput(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	eng := newFakeEngine()
	o := ImageOptions{RepoName: "demo"}
	first := r.commit(buildRepo)
	p := planOf(t, r, eng, first, o)
	if !strings.HasPrefix(p.Tag, "git-sandbox-dev:demo-") || p.Tag != Tag("", "demo", p.Hash) || len(p.Hash) != 64 {
		t.Fatalf("tag %q, hash %q", p.Tag, p.Hash)
	}
	if again := planOf(t, r, eng, first, o); again.Tag != p.Tag {
		t.Errorf("same inputs, new tag: %s vs %s", again.Tag, p.Tag)
	}
	// A commit that changes nothing the build sees keeps the tag.
	same := r.commit(map[string]string{"debug.log": "other junk", "node_modules/x/index.js": "other"})
	if got := planOf(t, r, eng, same, o).Tag; got != p.Tag {
		t.Errorf("ignored files changed the tag")
	}
	seen := map[string]string{p.Tag: "first"}
	changes := []struct {
		name  string
		files map[string]string
	}{
		{"Dockerfile", map[string]string{".devcontainer/Dockerfile": "FROM base\nCOPY tool.sh /usr/local/bin/tool\nRUN true\n"}},
		{"a context file", map[string]string{"src/main.go": "package main // changed\n"}},
		{"an un-ignored log", map[string]string{"keep.log": "changed"}},
		{"a mode", map[string]string{"tool.sh": "#!/bin/sh\necho tool\n"}},
		{"a link", map[string]string{"link": "link:tool.sh"}},
		{"a new file", map[string]string{"new.txt": "n"}},
		{"the .dockerignore", map[string]string{".dockerignore": "node_modules\n"}},
		{"args", map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "2"}}}`}},
		{"target", map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "2"}, "target": "dev"}}`}},
		{"context", map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "../src", "args": {"V": "2"}, "target": "dev"}}`}},
	}
	for _, c := range changes {
		tag := planOf(t, r, eng, r.commit(c.files), o).Tag
		if prev, dup := seen[tag]; dup {
			t.Errorf("changing %s kept the tag of %s", c.name, prev)
		}
		seen[tag] = c.name
	}
	last := r.git("rev-parse", "HEAD")
	// The context is src/ now: files outside it do not count.
	if got := planOf(t, r, eng, r.commit(map[string]string{"tool.sh": "elsewhere"}), o).Tag; got != planOf(t, r, eng, last, o).Tag {
		t.Error("a file outside the context changed the tag")
	}
	if planOf(t, r, eng, last, ImageOptions{RepoName: "demo", NoAgents: true}).Tag == planOf(t, r, eng, last, o).Tag {
		t.Error("the agent choice does not change the tag")
	}
	// Inputs changed one at a time change the hash.
	base := p.Inputs
	for name, mut := range map[string]func(*Inputs){
		"version": func(in *Inputs) { in.Version = "v9" },
		"layer":   func(in *Inputs) { in.Layer = "x" },
		"format":  func(in *Inputs) { in.Format = "y" },
	} {
		in := base
		in.Args = maps.Clone(base.Args)
		mut(&in)
		if in.Hash() == base.Hash() {
			t.Errorf("changing the %s keeps the hash", name)
		}
	}
}

func TestHashOfANamedImageIsItsID(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	eng := newFakeEngine()
	commit := r.commit(map[string]string{".devcontainer.json": `{"image": "proj:dev"}`})
	c, err := r.load(commit)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Git: r.g, Commit: commit}
	if _, err := PlanImage(context.Background(), eng, src, c, ImageOptions{}); err == nil || !strings.Contains(err.Error(), "docker pull proj:dev") && !strings.Contains(err.Error(), "not present locally") {
		t.Errorf("a missing image: %v", err)
	}
	eng.images["proj:dev"] = container.ImageInfo{ID: "sha256:aaa"}
	p1, err := PlanImage(context.Background(), eng, src, c, ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Inputs.BaseImageID != "sha256:aaa" || p1.Base != "proj:dev" {
		t.Errorf("inputs %+v", p1.Inputs)
	}
	eng.images["proj:dev"] = container.ImageInfo{ID: "sha256:bbb"}
	p2, _ := PlanImage(context.Background(), eng, src, c, ImageOptions{})
	if p1.Tag == p2.Tag {
		t.Error("a retagged base image keeps the tag")
	}
}

func TestEnsureImageBuildsBaseLayerAndLabels(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	eng := newFakeEngine()
	eng.agents = []string{"claude", "codex"}
	commit := r.commit(buildRepo)
	p := planOf(t, r, eng, commit, ImageOptions{RepoName: "demo", RepoID: "demo-123"})
	var out strings.Builder
	proxy := map[string]string{"HTTP_PROXY": "http://proxy:3128", "V": "the proxy's"}
	img, err := EnsureImage(context.Background(), eng, Source{Git: r.g, Commit: commit}, p, BuildOptions{Out: &out, Network: "sbx-net", ProxyArgs: proxy})
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.builds) != 3 {
		t.Fatalf("%d builds, want base, layer, labels", len(eng.builds))
	}
	base, layer, stamp := eng.builds[0], eng.builds[1], eng.builds[2]

	// Every step runs on the sandbox's network; the steps that run
	// programs get the proxy's arguments, which win over the file's.
	for i, b := range eng.builds {
		if b.opts.Network != "sbx-net" {
			t.Errorf("build %d on network %q, want the sandbox's", i, b.opts.Network)
		}
	}
	for i, b := range []fakeBuild{base, layer} {
		if b.opts.Args["HTTP_PROXY"] != "http://proxy:3128" || b.opts.Args["V"] != "the proxy's" {
			t.Errorf("build %d args %v lack the proxy's", i, b.opts.Args)
		}
	}
	if p.cfg.Build.Args["V"] != "1" {
		t.Errorf("the proxy's arguments changed the file's: %v", p.cfg.Build.Args)
	}

	// The base: the repository's Dockerfile and its context as committed,
	// less what .dockerignore excludes.
	if base.opts.Dockerfile != contextDockerfile || base.dockerfile != buildRepo[".devcontainer/Dockerfile"] {
		t.Errorf("base Dockerfile %q: %q", base.opts.Dockerfile, base.dockerfile)
	}
	wantFiles := []string{contextDockerfile, ".devcontainer/Dockerfile", ".devcontainer/devcontainer.json", ".dockerignore", "keep.log", "link", "src/main.go", "tool.sh"}
	if got := slices.Sorted(maps.Keys(base.files)); !slices.Equal(got, slices.Sorted(slices.Values(wantFiles))) {
		t.Errorf("context files %v, want %v", got, wantFiles)
	}
	if base.files["tool.sh"] != "#!/bin/sh\necho tool\n" || base.modes["tool.sh"] != 0o755 || base.modes["src/main.go"] != 0o644 {
		t.Errorf("tool.sh %q mode %o, main.go mode %o", base.files["tool.sh"], base.modes["tool.sh"], base.modes["src/main.go"])
	}
	if base.files["link"] != "-> src/main.go" {
		t.Errorf("link: %q", base.files["link"])
	}
	if len(base.opts.Tags) != 0 {
		t.Errorf("base tags %v", base.opts.Tags)
	}

	// git sandbox's layer, on the base by id.
	if layer.dockerfile != string(container.LayerDockerfile()) || layer.opts.Args["BASE"] != "sha256:"+fmt.Sprintf("%064d", 1) || !strings.HasPrefix(layer.opts.Args["AGENT_PACKAGES"], "claude=") {
		t.Errorf("layer: args %v", layer.opts.Args)
	}
	if len(eng.probes) != 1 || eng.probes[0] != "sha256:"+fmt.Sprintf("%064d", 2) {
		t.Errorf("agents read from %v, want the layer", eng.probes)
	}

	// The labels, on the tagged result.
	if stamp.dockerfile != "FROM sha256:"+fmt.Sprintf("%064d", 2)+"\n" || !slices.Equal(stamp.opts.Tags, []string{p.Tag}) {
		t.Errorf("stamp: %q tags %v", stamp.dockerfile, stamp.opts.Tags)
	}
	want := map[string]string{
		container.LabelImage:           "1",
		container.LabelImage + ".base": ".devcontainer/Dockerfile",
		container.LabelAgents:          "claude,codex",
		LabelDevcontainer:              ".devcontainer/devcontainer.json",
		LabelHash:                      p.Hash,
		LabelRepo:                      "demo-123",
	}
	if !maps.Equal(stamp.opts.Labels, want) {
		t.Errorf("labels %v, want %v", stamp.opts.Labels, want)
	}
	if !img.Built || img.Tag != p.Tag || !slices.Equal(img.Agents, []string{"claude", "codex"}) || len(img.Env) == 0 {
		t.Errorf("image %+v", img)
	}
	for _, line := range []string{"building image " + p.Tag, "the base: .devcontainer/Dockerfile (context .)", "git sandbox's layer", "built " + p.Tag + "; agent CLIs: claude, codex"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, out.String())
		}
	}

	// Again: the tag exists, nothing is built or probed.
	again, err := EnsureImage(context.Background(), eng, Source{Git: r.g, Commit: commit}, p, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.builds) != 3 || len(eng.probes) != 1 || again.Built || again.ID != img.ID || !slices.Equal(again.Agents, img.Agents) {
		t.Errorf("reuse built again (%d builds, %d probes) or differs: %+v", len(eng.builds), len(eng.probes), again)
	}
}

func TestEnsureImageOnANamedImage(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	eng := newFakeEngine()
	eng.images["proj:dev"] = container.ImageInfo{ID: "sha256:proj"}
	commit := r.commit(map[string]string{".devcontainer.json": `{"image": "proj:dev"}`})
	p := planOf(t, r, eng, commit, ImageOptions{NoAgents: true})
	img, err := EnsureImage(context.Background(), eng, Source{Git: r.g, Commit: commit}, p, BuildOptions{Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.builds) != 2 {
		t.Fatalf("%d builds, want the layer and the labels", len(eng.builds))
	}
	if a := eng.builds[0].opts.Args; a["BASE"] != "sha256:proj" || a["AGENT_PACKAGES"] != "" {
		t.Errorf("layer args %v", a)
	}
	if l := eng.builds[1].opts.Labels; l[container.LabelAgents] != "" || l[container.LabelImage+".base"] != "proj:dev" {
		t.Errorf("labels %v", l)
	}
	if img.Agents != nil {
		t.Errorf("agents %v", img.Agents)
	}
}

func TestEnsureImageFailureTagsNothing(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	eng := newFakeEngine()
	eng.fail = 1
	commit := r.commit(buildRepo)
	p := planOf(t, r, eng, commit, ImageOptions{})
	_, err := EnsureImage(context.Background(), eng, Source{Git: r.g, Commit: commit}, p, BuildOptions{Network: "none"})
	if err == nil || !strings.Contains(err.Error(), "the base image of .devcontainer/devcontainer.json did not build") {
		t.Fatalf("error %v", err)
	}
	if _, ok := eng.images[p.Tag]; ok || len(eng.builds) != 1 {
		t.Errorf("a failed base build went on (%d builds) or tagged", len(eng.builds))
	}
}

// A repository's build never runs on the engine's default network: a
// build without the sandbox's network is refused before anything is built.
func TestEnsureImageNeedsTheSandboxsNetwork(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	commit := r.commit(buildRepo)
	for _, network := range []string{"", "default", "bridge", "host"} {
		eng := newFakeEngine()
		p := planOf(t, r, eng, commit, ImageOptions{})
		if _, err := EnsureImage(context.Background(), eng, Source{Git: r.g, Commit: commit}, p, BuildOptions{Network: network}); err == nil || len(eng.builds) != 0 {
			t.Errorf("network %q: %v, %d builds", network, err, len(eng.builds))
		}
	}
}

func TestPlanRefusesTheReservedContextName(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	commit := r.commit(map[string]string{
		".devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
		"Dockerfile":         "FROM x",
		contextDockerfile:    "x",
	})
	c, err := r.load(commit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlanImage(context.Background(), newFakeEngine(), Source{Git: r.g, Commit: commit}, c, ImageOptions{}); err == nil || !strings.Contains(err.Error(), contextDockerfile) {
		t.Errorf("error %v", err)
	}
}
