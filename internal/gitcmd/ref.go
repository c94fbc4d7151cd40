package gitcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// RefUpdate is one compare-and-swap of a ref.
type RefUpdate struct {
	// Ref is the full ref name (refs/heads/main).
	Ref string
	// New is what the ref points at afterwards; a zero New deletes it.
	New Hash
	// Old is what the ref must point at now, or the update fails with a
	// *RefMovedError and changes nothing. A zero Old means the ref must not
	// exist yet.
	Old Hash
	// AnyOld skips the check: the ref is set (or deleted) whatever it
	// points at. Only for refs nothing else writes, such as undoing what a
	// failed start itself created.
	AnyOld bool
}

// UpdateRefRequest is one ref update with its reflog message.
type UpdateRefRequest struct {
	// Ref is the full ref name (refs/heads/main).
	Ref string
	// New is what the ref points at afterwards; a zero New deletes it.
	New Hash
	// Old is what the ref must point at now, or the update fails with a
	// *RefMovedError and changes nothing. A zero Old means the ref must not
	// exist yet.
	Old Hash
	// AnyOld skips the check of Old (see RefUpdate.AnyOld).
	AnyOld bool
	// Message is the reflog message; may be "".
	Message string
}

// RefMovedError is the failure of a compare-and-swap: the ref did not point
// at what the update expected.
type RefMovedError struct {
	// Ref is the ref that moved.
	Ref string
	// Expected is the value the update required (zero: must not exist).
	Expected Hash
	// Actual is what the ref points at (zero: it does not exist).
	Actual Hash
	// Err is git's own error.
	Err error
}

func (e *RefMovedError) Error() string {
	switch {
	case e.Actual.IsZero():
		return fmt.Sprintf("%s was deleted (expected at %s)", e.Ref, e.Expected.Short())
	case e.Expected.IsZero():
		return fmt.Sprintf("%s already exists (at %s)", e.Ref, e.Actual.Short())
	}
	return fmt.Sprintf("%s moved to %s (expected at %s)", e.Ref, e.Actual.Short(), e.Expected.Short())
}

func (e *RefMovedError) Unwrap() error { return e.Err }

// UpdateRef is the one compare-and-swap of a ref: it sets req.Ref to
// req.New (deletes it when New is zero) only if it points at req.Old now
// (does not exist when Old is zero). When it does not, nothing changes and
// the error is a *RefMovedError.
func (r *Runner) UpdateRef(ctx context.Context, req UpdateRefRequest) error {
	return r.UpdateRefs(ctx, req.Message, RefUpdate{Ref: req.Ref, New: req.New, Old: req.Old, AnyOld: req.AnyOld})
}

// UpdateRefs applies every update or none, as one ref transaction, with
// one reflog message. When a ref is not at its expected value nothing
// changes and the error is a *RefMovedError naming that ref.
func (r *Runner) UpdateRefs(ctx context.Context, message string, updates ...RefUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	stdin, err := refTransaction(updates)
	if err != nil {
		return err
	}
	args := []string{"update-ref"}
	if message != "" {
		args = append(args, "-m", message)
	}
	args = append(args, "-z", "--stdin")
	if _, err := r.Run(ctx, strings.NewReader(stdin), args...); err != nil {
		return r.explainRefFailure(ctx, updates, err)
	}
	return nil
}

// refTransaction is the input of git update-ref -z --stdin for updates:
// fields end in NUL, so no ref name or value can be taken for another.
func refTransaction(updates []RefUpdate) (string, error) {
	var b strings.Builder
	b.WriteString("start\x00")
	for _, u := range updates {
		if u.Ref == "" || strings.ContainsAny(u.Ref, "\x00\n") {
			return "", fmt.Errorf("update ref: invalid ref name %q", u.Ref)
		}
		old := ""
		switch {
		case u.AnyOld:
		case u.Old.IsZero():
			old = string(ZeroHash)
		default:
			old = string(u.Old)
		}
		if u.New.IsZero() {
			if !u.AnyOld && u.Old.IsZero() {
				return "", fmt.Errorf("update ref: deleting %s, which must not exist, does nothing", u.Ref)
			}
			fmt.Fprintf(&b, "delete %s\x00%s\x00", u.Ref, old)
			continue
		}
		fmt.Fprintf(&b, "update %s\x00%s\x00%s\x00", u.Ref, u.New, old)
	}
	b.WriteString("prepare\x00commit\x00")
	return b.String(), nil
}

// explainRefFailure turns a failed transaction into a *RefMovedError when a
// ref was not at its expected value; otherwise (a lock held by another git,
// an invalid name) git's error is returned as it is. git's own messages are
// not parsed: the refs are read again.
func (r *Runner) explainRefFailure(ctx context.Context, updates []RefUpdate, err error) error {
	for _, u := range updates {
		if u.AnyOld {
			continue
		}
		actual, rerr := r.RevParse(ctx, u.Ref)
		switch {
		case errors.Is(rerr, ErrNotExist):
			actual = ""
		case rerr != nil:
			continue
		}
		if actual.orNone() != u.Old.orNone() {
			return &RefMovedError{Ref: u.Ref, Expected: u.Old, Actual: actual, Err: err}
		}
	}
	return err
}

// orNone is h, or "" for any zero hash.
func (h Hash) orNone() Hash {
	if h.IsZero() {
		return ""
	}
	return h
}
