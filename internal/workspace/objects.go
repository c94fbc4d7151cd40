package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/visible"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// The objects an agent may read (issue 16, item 3): its repository borrows
// from the repository's visible store (what the user's branches and tags
// reach) and the sandbox's given store, never from the user's object store,
// which holds the stash, dangling blobs and every sandbox's snapshots.

// slowPack is how long a refresh of the visible store runs before start
// says what it is doing.
const slowPack = 2 * time.Second

// VisibleStore is the repository's store of what its branches and tags
// reach.
func VisibleStore(l worktree.Layout) visible.Store {
	return visible.Store{Dir: l.VisibleStore()}
}

// agentStores are the object directories a sandbox's agent repository
// borrows from, in the order its alternates file names them.
func (b *Bind) agentStores() []string {
	return []string{VisibleStore(b.env.Layout).Objects(), b.env.Layout.GivenObjects(b.rec.Branch)}
}

// visibleRefresh is a refresh of the visible store running in the
// background; wait returns its result.
type visibleRefresh struct {
	done chan struct{}
	res  *visible.Result
	err  error
}

// refreshVisible starts bringing the visible store up to the branches and
// tags, with start packed too (the commit the new sandbox's branch is
// about to be made at), beside the worktree's checkout: a large
// repository's first fill takes seconds. Wait for it before returning.
func (e *Env) refreshVisible(ctx context.Context, start string) *visibleRefresh {
	r := &visibleRefresh{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = VisibleStore(e.Layout).Refresh(ctx, e.Repo.Git(), start)
	}()
	return r
}

func (r *visibleRefresh) wait() (*visible.Result, error) {
	<-r.done
	return r.res, r.err
}

// prepareObjects makes what a new sandbox's agent may read ready: the
// visible store brought up to the branches and tags and the start commit
// (refresh, started before the sandbox's branch was made), and the
// sandbox's given store with the tree of the work carried in (carried,
// "" for none) beyond the start commit. It returns the refs the agent's
// repository gets: those the visible store was packed from, and the
// sandbox's own branch at the start commit.
func (b *Bind) prepareObjects(ctx context.Context) (visible.Refs, error) {
	e, branch, start, carried := b.env, b.rec.Branch, b.rec.Start, b.carried
	given := e.Layout.GivenObjects(branch)
	if err := os.MkdirAll(filepath.Join(given, "pack"), 0o755); err != nil {
		return nil, fmt.Errorf("create the sandbox's object store: %w", err)
	}
	// A large repository's first start packs its whole history: said when
	// it takes a while, silent otherwise.
	slow := time.AfterFunc(slowPack, func() {
		e.UI.Infof("packing the objects your branches and tags reach, for agents to read (once per repository: later starts pack only what is new)")
	})
	res, err := b.refresh.wait()
	slow.Stop()
	if err != nil {
		return nil, err
	}
	e.UI.Tracef("visible store: %d object(s) packed, %d pack(s) of yours reused, %d pack(s) rolled up", res.Objects, res.Reused, res.Rolled)
	if carried != "" {
		if _, err := visible.Give(ctx, e.Repo.Git(), given, []string{carried}, []string{start}); err != nil {
			return nil, fmt.Errorf("--carry: %w", err)
		}
	}
	return res.Refs.With(start, "refs/heads/"+branch), nil
}

// giveUpdate gives a sandbox's agent what update brought into its
// repository: the base's new commits (tip) and the merge of them with the
// agent's work (newHead), beyond what it had (the old start and its HEAD).
func (b *Bind) giveUpdate(ctx context.Context, up AgentUpdate) error {
	given := b.env.Layout.GivenObjects(b.rec.Branch)
	exclude := []string{b.rec.Start}
	if up.Head != "" {
		exclude = append(exclude, up.Head.String())
	}
	if _, err := visible.Give(ctx, b.env.Repo.Git(), given, []string{up.NewHead.String(), up.Tip.String()}, exclude); err != nil {
		return fmt.Errorf("give the agent the update's objects: %w", err)
	}
	return nil
}

// FillVisible brings the repository's visible store up to its branches
// and tags now, so the first start does not pay for it (hooks install
// calls it).
func FillVisible(ctx context.Context, repo *worktree.Repo, l worktree.Layout) (*visible.Result, error) {
	return VisibleStore(l).Refresh(ctx, repo.Git())
}

// VisibleUsage is the disk the repository's visible store takes.
func VisibleUsage(repo *worktree.Repo, l worktree.Layout) (visible.Usage, error) {
	return VisibleStore(l).Usage(filepath.Join(repo.CommonDir, "objects"))
}
