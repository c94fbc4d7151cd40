package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/steps"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Bind is a workspace on this machine: a linked worktree of the user's
// repository, and the agent's private repository in the state directory,
// both bind-mounted into the agent's container.
type Bind struct {
	env *Env
	rec *record.Record
	// carried is the tree of the work --carry brought in ("" for none),
	// whose objects the agent is given.
	carried string
	// refresh brings the visible store up to date beside the checkout.
	refresh *visibleRefresh
}

var _ Workspace = (*Bind)(nil)

// Kind is KindBind.
func (b *Bind) Kind() Kind { return KindBind }

// Where is the worktree's path.
func (b *Bind) Where() string { return b.rec.Worktree }

// Remote is false: the files are on this machine.
func (b *Bind) Remote() bool { return false }

// Create adds the sandbox branch at the start commit, checked out in a new
// linked worktree, copies the carried work in and seeds the snapshot
// index with the index checkout wrote.
func (b *Bind) Create(ctx context.Context, u *steps.Undo, o CreateOptions) error {
	g := b.env.Repo.Git()
	r := b.rec
	cctx := context.WithoutCancel(ctx)
	// The visible store is refreshed while the worktree is checked out;
	// the agent's repository waits for it, and so does a failed start.
	b.refresh = b.env.refreshVisible(ctx, r.Start)
	u.Add(func() { _, _ = b.refresh.wait() })
	err := worktree.Add(ctx, g, worktree.AddOptions{
		Path: r.Worktree, Branch: r.Branch, Start: r.Start, Reason: "git sandbox " + r.Branch,
		Lock: b.env.Layout.WorktreeLock(),
	})
	if err != nil {
		return err
	}
	u.Add(func() {
		_ = worktree.Remove(cctx, b.env.Repo.CommonDir, g, r.Worktree)
		_ = g.UpdateRef(cctx, gitcmd.UpdateRefRequest{Ref: "refs/heads/" + r.Branch, AnyOld: true})
	})
	admin, err := worktree.AdminDir(b.env.Repo.CommonDir, r.Worktree)
	if err != nil {
		return err
	}
	if o.Carry {
		if b.carried, err = carry(ctx, b.env.Repo, r.Worktree, admin); err != nil {
			return err
		}
	}
	// Fresh from checkout, the worktree is the start commit: the baseline
	// is its tree, read from nowhere (unless work was carried in).
	seeded := r.Start
	if o.Carry {
		seeded = ""
	}
	return b.local(nil).SeedIndex(filepath.Join(admin, "index"), seeded)
}

// CreateAgentRepo makes the agent's private repository: the objects it
// may read made ready, its git directory with the user's branches and
// tags, and the gitfile mounted over /workspace/.git. From then on the
// worktree's host-side index holds no gitlinks.
func (b *Bind) CreateAgentRepo(ctx context.Context, _ *steps.Undo, o CreateOptions) error {
	r := b.rec
	admin, err := worktree.AdminDir(b.env.Repo.CommonDir, r.Worktree)
	if err != nil {
		return err
	}
	agentRefs, err := b.prepareObjects(ctx)
	if err != nil {
		return err
	}
	if err := agentrepo.Init(agentrepo.InitOptions{
		GitDir: r.PrivateGitDir, HostCommonDir: b.env.Repo.CommonDir, HooksDir: o.HooksDir, Branch: r.Branch,
		Alternates: b.agentStores(), Refs: agentRefs,
		WorktreeIndex: filepath.Join(admin, "index"), UserName: o.UserName, UserEmail: o.UserEmail,
	}); err != nil {
		return err
	}
	if err := worktree.StripGitlinks(ctx, &gitcmd.Runner{GitDir: admin}); err != nil {
		return err
	}
	if err := os.WriteFile(b.env.Layout.Gitfile(r.Branch), agentrepo.Gitfile(r.PrivateGitDir), 0o444); err != nil {
		return fmt.Errorf("write gitfile: %w", err)
	}
	return nil
}

// Source reads the worktree through the private index.
func (b *Bind) Source(freeze Freeze) rescue.Source { return b.local(freeze) }

// Local is the worktree's snapshot source (also for what only it can do:
// the index's gitlinks).
func (b *Bind) Local() *rescue.Local { return b.local(nil) }

func (b *Bind) local(freeze Freeze) *rescue.Local {
	l, r := b.env.Layout, b.rec
	agentDir := r.PrivateGitDir
	if _, err := os.Stat(agentDir); err != nil {
		// Not made yet (the baseline): what the agent tracks is what the
		// start commit holds.
		agentDir = ""
	}
	return &rescue.Local{
		CommonDir:    b.env.Repo.CommonDir,
		Start:        r.Start,
		Worktree:     r.Worktree,
		Index:        l.RescueIndex(r.Branch),
		Scratch:      l.ScratchGitDir(r.Branch),
		ExcludesFile: b.env.excludesFile(),
		AgentGitDir:  agentDir,
		Quarantine:   l.Quarantine(r.Branch),
		MaxFileSize:  b.env.MaxFileSize,
		Freeze:       freeze,
		Watch:        b.watcher(),
	}
}

// AgentHead reads the agent's HEAD from its repository's files.
func (b *Bind) AgentHead() string {
	if b.rec.PrivateGitDir == "" {
		return ""
	}
	id, _, err := agentrepo.Head(b.rec.PrivateGitDir)
	if err != nil {
		return ""
	}
	return id
}

// Sync brings the agent's commits back with go-git and index-pack --strict.
func (b *Bind) Sync(ctx context.Context, known string, budget agentrepo.Budget) (*agentrepo.SyncResult, error) {
	return agentrepo.SyncWithin(ctx, b.env.Repo.Git(), b.rec.PrivateGitDir, b.rec.Start, known, budget)
}

// BranchMoved makes the worktree's host-side index follow its branch,
// moved to head, so git status there compares against the agent's
// commits. Only the index is written: no file of the worktree is read.
func (b *Bind) BranchMoved(ctx context.Context, head string) error {
	admin, err := worktree.AdminDir(b.env.Repo.CommonDir, b.rec.Worktree)
	if err != nil {
		return nil
	}
	wg := &gitcmd.Runner{GitDir: admin}
	if err := wg.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: head}); err != nil {
		return nil
	}
	return worktree.StripGitlinks(ctx, wg)
}

// GiveUpdate gives the agent's repository the update's objects (packed
// into the sandbox's given store) and writes its refs, MERGE_HEAD or index
// as plain files: no git process runs in the agent's repository.
func (b *Bind) GiveUpdate(ctx context.Context, up AgentUpdate) error {
	gitDir := b.rec.PrivateGitDir
	_, ref, err := agentrepo.Head(gitDir)
	if err != nil {
		return err
	}
	if err := agentrepo.WriteRef(gitDir, b.rec.BaseRef, up.Tip.String()); err != nil {
		return err
	}
	if err := b.giveUpdate(ctx, up); err != nil {
		return err
	}
	if up.Merging {
		if err := agentrepo.WriteFile(gitDir, "MERGE_HEAD", []byte(up.Tip.String()+"\n")); err != nil {
			return err
		}
		return agentrepo.WriteFile(gitDir, "MERGE_MSG", []byte(up.Message))
	}
	index, err := b.followingIndex(ctx, up)
	if err != nil {
		return err
	}
	if ref == "" {
		ref = "HEAD"
	}
	if err := agentrepo.WriteRef(gitDir, ref, up.NewHead.String()); err != nil {
		return err
	}
	return agentrepo.WriteFile(gitDir, "index", index)
}

// followingIndex is the agent's index following its new HEAD, keeping what
// it had staged where the base did not change the path (there, the staged
// content stays in its files, unstaged, and a warning says so).
func (b *Bind) followingIndex(ctx context.Context, up AgentUpdate) ([]byte, error) {
	tmp, err := os.MkdirTemp(b.env.Layout.Dir(b.rec.Branch), "update-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	index := filepath.Join(tmp, "index")
	ix := &gitcmd.Runner{GitDir: b.env.Repo.Git().GitDir, IndexFile: index}
	if err := ix.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: up.NewHead.String()}); err != nil {
		return nil, err
	}
	if err := b.keepStaged(ctx, ix, up.Head, up.NewHead); err != nil {
		b.env.UI.Warnf("what the agent had staged is now unstaged (its files keep it): %v", err)
		if err := ix.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: up.NewHead.String()}); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(index)
}

// keepStaged writes into ix (an index holding newHead's tree) what the
// agent had staged against its old HEAD: each path whose entry in the
// agent's index differs from old HEAD's (a change, an addition or a
// removal) keeps the staged entry, unless newHead changed the path too; those
// are left as newHead has them and named in a warning. The agent's index
// is read in Go (agentrepo.Index), never by a git process; its entries are
// written with update-index --index-info, which needs no objects (the
// staged blobs live in the agent's repository).
func (b *Bind) keepStaged(ctx context.Context, ix *gitcmd.Runner, head, newHead gitcmd.Hash) error {
	if head == newHead {
		return nil
	}
	entries, err := agentrepo.Index(b.rec.PrivateGitDir)
	if err != nil || entries == nil {
		return err
	}
	old, err := b.treeEntries(ctx, head)
	if err != nil {
		return err
	}
	cur, err := b.treeEntries(ctx, newHead)
	if err != nil {
		return err
	}
	var info bytes.Buffer
	var lost []string
	stage := func(p, entry string) {
		if entry == cur[p] || cur[p] == "" && strings.HasPrefix(entry, "0 ") {
			return // the new HEAD has it so already
		}
		if cur[p] != old[p] {
			lost = append(lost, p)
			return
		}
		fmt.Fprintf(&info, "%s\t%s\x00", entry, p)
	}
	inIndex := map[string]bool{}
	for _, e := range entries {
		inIndex[e.Path] = true
		if entry := e.Mode + " " + e.ID; entry != old[e.Path] {
			stage(e.Path, entry)
		}
	}
	for p := range old {
		if !inIndex[p] {
			stage(p, "0 "+strings.Repeat("0", len(newHead)))
		}
	}
	if info.Len() > 0 {
		if _, err := ix.Run(ctx, &info, "update-index", "-z", "--index-info"); err != nil {
			return err
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		quoted := make([]string, len(lost))
		for i, p := range lost {
			quoted[i] = termsafe.String(p)
		}
		b.env.UI.Warnf("the agent had staged changes to %s, which the base changed too: they are unstaged now (its files keep what it wrote)", strings.Join(quoted, ", "))
	}
	return nil
}

// treeEntries maps each path of a commit's tree to "MODE ID".
func (b *Bind) treeEntries(ctx context.Context, commit gitcmd.Hash) (map[string]string, error) {
	out, err := b.env.Repo.Git().Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", commit.String())
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			m[p] = f[0] + " " + f[2]
		}
	}
	return m, nil
}

// Quarantine moves nested repositories' git directories into the
// sandbox's state; each one's commit is taken from the snapshot index, so
// snapshots meanwhile record it as before.
func (b *Bind) Quarantine(ctx context.Context) error {
	links, err := b.Local().IndexedGitlinks(ctx)
	if err != nil {
		return err
	}
	_, err = worktree.Quarantine(b.rec.Worktree, b.env.Layout.Quarantine(b.rec.Branch), func(repo string) string { return links[repo] })
	return err
}

// Unquarantine puts the quarantined git directories back and names each:
// while the agent runs, a git run in one on this machine reads what the
// agent wrote.
func (b *Bind) Unquarantine(context.Context) ([]worktree.Nested, error) {
	restored, err := worktree.RestoreQuarantined(b.rec.Worktree, b.env.Layout.Quarantine(b.rec.Branch))
	for _, n := range restored {
		if !n.Bare {
			b.WarnNested([]string{n.Repo()})
		} else {
			b.env.UI.Warnf("%s is laid out as a git repository: while %s runs, git run in it on the host reads what the agent wrote", termsafe.String(filepath.Join(b.rec.Worktree, n.Repo())), termsafe.String(b.rec.Branch))
		}
	}
	return restored, err
}

// WarnNested names each nested repository of the running agent.
func (b *Bind) WarnNested(repos []string) {
	for _, p := range repos {
		b.env.UI.Warnf("%s is a nested git repository: while %s runs, git run in it on the host runs configuration the agent wrote", termsafe.String(filepath.Join(b.rec.Worktree, p)), termsafe.String(b.rec.Branch))
	}
}

// NestedKept is the quarantine directory of the sandbox's state.
func (b *Bind) NestedKept() string { return "under " + b.env.Layout.Quarantine(b.rec.Branch) }

// NestedCopyHint points at the worktree.
func (b *Bind) NestedCopyHint(string) string {
	return fmt.Sprintf("copy what you need from %s first (each one's git directory is kept %s while the agent is stopped)", b.rec.Worktree, b.NestedKept())
}

// PooledMounts is nil: a bound worktree is never pooled.
func (b *Bind) PooledMounts() []container.Mount { return nil }

// HostHome is the sandbox's home directory in the state directory.
func (b *Bind) HostHome() string { return b.env.Layout.Home(b.rec.Branch) }

// Remove moves the worktree aside into trash (a rename, so the name can be
// used again at once, however many files it holds); the state directory,
// with the agent's repository, goes with the sandbox's.
func (b *Bind) Remove(_ context.Context, trash string, _ Engine) []error {
	if err := worktree.MoveAside(b.env.Repo.CommonDir, b.rec.Worktree, trash); err != nil {
		return []error{err}
	}
	return nil
}
