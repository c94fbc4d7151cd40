package container

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// LabelAgents is stamped on images whose builder knows which agent CLIs they
// hold: the names, comma-separated ("" for none). An inspect reads it, where
// ImageAgents has to run a container.
const LabelAgents = "git-sandbox.agents"

// LayerDockerfile returns git sandbox's own image layer: the Dockerfile the
// default image is built from, which takes its base as the build argument
// BASE and the agent choice as AGENTS ("auto" or "none").
func LayerDockerfile() []byte { return bytes.Clone(dockerfile) }

// ImageInfo is what git sandbox reads of a local image.
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

// InspectImage returns a local image's id, labels and environment; ok is
// false when no image has that reference.
func (d *Docker) InspectImage(ctx context.Context, ref string) (info ImageInfo, ok bool, err error) {
	img, err := d.api.ImageInspect(ctx, ref)
	err = sdkErr(err)
	if err != nil {
		if IsNotFound(err) {
			return ImageInfo{}, false, nil
		}
		return ImageInfo{}, false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	info.ID = img.ID
	if img.Config != nil {
		info.Labels = img.Config.Labels
		info.Env = img.Config.Env
		info.Cmd = img.Config.Cmd
	}
	info.Created, _ = time.Parse(time.RFC3339Nano, img.Created)
	return info, true, nil
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
	// Progress receives the build's output. On a terminal (IsTerminal,
	// TerminalFd) it is the full output with progress redrawn in place;
	// otherwise only the step lines and git sandbox's own messages, and the
	// last lines of the output when the build fails.
	Progress   io.Writer
	TerminalFd uintptr
	IsTerminal bool
}

// tailLines is how much of a quiet build's output is shown when it fails.
const tailLines = 25

// BuildContext builds an image with the classic builder (API 1.41 and
// later engines alike) and returns its id. A FROM image present locally is
// never pulled.
func (d *Docker) BuildContext(ctx context.Context, o ContextBuild) (string, error) {
	args := make(map[string]*string, len(o.Args))
	for k, v := range o.Args {
		args[k] = &v
	}
	resp, err := d.api.ImageBuild(ctx, o.Context, build.ImageBuildOptions{
		Tags:        o.Tags,
		Dockerfile:  o.Dockerfile,
		BuildArgs:   args,
		Target:      o.Target,
		Labels:      o.Labels,
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		NoCache:     o.NoCache,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	out := o.Progress
	if out == nil {
		out = io.Discard
	}
	var quiet *quietWriter
	if !o.IsTerminal {
		quiet = &quietWriter{out: out}
		out = quiet
	}
	var id string
	aux := func(m jsonmessage.JSONMessage) {
		var r build.Result
		if m.Aux != nil && json.Unmarshal(*m.Aux, &r) == nil && r.ID != "" {
			id = r.ID
		}
	}
	msgs := escapedMessages(resp.Body)
	err = jsonmessage.DisplayJSONMessagesStream(msgs, out, o.TerminalFd, o.IsTerminal, aux)
	msgs.Close() // stops the re-encoding if the display ended early
	if quiet != nil {
		quiet.flush()
	}
	if err != nil {
		if quiet != nil {
			quiet.showTail()
		}
		var je *jsonmessage.JSONError
		if errors.As(err, &je) {
			return "", usererr.Wrap(err, "image build failed: %s", strings.TrimSpace(je.Message))
		}
		return "", fmt.Errorf("image build: %w", err)
	}
	if id == "" {
		return "", errors.New("image build: the engine did not say which image it built")
	}
	return id, nil
}

// escapedMessages re-encodes a build's message stream with every text a
// Dockerfile or its RUN steps could choose escaped (termsafe), so a
// repository's build cannot drive the terminal; the progress redrawing
// jsonmessage does itself is unaffected.
func escapedMessages(r io.Reader) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		dec := json.NewDecoder(r)
		enc := json.NewEncoder(pw)
		for {
			var m jsonmessage.JSONMessage
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
			m.Stream = termsafe.Text(m.Stream)
			m.Status = termsafe.String(m.Status)
			//lint:ignore SA1019 engines still send it and jsonmessage still shows it
			m.ProgressMessage = termsafe.String(m.ProgressMessage)
			m.ID = termsafe.String(m.ID)
			//lint:ignore SA1019 engines still send it
			m.ErrorMessage = termsafe.String(m.ErrorMessage)
			if m.Error != nil {
				m.Error.Message = termsafe.Text(m.Error.Message)
			}
			if err := enc.Encode(&m); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// maxStepLine is how much of a step line a quiet build shows.
const maxStepLine = 120

// quietWriter passes on the lines that say where a build is (Step n/m) and
// git sandbox's own messages, and keeps the last lines for a failure.
type quietWriter struct {
	out     io.Writer
	partial []byte
	tail    []string
}

func (q *quietWriter) Write(p []byte) (int, error) {
	q.partial = append(q.partial, p...)
	for {
		i := bytes.IndexByte(q.partial, '\n')
		if i < 0 {
			break
		}
		q.line(string(q.partial[:i]))
		q.partial = q.partial[i+1:]
	}
	return len(p), nil
}

func (q *quietWriter) line(l string) {
	l = strings.TrimRight(l, "\r")
	q.tail = append(q.tail, l)
	if len(q.tail) > tailLines {
		q.tail = q.tail[1:]
	}
	// A message of git sandbox's own may follow a tool's output that did
	// not end its line (npm's progress): it is shown from where it starts.
	if i := strings.Index(l, "git-sandbox: "); i > 0 {
		l = l[i:]
	}
	if strings.HasPrefix(l, "Step ") || strings.HasPrefix(l, "git-sandbox: ") {
		if r := []rune(l); len(r) > maxStepLine {
			l = string(r[:maxStepLine-1]) + "…"
		}
		fmt.Fprintln(q.out, l)
	}
}

func (q *quietWriter) flush() {
	if len(q.partial) > 0 {
		q.line(string(q.partial))
		q.partial = nil
	}
}

// showTail writes the last lines of the build's output, skipping the ones
// already shown, so a failed step's own messages are seen.
func (q *quietWriter) showTail() {
	for _, l := range q.tail {
		if !strings.HasPrefix(l, "Step ") && !strings.HasPrefix(l, "git-sandbox: ") {
			fmt.Fprintln(q.out, l)
		}
	}
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

// Image is a local image as a listing shows it.
type Image struct {
	ID     string
	Tags   []string
	Labels map[string]string
	// Created is when it was made.
	Created time.Time
}

// ListImages returns the local images carrying every given label
// (key=value).
func (d *Docker) ListImages(ctx context.Context, labels ...string) ([]Image, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := d.api.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", sdkErr(err))
	}
	out := make([]Image, 0, len(list))
	for _, i := range list {
		out = append(out, Image{ID: i.ID, Tags: i.RepoTags, Labels: i.Labels, Created: time.Unix(i.Created, 0)})
	}
	return out, nil
}

// RemoveImage removes a tag (or an image by id) and the untagged parents
// only it had; an image a container uses is ErrConflict, a missing one is
// not an error.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	_, err := d.api.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	err = sdkErr(err)
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
