package fake

import (
	"context"
	"io"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/enginetest"
)

// The fake keeps the contract every engine keeps: the conformance suite,
// with the suite's programs acted out (Process, OnExec) instead of run.
func TestConformance(t *testing.T) {
	enginetest.Suite{
		Image: "suite-image",
		New: func(t *testing.T) container.Engine {
			f := New("suite-image")
			f.Process = func(ctx context.Context, c Container, stdin io.Reader, stdout, stderr io.Writer) int {
				p, ok := enginetest.ProgramOf(c.Spec.Argv)
				if !ok {
					<-ctx.Done()
					return -1
				}
				return p.Run(ctx, enginetest.Process{Env: c.Spec.Env, Dir: c.Spec.WorkDir}, stdin, stdout, stderr)
			}
			f.OnExec = func(c Container, o container.ExecOptions) int {
				p, ok := enginetest.ProgramOf(o.Argv)
				if !ok {
					return 127
				}
				dir := o.WorkDir
				if dir == "" {
					dir = c.Spec.WorkDir
				}
				in := enginetest.Process{Env: append(append([]string(nil), c.Spec.Env...), o.Env...), Dir: dir}
				return p.Run(context.Background(), in, o.Streams.Stdin, o.Streams.Stdout, o.Streams.Stderr)
			}
			return f.WithCommit()
		},
		Cannot: map[enginetest.Feature]string{
			enginetest.Files: "the fake runs no processes: its volumes hold no files",
		},
	}.RunTests(t)
}
