package gitcmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
)

// Batch is a long-running git process asked one line at a time (cat-file
// --batch, --batch-check): questions are written to In, answers read
// from Out.
type Batch struct {
	In  io.WriteCloser
	Out *bufio.Reader
	cmd *exec.Cmd
}

// StartBatch starts git with args as a Batch.
func (r *Runner) StartBatch(ctx context.Context, args ...string) (*Batch, error) {
	cmd := r.Command(ctx, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	return &Batch{In: in, Out: bufio.NewReader(out), cmd: cmd}, nil
}

// Close ends the process: its input closed, what it still writes read
// and dropped, and waited for.
func (b *Batch) Close() error {
	_ = b.In.Close()
	_, _ = io.Copy(io.Discard, b.Out)
	return b.cmd.Wait()
}
