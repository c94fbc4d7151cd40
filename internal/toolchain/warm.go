package toolchain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
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
const warmFormat = "git-sandbox-warm/2"

// RoleSetup is the role of the container a warm image is made in.
const RoleSetup = "setup"

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

// Warm is what start does about setup for a sandbox that has one.
type Warm struct {
	eng    container.Images
	inputs WarmInputs
	key    string
	// Tag is the warm image.
	Tag  string
	base container.ImageInfo
	// Found: the warm image of this key fits, setup is skipped.
	Found   bool
	Created time.Time
	// Replay is set when the warm image's setup wrote into /workspace:
	// the trees to write into the new worktree (from, to).
	Replay [2]string
}

// PlanWarm works out the warm image of a new sandbox whose baseline was
// just taken: its key from the image setup runs in, the setup command, the
// agent's home and the setup_inputs read from the baseline commit (in the
// user's object store, never from a worktree), and whether an image of
// that key exists and fits. It returns nil when the engine cannot keep
// images (its Abilities say so; it then runs setup every time).
func (e *Env) PlanWarm(ctx context.Context, d container.Engine, spec *container.Spec, baseline *rescue.Taken, setup, agentName string) (*Warm, error) {
	if !d.Abilities().CommitImages {
		return nil, nil
	}
	we := d.Images()
	base, ok, err := we.Inspect(ctx, spec.Image)
	if err != nil || !ok {
		return nil, err // a missing image: create says so
	}
	inputs, err := e.readSetupInputs(ctx, baseline.ID, e.Config.SetupInputs)
	if err != nil {
		return nil, err
	}
	w := &Warm{eng: we, base: base, inputs: WarmInputs{
		Format: warmFormat, Repo: e.Repo.ID, BaseImage: base.ID, Setup: setup,
		Agent: agentName, User: spec.User, Inputs: inputs,
	}}
	w.key = w.inputs.Hash()
	w.Tag = devcontainer.Tag(WarmRepository, e.Repo.Name, w.key)
	img, ok, err := we.Inspect(ctx, w.Tag)
	if err != nil {
		return nil, err
	}
	if !ok || img.Labels[LabelWarmKey] != w.key {
		return w, nil
	}
	w.Created = img.Created
	if to := img.Labels[LabelWarmWorkspace]; to != "" {
		from := img.Labels[LabelWarmFrom]
		if from != baseline.Tree {
			e.UI.Infof("setup runs again: when it made %s it wrote into /workspace, and this sandbox starts from other files", w.Tag)
			return w, nil
		}
		if _, err := e.Repo.Git().RevParse(ctx, to+"^{tree}"); err != nil {
			e.UI.Infof("setup runs again: what it wrote into /workspace for %s is no longer in the repository", w.Tag)
			return w, nil
		}
		w.Replay = [2]string{from, to}
	}
	w.Found = true
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
	raw, err := e.Repo.Git().Run(ctx, nil, args...)
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

// SetupWarm runs setup for a new sandbox in a container of its own, made
// like the sandbox's (image, user, mounts, network, limits, hardening) but
// with nothing of the sandbox's in its configuration: no environment, no
// labels beyond the managed ones, no ports. Setup runs in it through exec
// with the sandbox's environment. Then the container is stopped, the
// worktree snapshotted (what setup wrote into /workspace is the baseline),
// and its file system outside /workspace, the home and every other mount
// is committed as the warm image. The container is removed whatever
// happens; a made image is kept for the next sandbox even when this start
// fails later.
func (e *Env) SetupWarm(ctx context.Context, d container.Engine, spec *container.Spec, w *Warm, o WarmRun) error {
	if err := checkWarmMounts(spec); err != nil {
		return err
	}
	id, err := e.setupContainer(ctx, d, spec, o.Branch)
	if err != nil {
		return err
	}
	defer func() { _ = d.Remove(context.WithoutCancel(ctx), id) }()
	if err := e.execSetup(ctx, d, id, spec, o); err != nil {
		return err
	}
	if err := keepHome(ctx, d, id, spec); err != nil {
		return err
	}
	if err := d.Stop(ctx, id, 10*time.Second); err != nil {
		return fmt.Errorf("stop the setup container: %w", err)
	}
	from, to, err := o.Snapshot(ctx)
	if err != nil {
		return err
	}
	return e.keepWarm(ctx, id, w, from, to)
}

// WarmRun is one run of setup into a warm image.
type WarmRun struct {
	// Branch is the sandbox's branch; Display its name for messages.
	Branch, Display string
	// Out receives setup's output.
	Out io.Writer
	// Snapshot takes the snapshot of what setup left in the worktree
	// (the sandbox's new baseline) and returns the trees before and after
	// setup when it wrote there ("" when it did not).
	Snapshot func(ctx context.Context) (from, to string, err error)
}

// setupContainer creates and starts a container made like the sandbox's,
// with nothing of the sandbox's in its configuration, running nothing.
func (e *Env) setupContainer(ctx context.Context, d container.Engine, spec *container.Spec, branch string) (string, error) {
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
		container.LabelBranch:  branch,
		container.LabelRole:    RoleSetup,
	}
	id, err := d.Create(ctx, s)
	if err != nil {
		return "", fmt.Errorf("setup container: %w", err)
	}
	if err := d.Start(ctx, id); err != nil {
		_ = d.Remove(context.WithoutCancel(ctx), id)
		return "", fmt.Errorf("setup container: %w", err)
	}
	return id, nil
}

// execSetup runs setup in the container with the sandbox's environment.
func (e *Env) execSetup(ctx context.Context, d container.Engine, id string, spec *container.Spec, o WarmRun) error {
	e.UI.Infof("running setup in %s", o.Display)
	// The repository chose the setup command, so its output is escaped
	// like the agent's logs.
	out := termsafe.NewWriter(o.Out)
	code, err := d.Exec(ctx, id, container.ExecOptions{
		Argv:    []string{"/bin/sh", "-c", SetupScript, "git-sandbox-setup"},
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
	return nil
}

// keepWarm commits the stopped setup container as the warm image: its
// file system outside /workspace, the home and every other mount.
func (e *Env) keepWarm(ctx context.Context, id string, w *Warm, from, to string) error {
	labels := map[string]string{
		container.LabelManaged: "1",
		container.LabelRole:    "",
		container.LabelBranch:  "",
		LabelWarm:              "1",
		LabelWarmRepo:          e.Repo.ID,
		LabelWarmKey:           w.key,
		LabelWarmBase:          w.base.ID,
	}
	if to != "" {
		labels[LabelWarmFrom], labels[LabelWarmWorkspace] = from, to
	}
	cmd := w.base.Cmd
	if len(cmd) == 0 {
		cmd = []string{"/bin/sh"}
	}
	step := e.UI.Step("keeping what setup installed as image %s", w.Tag)
	if _, err := w.eng.Commit(ctx, id, container.CommitOptions{Tag: w.Tag, Labels: labels, Cmd: cmd}); err != nil {
		step.Fail()
		return usererr.Wrap(err, "keep setup's result as image %s: %v", w.Tag, err).
			Hint("docker system df shows the space images take; git sandbox image prune removes this repository's old ones")
	}
	step.Done("kept %s: the next sandbox with the same image, setup and setup_inputs skips setup", w.Tag)
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

// homeLayer is where a warm image keeps what setup wrote under the home
// (a mount, which the image leaves out), and homeLayerDone the mark, in
// the container's own file system, that its first start copied it in.
const (
	homeLayer     = "/var/tmp/.git-sandbox-setup-home"
	homeLayerDone = "/var/tmp/.git-sandbox-setup-home-copied"
)

// keepHomeScript copies what setup wrote under the home into homeLayer, so
// the commit keeps it. Setup never sees the agent's login (it comes in
// after setup), so none is there. Mounts under the home (cache volumes)
// are left out, as the commit leaves them out elsewhere: each directory
// that holds one is copied entry by entry, every other entry whole.
func keepHomeScript(mounts []container.Mount) string {
	var out, skip []string
	walk := map[string]bool{"": true}
	for _, m := range mounts {
		rel, ok := strings.CutPrefix(path.Clean(m.Target), container.Home+"/")
		if !ok {
			continue
		}
		skip = append(skip, rel)
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			walk[d] = true
		}
	}
	dirs := slices.Sorted(maps.Keys(walk))
	skip = append(skip, dirs[1:]...)
	cases := "''"
	for _, p := range skip {
		cases += "|" + shellQuote(p)
	}
	out = append(out, "set -e", "H="+container.Home+" S="+homeLayer, `rm -rf "$S"`)
	for _, d := range dirs {
		sub := ""
		if d != "" {
			sub = "/" + shellQuote(d)
		}
		out = append(out, `mkdir -p "$S"`+sub,
			`for f in "$H"`+sub+`/* "$H"`+sub+`/.[!.]* "$H"`+sub+`/..?*; do`,
			`  [ -e "$f" ] || [ -L "$f" ] || continue`,
			`  case "${f#"$H"/}" in `+cases+`) continue;; esac`,
			`  cp -a "$f" "$S"`+sub+`/`,
			`done`)
	}
	return strings.Join(out, "\n")
}

// shellQuote quotes s for a POSIX shell, literally (in a case pattern too).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// HomeLayerScript runs the agent ("$@") of a container made from a warm
// image, once its first start has copied what setup wrote under the home
// into the sandbox's home, never over a file already there (the agent's
// login, or what the sandbox's own setup wrote).
const HomeLayerScript = `if [ -d ` + homeLayer + ` ] && [ ! -e ` + homeLayerDone + ` ]; then
  cp -a -n ` + homeLayer + `/. ` + container.Home + `/ || echo "git sandbox: warning: not all that setup wrote in the home was copied in" >&2
  : > ` + homeLayerDone + `
fi
exec "$@"`

// keepHome runs keepHomeScript in the setup container, as setup ran.
func keepHome(ctx context.Context, d container.Engine, id string, spec *container.Spec) error {
	var out bytes.Buffer
	code, err := d.Exec(ctx, id, container.ExecOptions{
		Argv:    []string{"/bin/sh", "-c", keepHomeScript(spec.Mounts)},
		User:    spec.User,
		WorkDir: container.Workspace,
		Streams: container.Streams{Stdout: &out, Stderr: &out},
	})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit code %d: %s", code, termsafe.String(strings.TrimSpace(out.String())))
	}
	if err != nil {
		return fmt.Errorf("keep what setup wrote in the home: %w", err)
	}
	return nil
}

// WithoutSetup turns a sandbox container spec whose setup is done (in its
// warm image) into one that runs the agent at once, after the first start
// copied in what setup wrote under the home.
func WithoutSetup(spec *container.Spec, image string) {
	spec.Image = image
	if a := spec.Argv; len(a) >= 4 && a[0] == "/bin/sh" && a[1] == "-c" && a[2] == SetupScript {
		spec.Argv = append([]string{"/bin/sh", "-c", HomeLayerScript, "git-sandbox-home"}, a[4:]...)
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
