package proc

import (
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
