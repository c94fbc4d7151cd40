// Package proc owns the programs git sandbox starts that are neither git
// (internal/gitcmd owns those) nor Docker (container): its own binary,
// spawned as a sandbox's supervisor, the PATH look-up that tells whether
// the pre-push hook can find that binary, the user's pager, the commands
// that print a secret's value, the user's notify command, and the clean
// filters (Git LFS) land runs as git add would. Nothing else in the tree
// imports os/exec; a test in internal/lint keeps it so.
package proc

import (
	"context"
	"errors"
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

// RunOptions describe a program run to completion.
type RunOptions struct {
	// Argv is the program and its arguments, looked up on PATH.
	Argv []string
	// Env is the whole environment; Dir the working directory.
	Env []string
	Dir string
	// Output receives stdout and stderr; nil discards them.
	Output io.Writer
	// Timeout kills the program and everything it started after this
	// long (0: no limit).
	Timeout time.Duration
}

// Run runs a program (the user's notify command) in a process group of its
// own, and waits for it; when ctx ends or the timeout passes, the whole
// group is killed.
func Run(ctx context.Context, o RunOptions) error {
	if len(o.Argv) == 0 {
		return errors.New("run: no program")
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, o.Argv[0], o.Argv[1:]...)
	cmd.Env = o.Env
	cmd.Dir = o.Dir
	cmd.Stdout, cmd.Stderr = o.Output, o.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", o.Argv[0], ctx.Err())
	}
	return err
}

// Self returns the command that runs this program's own binary with args
// in dir, with this process's environment; the caller connects its
// streams and runs it (the dashboard runs its actions this way, through
// the same command line a user would type).
func Self(dir string, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	return cmd, nil
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
