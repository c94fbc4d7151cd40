package rawterm

import (
	"errors"
	"io"
	"sync"

	"github.com/moby/term"
)

// DetachKeys is the sequence that detaches a terminal from the session it
// is attached to, as Docker's default: Ctrl-P then Ctrl-Q.
var DetachKeys = []byte{16, 17}

// Detachable reads the keyboard of an attached session and calls detach,
// once, when the user types DetachKeys; the keys themselves never reach
// the session, and the read ends there. A Ctrl-P followed by any other
// key is passed on with it, as Docker does. Every engine's attach goes
// through it, so the keys are the same whichever engine the sandbox is
// on (Docker's daemon would detach on them by itself; a Kubernetes
// attach would pass them to the agent).
func Detachable(r io.Reader, detach func()) io.Reader {
	return &detachable{r: term.NewEscapeProxy(r, DetachKeys), detach: detach}
}

type detachable struct {
	r      io.Reader
	detach func()
	once   sync.Once
}

func (d *detachable) Read(b []byte) (int, error) {
	n, err := d.r.Read(b)
	if errors.As(err, new(term.EscapeError)) {
		d.once.Do(d.detach)
	}
	return n, err
}
