package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Pager is a running pager: write to it, then Close it to wait until the
// user has quit it.
type Pager struct {
	cmd *exec.Cmd
	in  io.WriteCloser
}

// StartPager runs command (a shell command line, as git runs core.pager)
// with out as its terminal. LESS and LV get git's defaults (FRX and -c)
// unless they are set, so a short output does not wait and colour shows.
func StartPager(command string, out *os.File) (*Pager, error) {
	cmd := exec.Command("sh", "-c", command)
	cmd.Stdout = out
	cmd.Stderr = os.Stderr
	env := os.Environ()
	if !hasEnv(env, "LESS") {
		env = append(env, "LESS=FRX")
	}
	if !hasEnv(env, "LV") {
		env = append(env, "LV=-c")
	}
	cmd.Env = env
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Pager{cmd: cmd, in: in}, nil
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// Write sends output to the pager.
func (p *Pager) Write(b []byte) (int, error) { return p.in.Write(b) }

// Close ends the pager's input and waits for it to exit.
func (p *Pager) Close() error {
	_ = p.in.Close()
	return p.cmd.Wait()
}

// FilterOptions describe one run of a git clean filter.
type FilterOptions struct {
	// Command is the filter's shell command line (filter.<driver>.clean,
	// %f already replaced), from the user's configuration.
	Command string
	// Dir is its working directory; Env what is added to this process's
	// environment.
	Dir string
	Env []string
	// Stdin is the content to clean.
	Stdin io.Reader
}

// RunFilter runs a clean filter as git would (sh -c), returning its
// output; its stderr is kept in the error.
func RunFilter(ctx context.Context, o FilterOptions) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", o.Command)
	cmd.Dir = o.Dir
	// Inherited GIT_* variables are dropped, as gitcmd drops them: the
	// caller says which repository the filter works for.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, o.Env...)
	cmd.Stdin = o.Stdin
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s: %w: %s", o.Command, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", o.Command, err)
	}
	return out, nil
}
