package sandbox

import "github.com/git-sandbox/git-sandbox/container"

// Engine is the container engine a sandbox runs on: container.Engine.
//
// Transitional: the interface moved to the container package (where the
// Docker, Kubernetes and fake backends implement it, each in a subpackage
// of its own) and this alias keeps the code of this package, and the work
// going on in it, compiling unchanged; new code names container.Engine.
type Engine = container.Engine
