package container

import (
	"errors"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Errors every engine reports in the same way, whatever its wire format:
// callers test them with errors.Is (or IsNotFound and IsConflict), never
// with an engine's own error types.
var (
	// ErrNotFound: the container, image, volume or network does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the object is not in a state that allows the request
	// (not running, already paused, a name in use).
	ErrConflict = errors.New("conflict")
	// ErrAddressInUse: a network's requested address range overlaps one
	// the engine has given out already, or a member's requested address
	// is another's.
	ErrAddressInUse = errors.New("address in use")
	// ErrAmbiguousName: a container's network is named by more than one
	// network (an engine that let two creates of one name race), and the
	// engine resolves the name when it starts the container.
	ErrAmbiguousName = errors.New("network name is ambiguous")
	// ErrNotSupported: the engine cannot do this at all (a cluster does
	// not build images); its Abilities say so beforehand.
	ErrNotSupported = errors.New("not supported by this engine")
)

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err says the object's state does not allow
// the request.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// WithKind marks err as meaning kind (ErrNotFound, ErrConflict, …), its
// message kept: how another engine reports those errors.
func WithKind(kind, err error) error { return &kindError{kind: kind, err: err} }

// kindError keeps the engine's own message and adds the sentinel it means.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string        { return e.err.Error() }
func (e *kindError) Unwrap() error        { return e.err }
func (e *kindError) Is(target error) bool { return target == e.kind }

// IsNotSupported reports whether err says the engine cannot do the request
// at all.
func IsNotSupported(err error) bool { return errors.Is(err, ErrNotSupported) }

// NotSupported is the error of an operation an engine cannot do: the
// message is the user's, and it satisfies ErrNotSupported; add hints
// saying what to do instead.
func NotSupported(format string, args ...any) *usererr.Error {
	return usererr.Wrap(ErrNotSupported, format, args...)
}
