// Package network owns a sandbox's way out and what it carries: allowlist
// mode's plan (the policy from the adapter, the user's config and flags),
// the sandbox's internal network and the shared egress network, the egress
// proxy's container (from the tool's own image) and its configuration,
// the credential broker's secrets and the sandbox CA's files, open mode's
// network of its own, and the agent's home with its login store. The
// proxy's code is internal/egress; this package makes and removes what it
// runs in.
package network

import (
	"io"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Env is what the network parts of a sandbox work with.
type Env struct {
	Repo   *worktree.Repo
	Layout worktree.Layout
	Config *config.Loaded
	UI     *ui.Printer
	// Faults fails a flow after a named step (tests; nil: never).
	Faults Faults
	// ProxyBinary is the binary the egress proxy's image holds (nil: this
	// one, checked to run alone in its image).
	ProxyBinary ProxyBinary
}

// ProxyBinary says which binary the egress proxy's image holds.
type ProxyBinary interface {
	ProxyBinary() (proxyimage.Binary, error)
}

// ProxyBinaryFunc is a function that is a ProxyBinary.
type ProxyBinaryFunc func() (proxyimage.Binary, error)

// ProxyBinary calls f.
func (f ProxyBinaryFunc) ProxyBinary() (proxyimage.Binary, error) { return f() }

// Engine is what making networks and proxies asks of the engine.
type Engine = container.Engine

// IO is the terminal a secret's command may ask on.
type IO struct {
	Stdin           io.Reader
	StdinIsTerminal bool
	Stderr          io.Writer
}

// Undo collects what removes what was made; it is steps.Undo's shape.
type Undo interface {
	Add(fn func())
}

// undoList is an Undo of its own, for callers that run it themselves.
type undoList []func()

func (u *undoList) Add(fn func()) { *u = append(*u, fn) }

func (u undoList) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// Faults fails flows at named steps (tests).
type Faults interface {
	At(step string) error
}

// step lets a test fail after the named step.
func (e *Env) step(name string) error {
	if e.Faults != nil {
		return e.Faults.At(name)
	}
	return nil
}
