package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// WarmRepository is the image repository warm images are tagged in:
// git-sandbox-warm:<repository name>-<12 hex digits of the key>.
const WarmRepository = "git-sandbox-warm"

// Labels of a warm image (besides those it inherits from its base).
const (
	// LabelWarm marks a warm image.
	LabelWarm = "git-sandbox.warm"
	// LabelWarmRepo is the repository id it was made for.
	LabelWarmRepo = "git-sandbox.warm.repo"
	// LabelWarmKey is the full hash of what it was made from (WarmInputs).
	LabelWarmKey = "git-sandbox.warm.key"
	// LabelWarmBase is the id of the image it was made on (its parent).
	LabelWarmBase = "git-sandbox.warm.base"
	// LabelWarmFrom and LabelWarmWorkspace are set when setup wrote into
	// /workspace: the tree it started from and the tree it left. A warm
	// start from the same tree writes the difference into its worktree;
	// from another tree, setup runs again.
	LabelWarmFrom      = "git-sandbox.warm.from"
	LabelWarmWorkspace = "git-sandbox.warm.workspace"
)

// warmFormat changes when what goes into the key, or how a warm image is
// made, changes: every warm image is then made again.
const warmFormat = "git-sandbox-warm/1"

// RoleSetup is the role of the container a warm image is made in.
const RoleSetup = "setup"

// warmEngine is what keeping setup's result as an image needs of the
// engine beyond Engine; an engine without it runs setup every time.
type warmEngine interface {
	InspectImage(ctx context.Context, ref string) (container.ImageInfo, bool, error)
	CommitContainer(ctx context.Context, id string, o container.CommitOptions) (string, error)
}

// WarmInputs are everything a warm image is made from; their hash is its
// key.
type WarmInputs struct {
	Format string `json:"format"`
	// Repo is the repository id: warm images are never shared between
	// repositories.
	Repo string `json:"repo"`
	// BaseImage is the id of the image setup ran in.
	BaseImage string `json:"base_image"`
	Setup     string `json:"setup"`
	// Agent names the home that was mounted while setup ran; User the
	// uid:gid it ran as (the owner of what it made).
	Agent string `json:"agent"`
	User  string `json:"user"`
	// Inputs are the setup_inputs as the commit the sandbox starts from
	// holds them.
	Inputs []WarmInput `json:"inputs"`
}

// WarmInput is one setup input: its path and, when the commit has it, its
// mode and object id (a blob's id is a hash of its contents, a tree's of
// every file in it).
type WarmInput struct {
	Path   string `json:"path"`
	Mode   string `json:"mode,omitempty"`
	Object string `json:"object,omitempty"`
}

// Hash is the SHA-256 of the inputs' JSON.
func (in WarmInputs) Hash() string {
	b, _ := json.Marshal(in) // strings and a slice of strings: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// warmStart is what start does about setup for a sandbox that has one.
type warmStart struct {
	eng    warmEngine
	inputs WarmInputs
	key    string
	tag    string
	base   container.ImageInfo
	// found: the warm image of this key fits, setup is skipped.
	found   bool
	created time.Time
	// replay is set when the warm image's setup wrote into /workspace:
	// the trees to write into the new worktree (from, to).
	replay [2]string
}

// planWarm works out the warm image of a new sandbox whose baseline was
// just taken: its key from the image setup runs in, the setup command, the
// agent's home and the setup_inputs read from the baseline commit (in the
// user's object store, never from a worktree), and whether an image of
// that key exists and fits. It returns nil when the engine cannot keep
// images.
func (e *Env) planWarm(ctx context.Context, d Engine, spec *container.Spec, baseline *rescue.Taken, setup, agentName string) (*warmStart, error) {
	we, ok := d.(warmEngine)
	if !ok {
		return nil, nil
	}
	base, ok, err := we.InspectImage(ctx, spec.Image)
	if err != nil || !ok {
		return nil, err // a missing image: create says so
	}
	inputs, err := e.readSetupInputs(ctx, baseline.ID, e.Config.SetupInputs)
	if err != nil {
		return nil, err
	}
	w := &warmStart{eng: we, base: base, inputs: WarmInputs{
		Format: warmFormat, Repo: e.Repo.ID, BaseImage: base.ID, Setup: setup,
		Agent: agentName, User: spec.User, Inputs: inputs,
	}}
	w.key = w.inputs.Hash()
	w.tag = devcontainer.Tag(WarmRepository, e.Repo.Name, w.key)
	img, ok, err := we.InspectImage(ctx, w.tag)
	if err != nil {
		return nil, err
	}
	if !ok || img.Labels[LabelWarmKey] != w.key {
		return w, nil
	}
	w.created = img.Created
	if to := img.Labels[LabelWarmWorkspace]; to != "" {
		from := img.Labels[LabelWarmFrom]
		if from != baseline.Tree {
			e.UI.Infof("setup runs again: when it made %s it wrote into /workspace, and this sandbox starts from other files", w.tag)
			return w, nil
		}
		if _, err := e.Git().RevParse(ctx, to+"^{tree}"); err != nil {
			e.UI.Infof("setup runs again: what it wrote into /workspace for %s is no longer in the repository", w.tag)
			return w, nil
		}
		w.replay = [2]string{from, to}
	}
	w.found = true
	return w, nil
}

// readSetupInputs reads each setup input's mode and object id from commit
// with one ls-tree of the user's object store; a path the commit does not
// have is recorded as missing.
func (e *Env) readSetupInputs(ctx context.Context, commit string, paths []string) ([]WarmInput, error) {
	out := make([]WarmInput, len(paths))
	for i, p := range paths {
		out[i].Path = p
	}
	if len(paths) == 0 {
		return out, nil
	}
	args := append([]string{"ls-tree", "-z", "--full-tree", commit, "--"}, paths...)
	raw, err := e.Git().Run(ctx, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("read setup_inputs: %w", err)
	}
	found := map[string][2]string{}
	for _, entry := range bytes.Split(raw, []byte{0}) {
		meta, name, ok := strings.Cut(string(entry), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		found[name] = [2]string{f[0], f[2]}
	}
	for i := range out {
		if m, ok := found[out[i].Path]; ok {
			out[i].Mode, out[i].Object = m[0], m[1]
		}
	}
	return out, nil
}

// holdArgv keeps a setup container running, doing nothing, until it is
// stopped; setup itself runs through exec, so its environment never
// enters the container's configuration (which a commit would keep).
var holdArgv = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}

// setupWarm runs setup for a new sandbox in a container of its own, made
// like the sandbox's (image, user, mounts, network, limits, hardening) but
// with nothing of the sandbox's in its configuration: no environment, no
// labels beyond the managed ones, no ports. Setup runs in it through exec
// with the sandbox's environment. Then the container is stopped, the
// worktree snapshotted (what setup wrote into /workspace is the baseline),
// and its file system outside /workspace, the home and every other mount
// is committed as the warm image. The container is removed whatever
// happens; a made image is kept for the next sandbox even when this start
// fails later.
func (e *Env) setupWarm(ctx context.Context, d Engine, spec *container.Spec, w *warmStart, sb *Sandbox, io IO) error {
	if err := checkWarmMounts(spec); err != nil {
		return err
	}
	s := spec.Clone()
	s.Name = spec.Name + "-setup"
	s.Argv = append([]string(nil), holdArgv...)
	s.Env = nil
	s.TTY, s.OpenStdin, s.StdinOnce = false, false, false
	s.Ports = nil
	s.AutoRemove = false
	s.Labels = map[string]string{
		container.LabelManaged: "1",
		container.LabelRepo:    e.Repo.ID,
		container.LabelBranch:  sb.Branch,
		container.LabelRole:    RoleSetup,
	}
	id, err := d.Create(ctx, s)
	if err != nil {
		return fmt.Errorf("setup container: %w", err)
	}
	defer func() { _ = d.Remove(context.WithoutCancel(ctx), id) }()
	if err := d.Start(ctx, id); err != nil {
		return fmt.Errorf("setup container: %w", err)
	}
	e.UI.Infof("running setup in %s", sb.Display())
	// The repository chose the setup command, so its output is escaped
	// like the agent's logs.
	out := termsafe.NewWriter(io.Stderr)
	code, err := d.Exec(ctx, id, container.ExecOptions{
		Argv:    []string{"/bin/sh", "-c", setupScript, "git-sandbox-setup"},
		User:    spec.User,
		WorkDir: container.Workspace,
		Env:     spec.Env,
		Streams: container.Streams{Stdout: out, Stderr: out},
	})
	_ = out.Flush()
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if code != 0 {
		return usererr.New("setup failed with exit code %d; the sandbox was not created", code).
			Hint("fix the setup command (in %s or your config) and start again", config.RepoFile)
	}
	if err := d.Stop(ctx, id, 10*time.Second); err != nil {
		return fmt.Errorf("stop the setup container: %w", err)
	}
	from := sb.Baseline
	taken, err := sb.Snapshotter().Take(ctx, rescue.ReasonSetup)
	if err != nil {
		return err
	}
	labels := map[string]string{
		container.LabelManaged: "1",
		container.LabelRole:    "",
		container.LabelBranch:  "",
		LabelWarm:              "1",
		LabelWarmRepo:          e.Repo.ID,
		LabelWarmKey:           w.key,
		LabelWarmBase:          w.base.ID,
	}
	if taken.New {
		if err := sb.Update(func(r *record.Record) error { r.Baseline = taken.ID; return nil }); err != nil {
			return err
		}
		start, err := rescue.Read(ctx, e.Git(), from)
		if err != nil {
			return err
		}
		labels[LabelWarmFrom], labels[LabelWarmWorkspace] = start.Tree, taken.Tree
	}
	cmd := w.base.Cmd
	if len(cmd) == 0 {
		cmd = []string{"/bin/sh"}
	}
	step := e.UI.Step("keeping what setup installed as image %s", w.tag)
	if _, err := w.eng.CommitContainer(ctx, id, container.CommitOptions{Tag: w.tag, Labels: labels, Cmd: cmd}); err != nil {
		step.Fail()
		return usererr.Wrap(err, "keep setup's result as image %s: %v", w.tag, err).
			Hint("docker system df shows the space images take; git sandbox image prune removes this repository's old ones")
	}
	step.Done("kept %s: the next sandbox with the same image, setup and setup_inputs skips setup", w.tag)
	return nil
}

// checkWarmMounts refuses to make a warm image of a container whose
// secrets would not all be mounts: the agent's home (logins, settings)
// must be, and so is everything else of the host. A commit leaves mounts
// out.
func checkWarmMounts(spec *container.Spec) error {
	for _, m := range spec.Mounts {
		if m.Target == container.Home {
			return nil
		}
	}
	return fmt.Errorf("keep setup's result: the agent's home is not a mount, so its files would be in the image")
}

// withoutSetup turns a sandbox container spec whose setup is done (in its
// warm image) into one that runs the agent at once.
func withoutSetup(spec *container.Spec, image string) {
	spec.Image = image
	if a := spec.Argv; len(a) >= 4 && a[0] == "/bin/sh" && a[1] == "-c" && a[2] == setupScript {
		spec.Argv = append([]string(nil), a[4:]...)
	}
	env := spec.Env[:0:0]
	for _, kv := range spec.Env {
		if !strings.HasPrefix(kv, "GIT_SANDBOX_SETUP=") {
			env = append(env, kv)
		}
	}
	spec.Env = env
}

// StaleWarmImages are the warm images prune removes: every one but the
// newest (a repository's newest warm image is the one its next start most
// likely needs).
func StaleWarmImages(imgs []container.Image) []container.Image {
	if len(imgs) < 2 {
		return nil
	}
	sorted := slices.Clone(imgs)
	slices.SortStableFunc(sorted, func(a, b container.Image) int { return b.Created.Compare(a.Created) })
	return sorted[1:]
}
