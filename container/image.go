package container

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

//go:embed image/Dockerfile
var dockerfile []byte

// LabelImage marks images built by git sandbox.
const LabelImage = "git-sandbox.image"

// BuildOptions describe an image build.
type BuildOptions struct {
	Tag  string
	Base string
	// Agents maps agent names to the npm packages of their CLIs: the build
	// tries to install each (with a time limit) and records the names of
	// those it could in /etc/git-sandbox-agents (see ImageAgents).
	Agents map[string]string
	// NoAgents skips the agent CLIs whatever Agents holds.
	NoAgents bool
	NoCache  bool
	// Progress receives the build's output; TerminalFd/IsTerminal let it
	// redraw progress lines in place.
	Progress   io.Writer
	TerminalFd uintptr
	IsTerminal bool
}

// ImageExists reports whether an image is present locally.
func (d *Docker) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := d.api.ImageInspect(ctx, ref)
	err = sdkErr(err)
	if err == nil {
		return true, nil
	}
	if IsNotFound(err) {
		return false, nil
	}
	return false, fmt.Errorf("inspect image %s: %w", ref, err)
}

// Build builds the default image from the embedded Dockerfile. It never
// pulls a base that is present locally, so it works offline from a local
// base image.
func (d *Docker) Build(ctx context.Context, o BuildOptions) error {
	haveBase, err := d.ImageExists(ctx, o.Base)
	if err != nil {
		return err
	}
	var agents []string
	if !o.NoAgents {
		for _, name := range slices.Sorted(maps.Keys(o.Agents)) {
			agents = append(agents, name+"="+o.Agents[name])
		}
	}
	// Through BuildContext: on a terminal the engine's progress is drawn in
	// place; otherwise one line per step (and the last lines of a failure).
	_, err = d.BuildContext(ctx, ContextBuild{
		Context:    DockerfileContext(dockerfile),
		Dockerfile: "Dockerfile",
		Tags:       []string{o.Tag},
		Args:       map[string]string{"BASE": o.Base, "AGENT_PACKAGES": strings.Join(agents, " ")},
		Labels:     map[string]string{LabelImage: "1", LabelImage + ".base": o.Base},
		NoCache:    o.NoCache,
		Progress:   o.Progress,
		TerminalFd: o.TerminalFd,
		IsTerminal: o.IsTerminal,
	})
	if err != nil {
		return d.buildError(o, haveBase, err)
	}
	return d.labelAgents(ctx, o)
}

// labelAgents stamps LabelAgents on a freshly built image: which agent CLIs
// it has is known only once its build ran, so the list is read from the
// image and a label-only image of the same tag is built on top (its parent
// goes with it). Later checks are then an inspect, not a container run.
func (d *Docker) labelAgents(ctx context.Context, o BuildOptions) error {
	info, ok, err := d.InspectImage(ctx, o.Tag)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("image %s vanished right after it was built", o.Tag)
	}
	have, err := d.ProbeAgents(ctx, o.Tag)
	if err != nil {
		return err
	}
	labels := maps.Clone(info.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelImage] = "1"
	labels[LabelImage+".base"] = o.Base
	labels[LabelAgents] = strings.Join(have, ",")
	_, err = d.BuildContext(ctx, ContextBuild{
		Context:    DockerfileContext([]byte("FROM " + info.ID + "\n")),
		Dockerfile: "Dockerfile",
		Tags:       []string{o.Tag},
		Labels:     labels,
		Progress:   io.Discard,
	})
	if err != nil {
		return fmt.Errorf("label %s with its agent CLIs: %w", o.Tag, err)
	}
	return nil
}

func (d *Docker) buildError(o BuildOptions, haveBase bool, err error) error {
	cause := err.Error()
	if ue, ok := usererr.As(err); ok {
		cause = strings.TrimPrefix(ue.Msg, "image build failed: ")
	}
	if !haveBase {
		return usererr.Wrap(err, "base image %s is not present locally and could not be pulled: %s", o.Base, cause).
			Hint("build from an image you have: git sandbox image build --base IMAGE (docker images lists them)")
	}
	return usererr.Wrap(err, "image build failed: %s", cause).
		Hint("the output above shows the failing step; rerun with --no-cache after fixing it")
}

func errImageMissing(image string, isDefault bool) error {
	e := usererr.New("image %s is not present", image)
	if isDefault {
		return e.Hint("build it with: git sandbox image build (add --base IMAGE to build offline from a local image)")
	}
	return e.Hint("build or pull %s, or use the default image (git sandbox image build) by removing the image setting", image)
}

// ErrImageMissing is the error for a missing image; isDefault says whether
// it is the image git sandbox builds itself.
func ErrImageMissing(image string, isDefault bool) error { return errImageMissing(image, isDefault) }

// ImageAgents lists the agent CLIs the image says it has installed: the
// LabelAgents label when the image carries it (an inspect), else the list
// the build wrote to /etc/git-sandbox-agents, read by a throwaway,
// hardened, network-less container of it (images built before the label).
func (d *Docker) ImageAgents(ctx context.Context, image string) ([]string, error) {
	info, ok, err := d.InspectImage(ctx, image)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errImageMissing(image, false)
	}
	if v, labelled := info.Labels[LabelAgents]; labelled {
		return SplitAgents(v), nil
	}
	return d.ProbeAgents(ctx, image)
}

// SplitAgents reads a LabelAgents value.
func SplitAgents(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// ProbeAgents reads the list of agent CLIs the build wrote to
// /etc/git-sandbox-agents, whatever labels the image inherited.
func (d *Docker) ProbeAgents(ctx context.Context, image string) ([]string, error) {
	spec := &Spec{
		Name:    "",
		Image:   image,
		Argv:    []string{"cat", "/etc/git-sandbox-agents"},
		User:    "65534:65534",
		Network: NetworkNone,
		Limits:  Limits{Pids: 16, MemoryBytes: 64 << 20},
		Labels:  map[string]string{LabelManaged: "1", LabelRole: "probe"},
	}
	spec.Harden()
	id, err := d.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer d.Remove(context.WithoutCancel(ctx), id)
	waitC := d.WaitExit(ctx, id, WaitNextExit)
	if err := d.Start(ctx, id); err != nil {
		return nil, err
	}
	if res := <-waitC; res.Err != nil || res.Code != 0 {
		return nil, fmt.Errorf("read the image's agent list: exit %d %v", res.Code, res.Err)
	}
	var out bytes.Buffer
	if err := d.Logs(ctx, id, LogsOptions{Tail: "all", Stdout: &out}); err != nil {
		return nil, err
	}
	return strings.Fields(out.String()), nil
}
