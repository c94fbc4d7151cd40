package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// tailLines is how much of a quiet build's output is shown when it fails.
const tailLines = 25

// BuildContext builds an image with the classic builder (API 1.41 and
// later engines alike) and returns its id. A FROM image present locally is
// never pulled.
func (m images) BuildContext(ctx context.Context, o container.ContextBuild) (string, error) {
	args := make(map[string]*string, len(o.Args))
	for k, v := range o.Args {
		args[k] = &v
	}
	resp, err := m.d.api.ImageBuild(ctx, o.Context, build.ImageBuildOptions{
		Tags:        o.Tags,
		Dockerfile:  o.Dockerfile,
		BuildArgs:   args,
		Target:      o.Target,
		Labels:      o.Labels,
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		NoCache:     o.NoCache,
		NetworkMode: o.Network,
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
