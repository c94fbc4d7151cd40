package devcontainer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// DefaultRepository is the image repository devcontainer images are tagged
// in: git-sandbox-dev:<repository name>-<hash>.
const DefaultRepository = "git-sandbox-dev"

// Labels stamped on a devcontainer image, besides container.LabelImage,
// its ".base" and container.LabelAgents.
const (
	// LabelDevcontainer is the file the image was built from.
	LabelDevcontainer = "git-sandbox.devcontainer"
	// LabelHash is the full hash of everything it was built from.
	LabelHash = "git-sandbox.devcontainer.hash"
	// LabelRepo is the repository id (worktree.Repo.ID) it was built for.
	LabelRepo = "git-sandbox.devcontainer.repo"
)

// hashFormat changes when what goes into the hash, or how the image is
// built from it, changes: every image is then built again.
const hashFormat = "git-sandbox-devcontainer/2"

// Engine is what building a devcontainer image needs of the container
// engine's images: the part of container.Images an engine whose Abilities
// say BuildImages has.
type Engine interface {
	Inspect(ctx context.Context, ref string) (container.ImageInfo, bool, error)
	BuildContext(ctx context.Context, o container.ContextBuild) (string, error)
	Agents(ctx context.Context, image string) ([]string, error)
	ProbeAgents(ctx context.Context, image string) ([]string, error)
}

// ImageOptions say how a devcontainer image is named and built.
type ImageOptions struct {
	// Repository is the image repository; DefaultRepository when empty.
	Repository string
	// RepoName is the repository's name, the readable part of the tag.
	RepoName string
	// RepoID is stamped in LabelRepo.
	RepoID string
	// NoAgents skips trying to install the claude and codex CLIs.
	NoAgents bool
}

// Inputs are everything a devcontainer image is built from; their hash
// names it.
type Inputs struct {
	Format string `json:"format"`
	// Version is git sandbox's version, Layer the SHA-256 of its layer's
	// Dockerfile, Agents the agent CLIs its layer tries to install
	// (name=npm-package pairs, "" for none).
	Version string `json:"version"`
	Layer   string `json:"layer"`
	Agents  string `json:"agents"`
	// BaseImageID is the named image's id (image).
	BaseImageID string `json:"base_image_id,omitempty"`
	// Dockerfile is the SHA-256 of the repository's Dockerfile, Context the
	// hash of the build context's files after .dockerignore (build).
	Dockerfile string            `json:"dockerfile,omitempty"`
	Context    string            `json:"context,omitempty"`
	Args       map[string]string `json:"args,omitempty"`
	Target     string            `json:"target,omitempty"`
}

// Hash is the SHA-256 of the inputs' canonical JSON (encoding/json sorts
// map keys).
func (in Inputs) Hash() string {
	b, _ := json.Marshal(in) // plain strings and a map of strings: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Plan is a devcontainer image: what it is built from and its tag.
type Plan struct {
	Tag  string `json:"tag"`
	Hash string `json:"hash"`
	// Base is the named image, or the repository's Dockerfile path.
	Base   string `json:"base"`
	Inputs Inputs `json:"inputs"`

	cfg        *Config
	opts       ImageOptions
	baseID     string
	dockerfile []byte
	files      []contextFile
}

var tagUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// agentPackages is the layer's AGENT_PACKAGES argument: name=package pairs
// of the agent CLIs to try, sorted, or "" for none.
func agentPackages(none bool) string {
	if none {
		return ""
	}
	pkgs := agent.Packages()
	var out []string
	for _, n := range slices.Sorted(maps.Keys(pkgs)) {
		out = append(out, n+"="+pkgs[n])
	}
	return strings.Join(out, " ")
}

// Tag returns repository:<name>-<first 12 hex digits of hash>, the name
// made valid for a Docker tag.
func Tag(repository, name, hash string) string {
	if repository == "" {
		repository = DefaultRepository
	}
	n := strings.Trim(tagUnsafe.ReplaceAllString(name, "-"), "-.")
	if len(n) > 40 {
		n = strings.Trim(n[:40], "-.")
	}
	if n == "" {
		n = "repo"
	}
	return repository + ":" + n + "-" + hash[:12]
}

// PlanImage works out what the image of cfg is built from and its tag,
// without building anything: for a named image, its local id (it is never
// pulled); for a build, the Dockerfile and the build context's files as
// committed, after .dockerignore.
func PlanImage(ctx context.Context, eng Engine, src Source, cfg *Config, o ImageOptions) (*Plan, error) {
	if !cfg.HasBase() {
		return nil, fmt.Errorf("%s names no image and no build", cfg.Path)
	}
	layer := sha256.Sum256(container.LayerDockerfile())
	p := &Plan{cfg: cfg, opts: o, Inputs: Inputs{
		Format:  hashFormat,
		Version: version.Version,
		Layer:   hex.EncodeToString(layer[:]),
		Agents:  agentPackages(o.NoAgents),
	}}
	if cfg.Image != "" {
		info, ok, err := eng.Inspect(ctx, cfg.Image)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, usererr.New("image %s, which %s names, is not present locally", termsafe.String(cfg.Image), cfg.Path).
				Hint("pull it (docker pull %s), or pick an image with --image", termsafe.String(cfg.Image))
		}
		p.Base, p.baseID, p.Inputs.BaseImageID = cfg.Image, info.ID, info.ID
	} else {
		t, err := openTree(ctx, src.Git, src.Commit)
		if err != nil {
			return nil, err
		}
		b := cfg.Build
		if p.dockerfile, err = t.blob(ctx, b.DockerfileBlob, maxFileSize); err != nil {
			return nil, usererr.Wrap(err, "%s: %s: %v", cfg.Path, b.Dockerfile, err)
		}
		if p.files, err = t.contextFiles(ctx, b); err != nil {
			return nil, usererr.Wrap(err, "%s: build context %s: %v", cfg.Path, b.Context, err)
		}
		docker := sha256.Sum256(p.dockerfile)
		p.Base = b.Dockerfile
		p.Inputs.Dockerfile = hex.EncodeToString(docker[:])
		p.Inputs.Context = contextDigest(p.files)
		p.Inputs.Args = b.Args
		p.Inputs.Target = b.Target
	}
	p.Hash = p.Inputs.Hash()
	p.Tag = Tag(o.Repository, o.RepoName, p.Hash)
	return p, nil
}

// ImageChoices lists every image the devcontainer names: its image, or
// every image its Dockerfile names (ScanDockerfile: each FROM, COPY --from
// and RUN --mount from= naming an image, ONBUILD's too), each with the
// file and line, for the user's image policy (config.Loaded.RefusedImages)
// to see before anything is built. It refuses a Dockerfile it cannot read
// as the engine would, and an ADD of a URL. features name no image here:
// git sandbox never fetches them (they are ignored, see ignoredKeys).
func (c *Config) ImageChoices(ctx context.Context, src Source) ([]config.ImageChoice, error) {
	if c.Build == nil {
		if c.Image == "" {
			return nil, nil
		}
		return []config.ImageChoice{{Image: c.Image, File: c.Path, Line: c.ImageLine, What: "image"}}, nil
	}
	t, err := openTree(ctx, src.Git, src.Commit)
	if err != nil {
		return nil, err
	}
	data, err := t.blob(ctx, c.Build.DockerfileBlob, maxFileSize)
	if err != nil {
		return nil, usererr.Wrap(err, "%s: %s: %v", c.Path, c.Build.Dockerfile, err)
	}
	return ScanDockerfile(c.Build.Dockerfile, data, c.Build.Args)
}

// BuildOptions say where a build's progress goes and which network it
// runs on.
type BuildOptions struct {
	// Network is the network every step of the build runs on: "none", or
	// the name of the sandbox's own network (its internal network, where
	// only its egress proxy answers, or its open network). It must be
	// given: a repository's build never runs on the engine's default
	// bridge, from where this machine's ports answer.
	Network string
	// ProxyArgs are build arguments pointing the build's tools at the
	// sandbox's egress proxy (HTTP_PROXY and the like, which the engine
	// passes without an ARG); they win over the file's build.args.
	ProxyArgs map[string]string
	// Out receives git sandbox's lines and the build's progress.
	Out io.Writer
	// IsTerminal and TerminalFd: Out is a terminal, where progress is
	// redrawn in place; otherwise only step lines are written.
	IsTerminal bool
	TerminalFd uintptr
}

// Image is a devcontainer image ready to run.
type Image struct {
	Tag string
	ID  string
	// Agents are the agent CLIs it has.
	Agents []string
	// Env is its environment, for Config.Environ.
	Env []string
	// Built is false when an image with the tag existed and was reused.
	Built bool
}

// Existing returns the image of the plan when an image has its tag (ok),
// without building anything.
func Existing(ctx context.Context, eng Engine, p *Plan) (img *Image, ok bool, err error) {
	info, ok, err := eng.Inspect(ctx, p.Tag)
	if err != nil || !ok {
		return nil, false, err
	}
	img = &Image{Tag: p.Tag, ID: info.ID, Env: info.Env}
	if v, labelled := info.Labels[container.LabelAgents]; labelled {
		img.Agents = container.SplitAgents(v)
	} else if img.Agents, err = eng.Agents(ctx, p.Tag); err != nil {
		return nil, false, err
	}
	return img, true, nil
}

// EnsureImage returns the image of the plan, building it only when no image
// has its tag: first the base (the repository's Dockerfile, with its build
// context streamed from the commit), then git sandbox's layer on top (git,
// the agent CLIs when the npm registry can be reached, /home/sandbox and
// /workspace), then the labels that record what it was built from and which
// agent CLIs it has. Only the result is tagged; the steps before it are its
// parents and go with it. Every step runs on o.Network: the layer's steps
// run the base's programs (and its ONBUILD triggers) too.
func EnsureImage(ctx context.Context, eng Engine, src Source, p *Plan, o BuildOptions) (*Image, error) {
	if img, ok, err := Existing(ctx, eng, p); err != nil || ok {
		return img, err
	}
	switch o.Network {
	case "", "default", "bridge", "host":
		return nil, fmt.Errorf("the build of %s needs the sandbox's network, not %q", p.cfg.Path, o.Network)
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	b := &builder{eng: eng, src: src, p: p, o: o, out: out}
	fmt.Fprintf(out, "git sandbox: building image %s from %s\n", p.Tag, p.cfg.Path)
	base := p.baseID
	if p.cfg.Build != nil {
		id, err := b.base(ctx)
		if err != nil {
			return nil, err
		}
		base = id
	}
	layer, have, err := b.layer(ctx, base)
	if err != nil {
		return nil, err
	}
	return b.label(ctx, layer, have)
}

// builder runs the steps of one devcontainer image's build.
type builder struct {
	eng Engine
	src Source
	p   *Plan
	o   BuildOptions
	out io.Writer
}

// step is a build on the builder's network, with its progress shown.
func (b *builder) step(cb container.ContextBuild) container.ContextBuild {
	cb.Progress, cb.IsTerminal, cb.TerminalFd = b.out, b.o.IsTerminal, b.o.TerminalFd
	cb.Network = b.o.Network
	if len(b.o.ProxyArgs) > 0 {
		args := maps.Clone(cb.Args)
		if args == nil {
			args = map[string]string{}
		}
		maps.Copy(args, b.o.ProxyArgs)
		cb.Args = args
	}
	return cb
}

// base builds the repository's Dockerfile and returns the image's id.
func (b *builder) base(ctx context.Context) (string, error) {
	p, bd := b.p, b.p.cfg.Build
	fmt.Fprintf(b.out, "git sandbox: the base: %s (context %s)\n", termsafe.String(bd.Dockerfile), termsafe.String(bd.Context))
	t, err := openTree(ctx, b.src.Git, b.src.Commit)
	if err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := t.writeContext(ctx, pw, p.files, p.dockerfile)
		pw.CloseWithError(err)
		done <- err
	}()
	id, err := b.eng.BuildContext(ctx, b.step(container.ContextBuild{
		Context:    pr,
		Dockerfile: contextDockerfile,
		Args:       bd.Args,
		Target:     bd.Target,
	}))
	pr.CloseWithError(io.ErrClosedPipe)
	if cerr := <-done; cerr != nil && !errors.Is(cerr, io.ErrClosedPipe) {
		return "", fmt.Errorf("build context of %s: %w", p.cfg.Path, cerr)
	}
	if err != nil {
		return "", buildFailed(err, fmt.Sprintf("the base image of %s did not build", p.cfg.Path),
			fmt.Sprintf("the output above shows the failing step of %s; fix it and commit, or pick an image with --image", termsafe.String(bd.Dockerfile)))
	}
	return id, nil
}

// layer builds git sandbox's layer on base and reads which agent CLIs it
// has.
func (b *builder) layer(ctx context.Context, base string) (string, []string, error) {
	fmt.Fprintln(b.out, "git sandbox: git sandbox's layer (git, agent CLIs, /home/sandbox, /workspace)")
	layer, err := b.eng.BuildContext(ctx, b.step(container.ContextBuild{
		Context:    container.DockerfileContext(container.LayerDockerfile()),
		Dockerfile: "Dockerfile",
		Args:       map[string]string{"BASE": base, "AGENT_PACKAGES": agentPackages(b.p.opts.NoAgents)},
	}))
	if err != nil {
		return "", nil, buildFailed(err, fmt.Sprintf("git sandbox's layer did not build on the base of %s", b.p.cfg.Path),
			"the base needs git and bash, or apt-get to install them (through the sandbox's network); the output above says which step failed")
	}
	have, err := b.eng.ProbeAgents(ctx, layer)
	if err != nil {
		return "", nil, err
	}
	return layer, have, nil
}

// label tags the layer with the labels that say what it was built from.
func (b *builder) label(ctx context.Context, layer string, have []string) (*Image, error) {
	p := b.p
	labels := map[string]string{
		container.LabelImage:           "1",
		container.LabelImage + ".base": p.Base,
		container.LabelAgents:          strings.Join(have, ","),
		LabelDevcontainer:              p.cfg.Path,
		LabelHash:                      p.Hash,
	}
	if p.opts.RepoID != "" {
		labels[LabelRepo] = p.opts.RepoID
	}
	id, err := b.eng.BuildContext(ctx, container.ContextBuild{
		Context:    container.DockerfileContext([]byte("FROM " + layer + "\n")),
		Dockerfile: "Dockerfile",
		Tags:       []string{p.Tag},
		Labels:     labels,
		Network:    b.o.Network,
		Progress:   io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("label %s: %w", p.Tag, err)
	}
	info, ok, err := b.eng.Inspect(ctx, p.Tag)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("image %s vanished right after it was built", p.Tag)
	}
	agentsSaid := "none (only the shell agent works; claude and codex need their npm packages, which the build installs only where the sandbox's network lets it reach the npm registry)"
	if len(have) > 0 {
		agentsSaid = strings.Join(have, ", ")
	}
	fmt.Fprintf(b.out, "git sandbox: built %s; agent CLIs: %s\n", p.Tag, agentsSaid)
	return &Image{Tag: p.Tag, ID: id, Agents: have, Env: info.Env, Built: true}, nil
}

// buildFailed is a failed build step as the user sees it: the engine's
// message (a user error already) or msg, with hint.
func buildFailed(err error, msg, hint string) error {
	cause := err.Error()
	if ue, ok := usererr.As(err); ok {
		cause = strings.TrimPrefix(ue.Msg, "image build failed: ")
	}
	return usererr.Wrap(err, "%s: %s", msg, cause).Hint("%s", hint)
}
