package container

import (
	"archive/tar"
	"bytes"
	_ "embed"
	"io"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// dockerfile is git sandbox's own image layer: what the default image is
// built from, and what a devcontainer image gets on top of its base. It
// is a recipe any image builder reads, not a call of an engine's SDK, so
// it lives here with the rest of the vocabulary.
//
//go:embed image/Dockerfile
var dockerfile []byte

// LayerDockerfile returns git sandbox's own image layer: the Dockerfile the
// default image is built from, which takes its base as the build argument
// BASE and the agent CLIs to try as AGENT_PACKAGES.
func LayerDockerfile() []byte { return bytes.Clone(dockerfile) }

// LabelImage marks images built by git sandbox.
const LabelImage = "git-sandbox.image"

// LabelAgents is stamped on images whose builder knows which agent CLIs they
// hold: the names, comma-separated ("" for none). An inspect reads it, where
// Images.Agents has to run a container.
const LabelAgents = "git-sandbox.agents"

// BuildOptions describe a build of the default image.
type BuildOptions struct {
	Tag  string
	Base string
	// Agents maps agent names to the npm packages of their CLIs: the build
	// tries to install each (with a time limit) and records the names of
	// those it could in /etc/git-sandbox-agents (see Images.Agents).
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

// ImageInfo is what git sandbox reads of an image.
type ImageInfo struct {
	// ID is the image's content-addressed id (sha256:…).
	ID     string
	Labels map[string]string
	// Env is the image's environment, KEY=VALUE.
	Env []string
	// Cmd is the image's default command.
	Cmd []string
	// Created is when the image was made.
	Created time.Time
}

// Image is an image as a listing shows it.
type Image struct {
	ID     string
	Tags   []string
	Labels map[string]string
	// Created is when it was made.
	Created time.Time
}

// ContextBuild is a build from a context the caller made: a tar stream
// holding the Dockerfile and every file the build may COPY.
type ContextBuild struct {
	// Context is the build context as a tar stream.
	Context io.Reader
	// Dockerfile is the Dockerfile's path inside the context.
	Dockerfile string
	// Tags name the result; none leaves it untagged (the returned id is
	// how it is used then).
	Tags   []string
	Args   map[string]string
	Target string
	Labels map[string]string
	// NoCache builds every step again.
	NoCache bool
	// Network is the network the build's steps run on (the engine's
	// NetworkMode: "none" or a network's name); "" is the engine's
	// default bridge, for builds of git sandbox's own Dockerfile on a base
	// the user chose.
	Network string
	// Progress receives the build's output. On a terminal (IsTerminal,
	// TerminalFd) it is the full output with progress redrawn in place;
	// otherwise only the step lines and git sandbox's own messages, and the
	// last lines of the output when the build fails.
	Progress   io.Writer
	TerminalFd uintptr
	IsTerminal bool
}

// CommitOptions say how a stopped container's file system becomes an
// image.
type CommitOptions struct {
	// Tag names the image.
	Tag string
	// Labels are the image's labels; they win over the container's.
	Labels map[string]string
	// Cmd is the image's default command (the container's own is a
	// placeholder that should not outlive it).
	Cmd []string
}

// ErrImageMissing is the error for a missing image; isDefault says whether
// it is the image git sandbox builds itself.
func ErrImageMissing(image string, isDefault bool) error {
	e := usererr.New("image %s is not present", image)
	if isDefault {
		return e.Hint("build it with: git sandbox image build (add --base IMAGE to build offline from a local image)")
	}
	return e.Hint("build or pull %s, or use the default image (git sandbox image build) by removing the image setting", image)
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

// DockerfileContext returns a build context holding only a Dockerfile named
// "Dockerfile".
func DockerfileContext(content []byte) io.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// Writes to a bytes.Buffer cannot fail.
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)})
	_, _ = tw.Write(content)
	_ = tw.Close()
	return &buf
}
