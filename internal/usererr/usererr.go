// Package usererr marks errors meant for the person at the terminal: a
// message printed verbatim, hint lines saying what to do next, and the exit
// status the command ends with. Everything else is wrapped context.
package usererr

import (
	"errors"
	"fmt"
)

// Exit statuses of git sandbox, listed in its help under EXIT STATUS.
const (
	// ExitError is any failure without a more specific status.
	ExitError = 1
	// ExitUsage is a command line that could not be parsed.
	ExitUsage = 2
	// ExitConflict is a land whose change conflicts with the base branch.
	ExitConflict = 3
	// ExitRefused is a refusal a flag or an action of the user resolves:
	// a running sandbox, failed or stale verify, unsaved work.
	ExitRefused = 4
	// ExitTimeout is a wait that ran out of time.
	ExitTimeout = 124
)

// Error is an error for the user, with optional hints and an exit status.
type Error struct {
	Msg   string
	Hints []string
	Code  int
	Err   error // underlying cause, if any (not printed)
}

// New returns a user error with a formatted message.
func New(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Code: ExitError}
}

// Wrap returns a user error whose cause is err.
func Wrap(err error, format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Code: ExitError, Err: err}
}

// Hint adds a hint line.
func (e *Error) Hint(format string, args ...any) *Error {
	e.Hints = append(e.Hints, fmt.Sprintf(format, args...))
	return e
}

// WithCode sets the exit status.
func (e *Error) WithCode(code int) *Error {
	e.Code = code
	return e
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// ExitStatus is an error that carries only an exit status: the command has
// already said everything (an agent's own exit code passed through).
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// As returns the user error in err's chain, if any.
func As(err error) (*Error, bool) {
	var ue *Error
	ok := errors.As(err, &ue)
	return ue, ok
}

// Code returns the exit status err asks for.
func Code(err error) int {
	if err == nil {
		return 0
	}
	var es ExitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	if ue, ok := As(err); ok && ue.Code != 0 {
		return ue.Code
	}
	return ExitError
}
