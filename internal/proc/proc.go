// Package proc owns the programs git sandbox starts that are neither git
// (internal/gitcmd owns those) nor Docker (container): its own binary,
// spawned as a sandbox's supervisor, the PATH look-up that tells whether
// the pre-push hook can find that binary, the user's pager, the commands
// that print a secret's value, and the clean filters (Git LFS) land runs
// as git add would. Nothing else in the tree imports os/exec; a test in
// internal/lint keeps it so.
package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// LookPath returns where name is found on PATH.
func LookPath(name string) (string, error) { return exec.LookPath(name) }

// SpawnOptions describe a detached process.
type SpawnOptions struct {
	// Path is the program; Args its argv, Args[0] included.
	Path string
	Args []string
	// Dir is the working directory; Env the whole environment.
	Dir string
	Env []string
	// Output receives stdout and stderr; nil discards them.
	Output *os.File
}

// SpawnDetached starts a program as its own session, detached from this
// process and its terminal, so it outlives this process (a kill -9 of it
// included), and does not wait for it.
func SpawnDetached(o SpawnOptions) error {
	cmd := &exec.Cmd{
		Path:        o.Path,
		Args:        o.Args,
		Dir:         o.Dir,
		Env:         o.Env,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if o.Output != nil {
		cmd.Stdout = o.Output
		cmd.Stderr = o.Output
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// SecretCommandTimeout bounds a secret's from_command.
const SecretCommandTimeout = 30 * time.Second

// SecretCommand runs the user's own command (a [[secret]]'s
// from_command, from the user's config) with /bin/sh and returns what it
// printed on stdout. Its stderr goes to stderr, so a password prompt or a
// login message reaches the user; stdout is never shown, since it is the
// secret. The command's stdin is the terminal's, for the same reason.
func SecretCommand(ctx context.Context, command string, stdin io.Reader, stderr io.Writer) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, SecretCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Stdin, cmd.Stderr = stdin, stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("no answer within %s", SecretCommandTimeout)
	}
	return out, err
}
