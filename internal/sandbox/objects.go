package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/visible"
)

// The objects an agent may read (issue 16, item 3): its repository borrows
// from the repository's visible store (what the user's branches and tags
// reach) and the sandbox's given store, never from the user's object store,
// which holds the stash, dangling blobs and every sandbox's snapshots.

// slowPack is how long a refresh of the visible store runs before start
// says what it is doing.
const slowPack = 2 * time.Second

// visibleStore is the repository's store of what its branches and tags
// reach.
func (e *Env) visibleStore() visible.Store {
	return visible.Store{Dir: e.Layout.VisibleStore()}
}

// agentStores are the object directories a sandbox's agent repository
// borrows from, in the order its alternates file names them.
func (e *Env) agentStores(branch string) []string {
	return []string{e.visibleStore().Objects(), e.Layout.GivenObjects(branch)}
}

// prepareObjects makes what a new sandbox's agent may read ready: the
// visible store brought up to the branches and tags (the sandbox's own
// branch, made a moment ago at the start commit, among them), and the
// sandbox's given store with the tree of the work carried in (carried,
// "" for none) beyond the start commit. It returns the refs the agent's
// repository gets: exactly those the visible store was packed from.
func (e *Env) prepareObjects(ctx context.Context, branch, start, carried string) (visible.Refs, error) {
	given := e.Layout.GivenObjects(branch)
	if err := os.MkdirAll(filepath.Join(given, "pack"), 0o755); err != nil {
		return nil, fmt.Errorf("create the sandbox's object store: %w", err)
	}
	// A large repository's first start packs its whole history: said when
	// it takes a while, silent otherwise.
	slow := time.AfterFunc(slowPack, func() {
		e.UI.Infof("packing the objects your branches and tags reach, for agents to read (once per repository: later starts pack only what is new)")
	})
	res, err := e.visibleStore().Refresh(ctx, e.Git())
	slow.Stop()
	if err != nil {
		return nil, err
	}
	e.UI.Tracef("visible store: %d object(s) packed, %d pack(s) rolled up", res.Objects, res.Rolled)
	if carried != "" {
		if _, err := visible.Give(ctx, e.Git(), given, []string{carried}, []string{start}); err != nil {
			return nil, fmt.Errorf("--carry: %w", err)
		}
	}
	return res.Refs, nil
}

// giveUpdate gives a sandbox's agent what update brought into its
// repository: the base's new commits (tip) and the merge of them with the
// agent's work (newHead), beyond what it had (the old start and its HEAD).
func (s *Sandbox) giveUpdate(ctx context.Context, newHead, tip, head gitcmd.Hash) error {
	given := s.env.Layout.GivenObjects(s.Branch)
	exclude := []string{s.Start}
	if head != "" {
		exclude = append(exclude, head.String())
	}
	if _, err := visible.Give(ctx, s.env.Git(), given, []string{newHead.String(), tip.String()}, exclude); err != nil {
		return fmt.Errorf("give the agent the update's objects: %w", err)
	}
	return nil
}
