package container

import "context"

// HelperPool is an engine that keeps copy-mode helpers ready for the next
// start (a Kubernetes engine's warm_pods): a helper already placed and
// running, its image on its node, and its volumes made and empty. Nothing
// of a sandbox is in a helper of the pool until a start takes it; what a
// start took is the sandbox's from then on, and goes with it.
type HelperPool interface {
	// TakeHelper hands a ready helper made from a spec like spec (the same
	// image, user, command, limits and mount targets; names and the
	// sandbox's labels aside) over to the sandbox: from now on it carries
	// spec's labels, and its volumes volumeLabels. nil when none is ready.
	// Whether or not one was, the pool is topped up for specs like this
	// one when the engine is closed.
	TakeHelper(ctx context.Context, spec *Spec, volumeLabels map[string]string) (*TakenHelper, error)
	// Pool says what the pool holds and reserves; with drain it removes
	// every helper of it (image prune), else only the broken ones (doctor).
	Pool(ctx context.Context, drain bool) (PoolStatus, error)
}

// TakenHelper is a helper a start took from the pool: its container's
// name and, by mount target, the names of its volumes.
type TakenHelper struct {
	Name    string
	Volumes map[string]string
}

// PoolStatus is what an engine's pool of ready helpers holds.
type PoolStatus struct {
	// Size is the configured size (warm_pods); Ready the helpers that run,
	// Starting those on their way, Removed those removed (broken, of
	// another kind, or drained).
	Size, Ready, Starting, Removed int
	// Cost says what the pool reserves on the cluster, in its own words.
	Cost string
}
