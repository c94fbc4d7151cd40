// Package gitcmd is the one gateway through which git sandbox runs the git
// CLI. Every git process the tool starts is built here, so the rules that keep
// agent-written data from steering the host's git live in one place:
//
//   - inherited GIT_* variables are dropped and GIT_DIR / GIT_WORK_TREE are
//     always set explicitly, so nothing is discovered from the current
//     directory or a planted gitfile;
//   - replace objects, terminal prompts, hooks, fsmonitor, external diff
//     drivers, textconv and submodule recursion are switched off on every call;
//   - read-only calls take no optional locks;
//   - an isolated runner reads no system, global or repository configuration
//     at all: it is what looks at a worktree the agent wrote.
//
// Errors carry git's stderr, so a failure explains itself.
//
// Object and ref plumbing is typed: object names are Hash values, RevParse
// tells a missing object (ErrNotExist) from a failure, UpdateRef and
// UpdateRefs are the only compare-and-swap of refs (*RefMovedError when a
// ref moved), MergeTree reports conflicts with their real paths. Callers
// build no rev-parse, update-ref, commit-tree, merge-tree or read-tree argv
// of their own; Run and Output remain for commands without a typed method.
package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Runner runs git with a fixed, explicit view of one repository.
type Runner struct {
	// GitDir is the repository (or scratch) git directory. Required.
	GitDir string
	// WorkTree is the working tree, or "" for commands that need none.
	WorkTree string
	// IndexFile, when set, replaces the repository's index (GIT_INDEX_FILE).
	IndexFile string
	// ObjectDir, when set, is the object store written to (GIT_OBJECT_DIRECTORY).
	ObjectDir string
	// Isolated turns off every configuration file: system, global and the
	// repository's own. Use it for anything that reads files an agent wrote.
	Isolated bool
	// Config holds extra -c settings, applied after the safety settings.
	Config []string
	// Env holds extra environment entries (KEY=VALUE) for special cases such
	// as a commit's author and committer dates.
	Env []string
}

// safetyConfig is passed as -c to every git process. It is defence in depth:
// the isolation wall is that the host never opens agent-owned git metadata.
var safetyConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.untrackedCache=false",
	"diff.ignoreSubmodules=all",
	"submodule.recurse=false",
	"protocol.ext.allow=never",
	"advice.addEmbeddedRepo=false",
	"advice.detachedHead=false",
	"color.ui=false",
	"core.quotePath=false",
}

// noExtDiffCommands are the git commands that accept --no-ext-diff and
// --no-textconv; both are added to every such call.
var noExtDiffCommands = map[string]bool{
	"diff": true, "diff-tree": true, "diff-index": true, "diff-files": true,
	"log": true, "show": true,
}

// readOnlyCommands never need optional locks (GIT_OPTIONAL_LOCKS=0).
var readOnlyCommands = map[string]bool{
	"rev-parse": true, "cat-file": true, "ls-tree": true, "ls-files": true,
	"diff": true, "diff-tree": true, "diff-index": true, "diff-files": true,
	"for-each-ref": true, "log": true, "show": true, "status": true,
	"merge-base": true, "rev-list": true, "show-ref": true, "var": true,
	"config": true,
}

// Error is a failed git command with its stderr.
type Error struct {
	Args   []string
	Stderr string
	Code   int
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	// git's own "fatal: " / "error: " prefixes add nothing under our prefix.
	msg = strings.TrimPrefix(msg, "fatal: ")
	msg = strings.TrimPrefix(msg, "error: ")
	name := "git"
	if len(e.Args) > 0 {
		name = "git " + e.Args[0]
	}
	return fmt.Sprintf("%s: %s", name, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns the exit status of a failed git command, or -1 when err
// is not one.
func ExitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}

// Command returns the exec.Cmd for args, with the environment and the safety
// settings in place. Callers that only need output should use Run or Output.
func (r *Runner) Command(ctx context.Context, args ...string) *exec.Cmd {
	full := make([]string, 0, len(args)+2*len(safetyConfig)+2*len(r.Config)+3)
	for _, c := range safetyConfig {
		full = append(full, "-c", c)
	}
	for _, c := range r.Config {
		full = append(full, "-c", c)
	}
	if len(args) > 0 {
		full = append(full, args[0])
		if noExtDiffCommands[args[0]] {
			full = append(full, "--no-ext-diff", "--no-textconv")
		}
		full = append(full, args[1:]...)
	}
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = r.Environ(len(args) > 0 && readOnlyCommands[args[0]])
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Environ is the environment a git process gets: the caller's environment
// without any GIT_* variable, plus the explicit repository view.
func (r *Runner) Environ(readOnly bool) []string {
	env := make([]string, 0, len(os.Environ())+12)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GIT_DIR="+r.GitDir,
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_PROTOCOL_FROM_USER=0",
		"LC_ALL=C",
	)
	if r.WorkTree != "" {
		env = append(env, "GIT_WORK_TREE="+r.WorkTree)
	}
	if r.IndexFile != "" {
		env = append(env, "GIT_INDEX_FILE="+r.IndexFile)
	}
	if r.ObjectDir != "" {
		env = append(env, "GIT_OBJECT_DIRECTORY="+r.ObjectDir)
	}
	if readOnly {
		env = append(env, "GIT_OPTIONAL_LOCKS=0")
	}
	if r.Isolated {
		env = append(env,
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_ATTR_NOSYSTEM=1",
		)
	}
	env = append(env, r.Env...)
	return env
}

// tracef, when set, receives every git command and how long it took.
var tracef func(format string, args ...any)

// SetTrace makes every git command that runs from now on reported to f
// (nil turns it off). The command line sets it once, when
// GIT_SANDBOX_TRACE asks for it.
func SetTrace(f func(format string, args ...any)) { tracef = f }

// Run runs git and returns its stdout. stdin may be nil.
func (r *Runner) Run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	stdout, _, err := r.RunFull(ctx, stdin, args...)
	return stdout, err
}

// RunFull runs git and returns its stdout and stderr, for the commands
// whose warnings matter on success too.
func (r *Runner) RunFull(ctx context.Context, stdin io.Reader, args ...string) ([]byte, []byte, error) {
	cmd := r.Command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin = stdin
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	if tracef != nil {
		tracef("%6.1fms git %s", float64(time.Since(start).Microseconds())/1000, strings.Join(args, " "))
	}
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return stdout.Bytes(), stderr.Bytes(), &Error{Args: args, Stderr: stderr.String(), Code: code, Err: err}
	}
	return stdout.Bytes(), stderr.Bytes(), nil
}

// Output runs git and returns its stdout with the trailing newline removed.
func (r *Runner) Output(ctx context.Context, args ...string) (string, error) {
	out, err := r.Run(ctx, nil, args...)
	return strings.TrimRight(string(out), "\n"), err
}

// Lines runs git and splits its NUL- or newline-terminated output.
func (r *Runner) Lines(ctx context.Context, args ...string) ([]string, error) {
	out, err := r.Run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	return SplitLines(out), nil
}

// SplitLines splits output on NUL when it has any, else on newlines, and
// drops a final empty element.
func SplitLines(out []byte) []string {
	sep := "\n"
	if bytes.IndexByte(out, 0) >= 0 {
		sep = "\x00"
	}
	s := strings.TrimSuffix(string(out), sep)
	if s == "" {
		return nil
	}
	return strings.Split(s, sep)
}
