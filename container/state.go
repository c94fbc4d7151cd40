package container

import (
	"io"
	"time"
)

// StatusLost is the Status of a container an engine lost while it ran
// (a Kubernetes Pod deleted or evicted, or its node gone): its exit code
// and output went with it.
const StatusLost = "lost"

// State is a container's state as ps shows it.
type State struct {
	ID       string
	Name     string
	Status   string // created, running, exited, paused, restarting, dead, lost
	Running  bool
	Paused   bool
	ExitCode int
	// OOMKilled says the engine ended the container's last run for
	// memory (Inspect only).
	OOMKilled bool
	// ListExitCode is the exit code of a listed container that has exited
	// (List only; Inspect fills ExitCode).
	ListExitCode *int
	Started      time.Time
	Finished     time.Time
	Labels       map[string]string
	Image        string
	// TTY and OpenStdin are how the container was created, and Mounts
	// (destination -> source) its bind mounts (Inspect only).
	TTY, OpenStdin bool
	Mounts         map[string]string
}

// WaitCondition says which exit WaitExit waits for.
type WaitCondition string

// Wait conditions.
const (
	// WaitNextExit waits for the next time the container stops; call
	// WaitExit before Start so a fast exit is not missed.
	WaitNextExit WaitCondition = "next-exit"
	// WaitNotRunning returns at once for a container that is not running.
	WaitNotRunning WaitCondition = "not-running"
)

// WaitResult is a container's exit.
type WaitResult struct {
	Code int
	Err  error
}

// LogsOptions select a container's output.
type LogsOptions struct {
	// Follow keeps streaming until the container stops or ctx ends.
	Follow bool
	// Tail is how many lines from the end: "all" or a number.
	Tail string
	// Stdout and Stderr receive the output (a container with a terminal
	// has one stream, written to Stdout; an engine that keeps one stream,
	// Kubernetes, writes both to Stdout).
	Stdout, Stderr io.Writer
}

// Streams are the local ends of an attached session.
type Streams struct {
	Stdin  io.Reader // nil: nothing is sent
	Stdout io.Writer
	Stderr io.Writer
	// TTY is set when the container has a terminal; the local terminal is
	// then put in raw mode and its size follows the window.
	TTY bool
	// TerminalFd is the local terminal (stdin's fd) when TTY is set.
	TerminalFd int
}

// ExecOptions describe a command run in a running container.
type ExecOptions struct {
	Argv    []string
	User    string
	WorkDir string
	Env     []string
	Streams Streams
	// Started, when set, is called once the command's process runs (or
	// could not be started), before its output is copied.
	Started func()
}
