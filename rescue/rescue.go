// Package rescue owns snapshots: commits of a sandbox worktree's whole state
// (tracked, modified and untracked files; not ignored ones), written through
// a private index kept in the state directory into the user's object store
// and chained under refs/sandbox/<branch>/. A snapshot never touches the
// worktree's own index, HEAD or files, so it is safe while the agent works.
//
// The git that takes a snapshot runs in a scratch git directory with no
// system, global or repository configuration: a .gitattributes the agent
// wrote cannot name a filter or driver that runs. The private index
// persists, so an unchanged file is not read again, and an unchanged tree
// writes no commit.
package rescue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Reason says why a snapshot was taken.
type Reason string

// Reasons for snapshots.
const (
	ReasonStart    Reason = "start"
	ReasonSetup    Reason = "setup"
	ReasonInterval Reason = "interval"
	ReasonExit     Reason = "exit"
	ReasonStop     Reason = "stop"
	ReasonLand     Reason = "land"
	ReasonRemove   Reason = "rm"
	ReasonManual   Reason = "manual"
	ReasonRestore  Reason = "restore"
	// ReasonUpdate is taken before and after git sandbox update; the
	// baseline update moves to is written with it too.
	ReasonUpdate Reason = "update"
	// ReasonExec is taken after a command run by exec in a stopped sandbox.
	ReasonExec Reason = "exec"
)

// WhileRunning reports whether a snapshot of this reason is taken while
// the agent runs (not by a command of the user's): an exit found no
// newer than it is still to be recorded as one.
func (r Reason) WhileRunning() bool {
	return r == ReasonInterval || r == ReasonStart || r == ReasonSetup
}

// Trailer keys written into every snapshot's message.
const (
	trailerBranch   = "Sandbox-Branch"
	trailerReason   = "Sandbox-Reason"
	trailerChanges  = "Sandbox-Changes"
	trailerBaseline = "Sandbox-Baseline"
	trailerHead     = "Sandbox-Agent-Head"
	trailerSkipped  = "Sandbox-Skipped"
	trailerTooLarge = "Sandbox-Too-Large"
	trailerInSubmod = "Sandbox-In-Submodule"
	trailerNested   = "Sandbox-Nested"
	trailerStart    = "Sandbox-Start"
)

// RefPrefix is where every sandbox ref lives.
const RefPrefix = "refs/sandbox/"

// Refs names the refs of one sandbox: refs/sandbox/<branch>/…, with the
// branch escaped into one ref component (as the state directory does), so
// the refs of branch "fix" and of branch "fix/rescue" can never collide.
type Refs struct{ Branch string }

func (r Refs) dir() string { return RefPrefix + worktree.EscapeBranch(r.Branch) + "/" }

// Baseline is the snapshot taken at start.
func (r Refs) Baseline() string { return r.dir() + "baseline" }

// Rescue is the newest snapshot.
func (r Refs) Rescue() string { return r.dir() + "rescue" }

// Agent is the agent's commits, brought back as checked objects.
func (r Refs) Agent() string { return r.dir() + "agent" }

// Ended is where an ended sandbox's chain is kept when a new sandbox of
// the same branch starts.
func (r Refs) Ended(stamp string) string { return r.dir() + "ended/" + stamp }

// Snapshotter takes snapshots of one sandbox: it asks its Source for the
// worktree's tree and writes the chain of snapshot commits and refs on
// this machine, wherever the files are.
type Snapshotter struct {
	// CommonDir is the user's repository.
	CommonDir string
	// Branch is the sandbox branch.
	Branch string
	// Scratch is the configuration-free git directory snapshot commits
	// are written through; Lock serialises snapshots of this sandbox.
	Scratch, Lock string
	// Source reads the worktree: Local for files on this machine, another
	// for files elsewhere (a remote engine's volume).
	Source Source
	// Budget, when positive, bounds the bytes of the files this sandbox's
	// snapshots write into the object store, counted in the file Usage:
	// once they are spent, interval snapshots are refused (BudgetSpent);
	// those of exit, stop, land, rm and the user's own are still taken,
	// and counted.
	Budget int64
	// Usage is the file counting the bytes snapshots wrote; "" counts
	// nothing.
	Usage string
	// Start is the commit the sandbox branch began at.
	Start string
	// Baseline is the baseline snapshot, "" until it is taken.
	Baseline string
	// Current, when set, says the start and the baseline as they are now;
	// Take asks it under the lock, so a long-lived snapshotter (the
	// supervisor's) sees an update or a land --keep that moved them since
	// it was made. "" keeps what the snapshotter has.
	Current func() (start, baseline string)
	// AgentHead returns the agent's current HEAD commit ("" if none); may
	// be nil.
	AgentHead func() string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Source reads a sandbox's worktree, wherever its files are.
type Source interface {
	// Read stages the worktree and writes its tree into the user's object
	// store (its objects checked when they came from elsewhere). prevTree
	// is the newest snapshot's tree ("" when none), head the agent's HEAD
	// commit ("" when none or not known).
	Read(ctx context.Context, prevTree, head string) (*Tree, error)
	// Checkout changes the worktree from tree from (what the last Read
	// staged) to tree to: files that differ are written or removed, and
	// nothing is changed when a file it would write changed since.
	Checkout(ctx context.Context, from, to string) error
}

// Tree is what a Source read: the worktree's tree and what it left out.
type Tree struct {
	// ID is the worktree's tree, in the user's store.
	ID string
	// Skipped are paths git refused to store.
	Skipped []string
	// TooLarge are the untracked files left out for their size.
	TooLarge []LargeFile
	// InSubmodule are submodule paths the agent wrote files into.
	InSubmodule []string
	// Nested are nested repositories in the worktree (a gitlink the agent
	// tracks included, when its directory is a repository).
	Nested []string
	// Done waits for what Read left running (the agent being let go on);
	// nil when nothing.
	Done func()
	// delta is the change from the tree it was written from, path by
	// path, when the fast way wrote it (nil otherwise).
	delta *delta
}

// Snapshot is one snapshot commit.
type Snapshot struct {
	ID       string    `json:"id"`
	Tree     string    `json:"tree"`
	Branch   string    `json:"branch"`
	Time     time.Time `json:"time"`
	Reason   Reason    `json:"reason"`
	Changes  int       `json:"changes"`
	Baseline string    `json:"baseline"`
	Start    string    `json:"start,omitempty"`
	Head     string    `json:"agent_head,omitempty"`
	// Skipped are worktree paths git refused to store (for example .GIT/x).
	Skipped []string `json:"skipped,omitempty"`
	// TooLarge are untracked files left out for being larger than
	// rescue.max_file_size.
	TooLarge []LargeFile `json:"too_large,omitempty"`
	// InSubmodule are submodule paths (gitlinks) the agent wrote files
	// into; the snapshot keeps the gitlink and leaves those files out.
	InSubmodule []string `json:"in_submodule,omitempty"`
	// Nested are nested repositories in the worktree, a gitlink the agent
	// tracks included when its directory is a repository: their files are
	// in no snapshot (a gitlink at most), and a git run in them reads
	// their configuration.
	Nested []string `json:"nested,omitempty"`
	// Ref is the chain ref the snapshot was found through (list only).
	Ref string `json:"ref,omitempty"`
}

// LargeFile is a file left out of a snapshot for its size.
type LargeFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Taken is the result of Take.
type Taken struct {
	Snapshot
	// New is false when the tree was unchanged and no commit was written.
	New bool
}

func (s *Snapshotter) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Snapshotter) host() *gitcmd.Runner { return &gitcmd.Runner{GitDir: s.CommonDir} }

// isolatedGit is the configuration-free git of a scratch directory,
// reading worktree (may be "") through index (may be "").
func isolatedGit(commonDir, scratch, worktree, index, excludes string) *gitcmd.Runner {
	if excludes == "" {
		excludes = "/dev/null"
	}
	return &gitcmd.Runner{
		GitDir:    scratch,
		WorkTree:  worktree,
		IndexFile: index,
		ObjectDir: filepath.Join(commonDir, "objects"),
		Isolated:  true,
		Config: []string{
			"core.excludesFile=" + excludes,
			"core.attributesFile=/dev/null",
			"core.symlinks=true",
			"core.fileMode=true",
			"core.ignoreCase=false",
			"core.autocrlf=false",
			"core.safecrlf=false",
			"core.checkStat=default",
			"core.splitIndex=false",
			"index.skipHash=false",
			"gc.auto=0",
			"maintenance.auto=false",
		},
	}
}

// isolated is the configuration-free git that writes snapshot commits.
func (s *Snapshotter) isolated() *gitcmd.Runner {
	return isolatedGit(s.CommonDir, s.Scratch, "", "", "")
}

// ensureScratch creates the scratch git directory, copying the
// repository's info/exclude (trusted: it is the user's) into it.
func ensureScratch(commonDir, scratch string) error {
	if _, err := os.Stat(filepath.Join(scratch, "HEAD")); err == nil {
		return nil
	}
	for _, d := range []string{"objects", "refs", "info"} {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o700); err != nil {
			return err
		}
	}
	if b, err := os.ReadFile(filepath.Join(commonDir, "info", "exclude")); err == nil {
		if err := os.WriteFile(filepath.Join(scratch, "info", "exclude"), b, 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(scratch, "HEAD"), []byte("ref: refs/heads/snapshot\n"), 0o600)
}

// Take snapshots the worktree. An unchanged tree writes nothing and returns
// the previous snapshot with New false (except for the baseline, which is
// always written).
//
// An interval snapshot is background work: it takes the sandbox's lock
// only when that is free and no command waits for it, and returns
// record.ErrBusy at once otherwise (the supervisor tries again later).
// Every other reason waits for the lock.
func (s *Snapshotter) Take(ctx context.Context, reason Reason) (*Taken, error) {
	t, err := s.take(ctx, reason)
	if err != nil {
		return nil, NoSpace(err, s.Branch, s.CommonDir, filepath.Dir(s.Scratch))
	}
	return t, nil
}

// take is Take.
func (s *Snapshotter) take(ctx context.Context, reason Reason) (*Taken, error) {
	lock := record.Lock
	if reason == ReasonInterval {
		lock = record.TryLock
	}
	unlock, err := lock(s.Lock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	s.refresh()
	if reason == ReasonInterval && s.Budget > 0 {
		if used := ReadUsage(s.Usage); used >= s.Budget {
			return nil, &BudgetSpent{Used: used, Budget: s.Budget}
		}
	}
	if err := ensureScratch(s.CommonDir, s.Scratch); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	head := ""
	if s.AgentHead != nil {
		head = s.AgentHead()
	}
	refs := Refs{s.Branch}
	prev, prevTree := s.current(ctx, refs.Rescue())
	if l, ok := s.Source.(*Local); ok {
		l.reason = reason
		l.counting = counting{prev: prev.String(), baseline: s.Baseline}
	}
	read, err := s.Source.Read(ctx, prevTree.String(), head)
	if gone, ok := errors.AsType[*WorktreeGoneError](err); ok {
		return nil, s.worktreeGone(gone, prev.String())
	}
	if err != nil {
		return nil, err
	}
	if read.Done != nil {
		defer read.Done()
	}
	isBaseline := reason == ReasonStart || reason == ReasonSetup
	if reason != ReasonStart && prev != "" && prevTree.String() == read.ID {
		snap, err := Read(ctx, s.host(), prev.String())
		if err != nil {
			return nil, err
		}
		// Same files and same facts about them: nothing to write. A moved
		// baseline (land --keep) or a different set of skipped paths makes
		// a new commit of the same tree, so what ps and rm read stays true.
		if sameFacts(snap, read) && (isBaseline || snap.Baseline == s.Baseline) {
			return &Taken{Snapshot: *snap}, nil
		}
	}
	if reason == ReasonStart {
		prev, prevTree = "", "" // a new chain (an ended one was moved aside at start)
	}
	// What the new files cost is read while the snapshot is written: two
	// diffs of the whole tree, one for each, on a machine's two cores.
	var cost int64
	costed := make(chan struct{})
	go func() {
		defer close(costed)
		cost = s.cost(ctx, prevTree.String(), read)
	}()
	t, err := s.write(ctx, reason, read, prev, head)
	<-costed
	if err == nil {
		s.charge(cost)
	}
	return t, err
}

// refresh takes the start and baseline as they are now (Current), into
// the local source too, which reads the worktree against the start.
func (s *Snapshotter) refresh() {
	if s.Current == nil {
		return
	}
	start, baseline := s.Current()
	if baseline != "" {
		s.Baseline = baseline
	}
	if start != "" {
		s.Start = start
		if l, ok := s.Source.(*Local); ok {
			l.Start = start
		}
	}
}

// sameFacts reports whether a snapshot says what a new read says about
// what was left out.
func sameFacts(snap *Snapshot, read *Tree) bool {
	return slices.Equal(snap.Skipped, read.Skipped) && slices.Equal(snap.TooLarge, read.TooLarge) &&
		slices.Equal(snap.InSubmodule, read.InSubmodule) && slices.Equal(snap.Nested, read.Nested)
}

// BudgetSpent is the error of an interval snapshot once the sandbox's
// snapshots have written their budget.
type BudgetSpent struct{ Used, Budget int64 }

func (e *BudgetSpent) Error() string {
	return fmt.Sprintf("snapshots of this sandbox wrote %d bytes, their budget is %d: interval snapshots stop", e.Used, e.Budget)
}

// ReadUsage returns the bytes counted in a usage file (0 when there is
// none).
func ReadUsage(path string) int64 {
	if path == "" {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// cost is the sizes of the blobs tree has that the tree before it (the
// previous snapshot's, or the start commit's) lacks: what this snapshot
// wrote, at most. Sizes come from the object headers of the user's store;
// nothing is read whole. A failure counts nothing; so does a snapshotter
// that counts nothing (Usage "").
func (s *Snapshotter) cost(ctx context.Context, before string, read *Tree) int64 {
	if s.Usage == "" {
		return 0
	}
	if read.delta != nil && before != "" && read.delta.base == before {
		return read.delta.cost()
	}
	if before == read.ID {
		return 0 // the same tree: nothing new
	}
	tree := read.ID
	if before == "" {
		if s.Start == "" {
			return 0
		}
		before = s.Start + "^{tree}"
	}
	out, err := s.host().Run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--diff-filter=AMT", before, tree)
	if err != nil {
		return 0
	}
	var ids []string
	recs := gitcmd.SplitLines(out)
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(recs[i])
		if len(f) == 5 && f[1] != "160000" {
			ids = append(ids, f[3])
		}
	}
	return blobSizes(ctx, s.host(), ids)
}

// charge adds n bytes to the snapshots' usage (Usage).
func (s *Snapshotter) charge(n int64) {
	if s.Usage == "" || n == 0 {
		return
	}
	_ = os.WriteFile(s.Usage, []byte(strconv.FormatInt(ReadUsage(s.Usage)+n, 10)+"\n"), 0o600)
}

// write commits tree as a snapshot whose first parent is prev (the start
// commit when prev is ""), and moves the chain's ref to it.
func (s *Snapshotter) write(ctx context.Context, reason Reason, read *Tree, prev gitcmd.Hash, head string) (*Taken, error) {
	refs := Refs{s.Branch}
	isBaseline := reason == ReasonStart || reason == ReasonSetup
	now := s.now()
	tree := read.ID
	snap := Snapshot{Tree: tree, Branch: s.Branch, Time: now, Reason: reason, Start: s.Start, Skipped: read.Skipped, TooLarge: read.TooLarge, InSubmodule: read.InSubmodule, Nested: read.Nested, Head: head}
	if !isBaseline {
		snap.Baseline = s.Baseline
	}
	var parents []gitcmd.Hash
	if prev != "" {
		parents = append(parents, prev)
	} else if s.Start != "" {
		parents = append(parents, gitcmd.Hash(s.Start))
	}
	// The agent's head becomes a parent only once its objects are in the
	// user's store (brought back by sync, or the user's own commit).
	if head != "" && head != s.Start && s.hasCommit(ctx, head) {
		parents = append(parents, gitcmd.Hash(head))
	}
	if snap.Baseline != "" {
		n, err := s.changes(ctx, snap.Baseline, read, prev)
		if err != nil {
			return nil, err
		}
		snap.Changes = n
	}
	who := &gitcmd.Signature{Name: "git sandbox", Email: "git-sandbox@localhost", When: now.UTC()}
	id, err := s.isolated().CommitTree(ctx, gitcmd.CommitTreeRequest{
		Tree: gitcmd.Hash(tree), Parents: parents, Message: message(snap), Author: who, Committer: who,
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	snap.ID = id.String()
	// The chain moves from the snapshot this one follows; a start begins a
	// new chain (an ended one was moved aside), whatever is there.
	err = s.host().UpdateRef(ctx, gitcmd.UpdateRefRequest{
		Ref: refs.Rescue(), New: id, Old: prev, AnyOld: reason == ReasonStart,
		Message: "git sandbox snapshot: " + string(reason),
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if isBaseline {
		if err := s.host().UpdateRef(ctx, gitcmd.UpdateRefRequest{Ref: refs.Baseline(), New: id, AnyOld: true}); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	return &Taken{Snapshot: snap, New: true}, nil
}

// Restamp writes a new snapshot of the newest snapshot's tree, measured
// against the current Baseline, without reading the worktree: after the
// baseline moved (land --keep), so ps and rm count changes from there.
func (s *Snapshotter) Restamp(ctx context.Context, reason Reason) (*Taken, error) {
	unlock, err := record.Lock(s.Lock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	refs := Refs{s.Branch}
	prev, tree := s.current(ctx, refs.Rescue())
	if prev == "" {
		return nil, fmt.Errorf("restamp: no snapshot yet")
	}
	old, err := Read(ctx, s.host(), prev.String())
	if err != nil {
		return nil, err
	}
	return s.write(ctx, reason, &Tree{ID: tree.String(), Skipped: old.Skipped, TooLarge: old.TooLarge, InSubmodule: old.InSubmodule, Nested: old.Nested}, prev, old.Head)
}

// current returns the chain tip and its tree, or "" when there is none.
func (s *Snapshotter) current(ctx context.Context, ref string) (id, tree gitcmd.Hash) {
	out, err := s.host().RevParseMany(ctx, ref, ref+"^{tree}")
	if err != nil {
		return "", ""
	}
	return out[0], out[1]
}

func (s *Snapshotter) hasCommit(ctx context.Context, id string) bool {
	_, err := s.host().Run(ctx, nil, "cat-file", "-e", id+"^{commit}")
	return err == nil
}

// changes counts the paths of the tree read that differ from the
// baseline's: from its delta and the count of the snapshot prev it
// follows when they tell, else with a diff of the two trees.
func (s *Snapshotter) changes(ctx context.Context, baseline string, read *Tree, prev gitcmd.Hash) (int, error) {
	if read.delta != nil && prev != "" {
		n, ok := changesByDelta(ctx, s.host(), read.delta, prev.String(), baseline)
		if ok {
			return n, nil
		}
	}
	return countChanges(ctx, s.host(), baseline, read.ID)
}

func countChanges(ctx context.Context, g *gitcmd.Runner, from, toTree string) (int, error) {
	out, err := g.Run(ctx, nil, "diff-tree", "-r", "--no-renames", "--name-only", "-z", from+"^{tree}", toTree)
	if err != nil {
		return 0, fmt.Errorf("count changes: %w", err)
	}
	return len(gitcmd.SplitLines(out)), nil
}

func message(s Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "git sandbox snapshot of %s (%s)\n\n", s.Branch, s.Reason)
	fmt.Fprintf(&b, "%s: %s\n", trailerBranch, s.Branch)
	fmt.Fprintf(&b, "%s: %s\n", trailerReason, s.Reason)
	fmt.Fprintf(&b, "%s: %d\n", trailerChanges, s.Changes)
	if s.Baseline != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerBaseline, s.Baseline)
	}
	if s.Start != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerStart, s.Start)
	}
	if s.Head != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerHead, s.Head)
	}
	for _, p := range s.Skipped {
		fmt.Fprintf(&b, "%s: %s\n", trailerSkipped, strconv.Quote(p))
	}
	for _, f := range s.TooLarge {
		fmt.Fprintf(&b, "%s: %d %s\n", trailerTooLarge, f.Size, strconv.Quote(f.Path))
	}
	for _, p := range s.InSubmodule {
		fmt.Fprintf(&b, "%s: %s\n", trailerInSubmod, strconv.Quote(p))
	}
	for _, p := range s.Nested {
		fmt.Fprintf(&b, "%s: %s\n", trailerNested, strconv.Quote(p))
	}
	return b.String()
}

// CheckWorktree refuses, with what is left and how to get it, a sandbox
// whose worktree on this machine was deleted (nil for one that is there,
// or whose files are on an engine).
func (s *Snapshotter) CheckWorktree(ctx context.Context) error {
	l, ok := s.Source.(*Local)
	if !ok {
		return nil
	}
	if _, err := os.Lstat(l.Worktree); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	prev, _ := s.current(ctx, Refs{s.Branch}.Rescue())
	return s.worktreeGone(&WorktreeGoneError{Path: l.Worktree}, prev.String())
}

// WorktreeGoneError is a snapshot's source finding the sandbox's worktree
// deleted.
type WorktreeGoneError struct{ Path string }

func (e *WorktreeGoneError) Error() string { return "snapshot: worktree " + e.Path + " is gone" }

// worktreeGone says what is left of a sandbox whose worktree was deleted:
// its snapshots, newest being newest (a commit id, "" without one).
func (s *Snapshotter) worktreeGone(e *WorktreeGoneError, newest string) error {
	b := termsafe.String(s.Branch)
	ue := usererr.Wrap(e, "the worktree of sandbox %s is gone (%s was deleted)", b, termsafe.String(e.Path))
	if newest != "" {
		ue = ue.Hint("its work up to the newest snapshot is kept: git sandbox rescue restore %s --branch NEW brings it back as a branch", newest[:min(12, len(newest))])
	}
	return ue.Hint("git sandbox rescue list %s lists its snapshots; git sandbox rm --force %s removes what is left", b, b)
}
