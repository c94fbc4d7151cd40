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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
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

// Snapshotter takes snapshots of one sandbox.
type Snapshotter struct {
	// CommonDir is the user's repository.
	CommonDir string
	// Branch is the sandbox branch.
	Branch string
	// Worktree is the sandbox worktree.
	Worktree string
	// Index is the private index file; Scratch the configuration-free git
	// directory; Lock serialises snapshots of this sandbox.
	Index, Scratch, Lock string
	// ExcludesFile is the user's core.excludesFile (from their trusted
	// config), honoured so what they always ignore stays out; may be "".
	ExcludesFile string
	// AgentGitDir is the agent's private git directory: the paths its
	// index tracks are snapshotted even when ignored (git add -f). Read
	// with plain file reads only; may be "".
	AgentGitDir string
	// MaxFileSize, when positive, leaves out untracked files larger than
	// this many bytes (judged by their size on disk, before anything is
	// read, so a sparse file of many gigabytes costs nothing). Files the
	// agent tracks are always kept.
	MaxFileSize int64
	// Quarantine is the directory where the git directories of nested
	// repositories are kept while the agent is not running
	// (worktree.Quarantine); "" for none. A snapshot taken meanwhile
	// records each such repository as it did with its .git in place:
	// its directory left as the private index has it, its commit as a
	// gitlink.
	Quarantine string
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
	// AgentHead returns the agent's current HEAD commit ("" if none); may
	// be nil.
	AgentHead func() string
	// Freeze, when set, stops the agent from changing the worktree while
	// its files are read (a running container is paused), and returns the
	// function that lets it go on. Without it, an agent swapping a
	// directory for a symlink at the right moment could make the host read
	// a file outside the worktree into the object store, which the agent
	// can read.
	Freeze func(ctx context.Context) (func(), error)
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Remote, when set, takes the worktree's tree somewhere else (a
	// sandbox whose files live on a remote engine): it is given the tree
	// of the newest snapshot ("" when none) and returns the new tree, whose
	// objects it has put into the user's store after checking them.
	// Worktree, Index and Freeze are then unused.
	Remote func(ctx context.Context, prevTree string) (*RemoteTree, error)
	// RemoteCheckout, with Remote, changes the worktree elsewhere from
	// tree from to tree to (Checkout).
	RemoteCheckout func(ctx context.Context, from, to string) error
}

// RemoteTree is what a snapshot taken elsewhere (Snapshotter.Remote)
// brought back.
type RemoteTree struct {
	// Tree is the worktree's tree, in the user's store.
	Tree string
	// AddErrors is what git add said; the paths it could not store are
	// read from it.
	AddErrors string
	// TooLarge are the untracked files left out for their size.
	TooLarge []LargeFile
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
	// Nested are nested repositories in the worktree that the agent does
	// not track as submodules: their files are in no snapshot (a gitlink
	// at most), and a git run in them reads their configuration.
	Nested []string `json:"nested,omitempty"`
	// Ref is the chain ref the snapshot was found through (list only).
	Ref string `json:"ref,omitempty"`
}

// LargeFile is a file left out of a snapshot for its size.
type LargeFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// added is what staging the worktree left out.
type added struct {
	skipped     []string
	tooLarge    []LargeFile
	inSubmodule []string
	nested      []string
}

// tracked is what the agent tracks (its index and HEAD). When complete is
// false only the gitlinks are known (of the start commit, before the
// agent's repository exists).
type tracked struct {
	entries  []agentrepo.IndexEntry
	complete bool
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

// isolated is the configuration-free git that reads the worktree.
func (s *Snapshotter) isolated() *gitcmd.Runner {
	excludes := s.ExcludesFile
	if excludes == "" {
		excludes = "/dev/null"
	}
	return &gitcmd.Runner{
		GitDir:    s.Scratch,
		WorkTree:  s.Worktree,
		IndexFile: s.Index,
		ObjectDir: filepath.Join(s.CommonDir, "objects"),
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

// ensureScratch creates the scratch git directory, copying the
// repository's info/exclude (trusted: it is the user's) into it.
func (s *Snapshotter) ensureScratch() error {
	if _, err := os.Stat(filepath.Join(s.Scratch, "HEAD")); err == nil {
		return nil
	}
	for _, d := range []string{"objects", "refs", "info"} {
		if err := os.MkdirAll(filepath.Join(s.Scratch, d), 0o700); err != nil {
			return err
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.CommonDir, "info", "exclude")); err == nil {
		if err := os.WriteFile(filepath.Join(s.Scratch, "info", "exclude"), b, 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(s.Scratch, "HEAD"), []byte("ref: refs/heads/snapshot\n"), 0o600)
}

// SeedIndex copies an index (the worktree's own, just after checkout) as
// the private index, so the first snapshot only hashes what differs. Its
// gitlinks (the user's submodules) are removed before the first add.
func (s *Snapshotter) SeedIndex(from string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("seed snapshot index: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.Index), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(s.Index, b, 0o600); err != nil {
		return err
	}
	return os.WriteFile(s.gitlinksMarker(), nil, 0o600)
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
	lock := record.Lock
	if reason == ReasonInterval {
		lock = record.TryLock
	}
	unlock, err := lock(s.Lock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if reason == ReasonInterval && s.Budget > 0 {
		if used := ReadUsage(s.Usage); used >= s.Budget {
			return nil, &BudgetSpent{Used: used, Budget: s.Budget}
		}
	}
	if s.Remote != nil {
		return s.takeRemote(ctx, reason)
	}
	if err := s.ensureScratch(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if _, err := os.Lstat(s.Worktree); err != nil {
		return nil, fmt.Errorf("snapshot: worktree %s: %w", s.Worktree, err)
	}
	g := s.isolated()
	head := ""
	if s.AgentHead != nil {
		head = s.AgentHead()
	}
	left, thawed, err := s.addFrozen(ctx, g, s.agentTracked(ctx, head))
	defer thawed()
	if err != nil {
		return nil, err
	}
	tree, err := g.Output(ctx, "write-tree")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	refs := Refs{s.Branch}
	isBaseline := reason == ReasonStart || reason == ReasonSetup
	prev, prevTree := s.current(ctx, refs.Rescue())
	if reason != ReasonStart && prev != "" && prevTree.String() == tree {
		snap, err := Read(ctx, s.host(), prev.String())
		if err != nil {
			return nil, err
		}
		// Same files and same facts about them: nothing to write. A moved
		// baseline (land --keep) or a different set of skipped paths makes
		// a new commit of the same tree, so what ps and rm read stays true.
		if slices.Equal(snap.Skipped, left.skipped) && slices.Equal(snap.TooLarge, left.tooLarge) && slices.Equal(snap.InSubmodule, left.inSubmodule) && slices.Equal(snap.Nested, left.nested) && (isBaseline || snap.Baseline == s.Baseline) {
			return &Taken{Snapshot: *snap}, nil
		}
	}
	if reason == ReasonStart {
		prev, prevTree = "", "" // a new chain (an ended one was moved aside at start)
	}
	t, err := s.write(ctx, reason, tree, prev, left, head)
	if err == nil {
		s.charge(ctx, prevTree.String(), tree)
	}
	return t, err
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

// charge adds to the usage file the sizes of the blobs tree has that the
// tree before it (the previous snapshot's, or the start commit's) lacks:
// what this snapshot wrote, at most. Sizes come from the object headers
// of the user's store; nothing is read whole. A failure counts nothing.
func (s *Snapshotter) charge(ctx context.Context, before, tree string) {
	if s.Usage == "" {
		return
	}
	if before == "" {
		if s.Start == "" {
			return
		}
		before = s.Start + "^{tree}"
	}
	out, err := s.host().Run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--diff-filter=AMT", before, tree)
	if err != nil {
		return
	}
	var ids bytes.Buffer
	recs := gitcmd.SplitLines(out)
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(recs[i])
		if len(f) == 5 && f[1] != "160000" {
			ids.WriteString(f[3] + "\n")
		}
	}
	if ids.Len() == 0 {
		return
	}
	sizes, err := s.host().Run(ctx, &ids, "cat-file", "--batch-check=%(objectsize)")
	if err != nil {
		return
	}
	var n int64
	for _, l := range strings.Fields(string(sizes)) {
		v, _ := strconv.ParseInt(l, 10, 64)
		n += v
	}
	_ = os.WriteFile(s.Usage, []byte(strconv.FormatInt(ReadUsage(s.Usage)+n, 10)+"\n"), 0o600)
}

// takeRemote is Take for a worktree read elsewhere (Remote).
func (s *Snapshotter) takeRemote(ctx context.Context, reason Reason) (*Taken, error) {
	// The host's scratch directory still writes the commit.
	if err := s.ensureScratch(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	refs := Refs{s.Branch}
	prev, prevTree := s.current(ctx, refs.Rescue())
	rt, err := s.Remote(ctx, prevTree.String())
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	tree := rt.Tree
	large := slices.Clone(rt.TooLarge)
	slices.SortFunc(large, func(a, b LargeFile) int { return strings.Compare(a.Path, b.Path) })
	left := added{skipped: refusedPaths(rt.AddErrors), tooLarge: large}
	isBaseline := reason == ReasonStart || reason == ReasonSetup
	if reason != ReasonStart && prev != "" && prevTree.String() == tree {
		snap, err := Read(ctx, s.host(), prev.String())
		if err != nil {
			return nil, err
		}
		if slices.Equal(snap.Skipped, left.skipped) && slices.Equal(snap.TooLarge, left.tooLarge) && len(snap.InSubmodule) == 0 && (isBaseline || snap.Baseline == s.Baseline) {
			return &Taken{Snapshot: *snap}, nil
		}
	}
	if reason == ReasonStart {
		prev, prevTree = "", ""
	}
	head := ""
	if s.AgentHead != nil {
		head = s.AgentHead()
	}
	t, err := s.write(ctx, reason, tree, prev, left, head)
	if err == nil {
		s.charge(ctx, prevTree.String(), tree)
	}
	return t, err
}

// write commits tree as a snapshot whose first parent is prev (the start
// commit when prev is ""), and moves the chain's ref to it.
func (s *Snapshotter) write(ctx context.Context, reason Reason, tree string, prev gitcmd.Hash, left added, head string) (*Taken, error) {
	refs := Refs{s.Branch}
	isBaseline := reason == ReasonStart || reason == ReasonSetup
	now := s.now()
	snap := Snapshot{Tree: tree, Branch: s.Branch, Time: now, Reason: reason, Start: s.Start, Skipped: left.skipped, TooLarge: left.tooLarge, InSubmodule: left.inSubmodule, Nested: left.nested, Head: head}
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
		n, err := countChanges(ctx, s.host(), snap.Baseline, tree)
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
	return s.write(ctx, reason, tree.String(), prev, added{skipped: old.Skipped, tooLarge: old.TooLarge, inSubmodule: old.InSubmodule, nested: old.Nested}, old.Head)
}

// addFrozen stages the worktree while the agent is frozen. The agent is
// thawed as soon as git add is done, in the background; the returned
// function waits for that, so the snapshot's other steps overlap it.
func (s *Snapshotter) addFrozen(ctx context.Context, g *gitcmd.Runner, tr tracked) (added, func(), error) {
	noop := func() {}
	if err := s.stripGitlinks(ctx, g); err != nil {
		return added{}, noop, err
	}
	if s.Freeze == nil {
		left, err := s.addAll(ctx, g, tr)
		return left, noop, err
	}
	thaw, err := s.Freeze(ctx)
	if err != nil {
		return added{}, noop, fmt.Errorf("snapshot: %w", err)
	}
	left, err := s.addAll(ctx, g, tr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		thaw()
	}()
	return left, func() { <-done }, err
}

// gitlinksMarker is a file next to the private index that says the last
// snapshot recorded nested repositories (gitlinks).
func (s *Snapshotter) gitlinksMarker() string { return s.Index + ".gitlinks" }

// stripGitlinks removes gitlinks from the private index before git add:
// for a gitlink already in the index, git add asks whether that nested
// repository is modified by running git status inside it, and that git
// reads the nested repository's own config, which the agent wrote. For a
// directory not yet in the index git add only reads its HEAD.
func (s *Snapshotter) stripGitlinks(ctx context.Context, g *gitcmd.Runner) error {
	if _, err := os.Stat(s.gitlinksMarker()); err != nil {
		return nil
	}
	if err := worktree.StripGitlinks(ctx, g); err != nil {
		return err
	}
	return os.Remove(s.gitlinksMarker())
}

// addAll stages the whole worktree into the private index. Paths git
// refuses to store (a .GIT directory, unreadable files) are skipped and
// returned, so one hostile file cannot stop every later snapshot. Paths the
// agent tracks are staged even when ignored, as git add -f staged them.
func (s *Snapshotter) addAll(ctx context.Context, g *gitcmd.Runner, tr tracked) (added, error) {
	var quarantined []worktree.Nested
	if s.Quarantine != "" {
		q, err := worktree.Quarantined(s.Quarantine)
		if err != nil {
			return added{}, fmt.Errorf("snapshot: %w", err)
		}
		quarantined = q
	}
	large, err := s.tooLarge(ctx, g, tr, quarantined)
	if err != nil {
		return added{}, err
	}
	spec := bytes.NewBufferString(".\x00")
	for _, f := range large {
		spec.WriteString(":(exclude,literal)" + f.Path + "\x00")
	}
	// A quarantined repository's directory (or a bare layout's HEAD) is
	// left as the private index has it.
	excl, err := s.notIgnored(ctx, g, quarantined)
	if err != nil {
		return added{}, err
	}
	for _, p := range excl {
		spec.WriteString(":(exclude,literal)" + p + "\x00")
	}
	_, stderr, err := g.RunFull(ctx, spec, "add", "--all", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul")
	if strings.Contains(string(stderr), "adding embedded git repository") {
		if werr := os.WriteFile(s.gitlinksMarker(), nil, 0o600); werr != nil {
			return added{}, fmt.Errorf("snapshot: %w", werr)
		}
	}
	skipped, err := skippedPaths(err)
	if err != nil {
		return added{}, err
	}
	// A quarantined repository without a commit is what git add refused
	// with its .git in place (unless it is ignored: git add never saw it).
	for _, q := range quarantined {
		if !q.Bare && q.Gitlink == "" && slices.Contains(excl, q.Repo()) {
			skipped = append(skipped, q.Repo())
		}
	}
	more, err := s.addForced(ctx, g, tr.entries, large)
	if err != nil {
		return added{}, err
	}
	if err := s.addQuarantinedGitlinks(ctx, g, quarantined); err != nil {
		return added{}, err
	}
	inSub, err := s.addGitlinks(ctx, g, tr.entries)
	nested := nestedRepos(string(stderr), quarantined, excl, tr.entries)
	return added{skipped: append(skipped, more...), tooLarge: large, inSubmodule: inSub, nested: nested}, err
}

// notIgnored returns the paths of the quarantined entries that are not
// ignored: git add --all never enters an ignored directory, and an
// exclude pathspec naming one makes it fail ("paths are ignored").
func (s *Snapshotter) notIgnored(ctx context.Context, g *gitcmd.Runner, quarantined []worktree.Nested) ([]string, error) {
	if len(quarantined) == 0 {
		return nil, nil
	}
	var in bytes.Buffer
	for _, q := range quarantined {
		in.WriteString(quarantinedPath(q) + "\x00")
	}
	// check-ignore takes no pathspec magic; it answers for each name given.
	out, err := g.Run(ctx, &in, "check-ignore", "-z", "--stdin")
	var ge *gitcmd.Error
	if err != nil && !(errors.As(err, &ge) && ge.Code == 1) {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	ignored := map[string]bool{}
	for _, p := range gitcmd.SplitLines(out) {
		ignored[p] = true
	}
	var keep []string
	for _, q := range quarantined {
		if p := quarantinedPath(q); !ignored[p] {
			keep = append(keep, p)
		}
	}
	return keep, nil
}

// quarantinedPath is what a snapshot leaves as the private index has it
// for a quarantined entry: a nested repository's directory, a bare
// layout's HEAD.
func quarantinedPath(q worktree.Nested) string {
	if q.Bare {
		return q.Path
	}
	return q.Repo()
}

// addQuarantinedGitlinks records the commit of each quarantined nested
// repository that had one, as git add recorded it with its .git in place.
func (s *Snapshotter) addQuarantinedGitlinks(ctx context.Context, g *gitcmd.Runner, quarantined []worktree.Nested) error {
	var add bytes.Buffer
	for _, q := range quarantined {
		if !q.Bare && q.Gitlink != "" && agentrepo.CheckPath(q.Repo()) == nil {
			fmt.Fprintf(&add, "160000 %s 0\t%s\x00", q.Gitlink, q.Repo())
		}
	}
	if add.Len() == 0 {
		return nil
	}
	if _, err := g.Run(ctx, &add, "update-index", "-z", "--index-info"); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := os.WriteFile(s.gitlinksMarker(), nil, 0o600); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// nestedRepos lists the nested repositories a snapshot met: those git add
// recorded as embedded (a gitlink), those it refused for having no
// commit, and the quarantined ones it would have met (not ignored);
// submodules the agent tracks are not counted (their files belong to
// their own repository).
func nestedRepos(stderr string, quarantined []worktree.Nested, notIgnored []string, tracked []agentrepo.IndexEntry) []string {
	sub := map[string]bool{}
	for _, e := range tracked {
		if e.Mode == "160000" {
			sub[e.Path] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		p = strings.TrimSuffix(p, "/")
		if p != "" && !sub[p] && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, line := range strings.Split(stderr, "\n") {
		if p, ok := strings.CutPrefix(line, "warning: adding embedded git repository: "); ok {
			add(p)
		}
		if p, ok := strings.CutPrefix(line, "error: '"); ok {
			if p, ok := strings.CutSuffix(p, "' does not have a commit checked out"); ok {
				add(p)
			}
		}
	}
	for _, q := range quarantined {
		if !q.Bare && slices.Contains(notIgnored, q.Repo()) {
			add(q.Repo())
		}
	}
	slices.Sort(out)
	return out
}

// IndexedGitlinks returns the gitlinks of the private index (what the last
// snapshot recorded for nested repositories and submodules), by path.
func (s *Snapshotter) IndexedGitlinks(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if _, err := os.Stat(s.Index); err != nil {
		return out, nil
	}
	b, err := s.isolated().Run(ctx, nil, "ls-files", "-z", "--stage")
	if err != nil {
		return nil, fmt.Errorf("read the snapshot index: %w", err)
	}
	for _, rec := range gitcmd.SplitLines(b) {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if ok && len(f) == 3 && f[0] == "160000" {
			out[p] = f[1]
		}
	}
	return out, nil
}

// addGitlinks puts the agent's gitlinks (its submodules' commits) into
// the private index exactly as it tracks them, without any git entering
// the submodule. Whatever git add put at or under such a path is dropped
// first; the paths where that was files the agent wrote are returned.
func (s *Snapshotter) addGitlinks(ctx context.Context, g *gitcmd.Runner, entries []agentrepo.IndexEntry) ([]string, error) {
	var links []agentrepo.IndexEntry
	for _, e := range entries {
		if e.Mode == "160000" {
			links = append(links, e)
		}
	}
	if len(links) == 0 {
		return nil, nil
	}
	out, err := g.Run(ctx, nil, "ls-files", "-z", "--stage")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var indexed []string
	for _, rec := range gitcmd.SplitLines(out) {
		if _, p, ok := strings.Cut(rec, "\t"); ok {
			indexed = append(indexed, p)
		}
	}
	var drop, add bytes.Buffer
	var inSub []string
	for _, l := range links {
		wrote := false
		for _, p := range indexed {
			if p == l.Path {
				drop.WriteString(p + "\x00")
			} else if strings.HasPrefix(p, l.Path+"/") {
				drop.WriteString(p + "\x00")
				wrote = true
			}
		}
		if wrote {
			inSub = append(inSub, l.Path)
		}
		fmt.Fprintf(&add, "160000 %s 0\t%s\x00", l.ID, l.Path)
	}
	if drop.Len() > 0 {
		if _, err := g.Run(ctx, &drop, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	if _, err := g.Run(ctx, &add, "update-index", "-z", "--index-info"); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	// The next snapshot strips them before git add looks at the worktree.
	if err := os.WriteFile(s.gitlinksMarker(), nil, 0o600); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	slices.Sort(inSub)
	return inSub, nil
}

// tooLarge finds the untracked files larger than MaxFileSize — those the
// private index lacks, and those an earlier snapshot took that the agent
// does not track — and drops the latter from the private index. Sizes come
// from lstat: no file is opened.
func (s *Snapshotter) tooLarge(ctx context.Context, g *gitcmd.Runner, tr tracked, quarantined []worktree.Nested) ([]LargeFile, error) {
	if s.MaxFileSize <= 0 {
		return nil, nil
	}
	out, err := g.Run(ctx, nil, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	candidates := gitcmd.SplitLines(out)
	var inIndex map[string]bool
	agent := map[string]bool{}
	if tr.complete {
		// Without the agent's list, every indexed file counts as tracked.
		for _, e := range tr.entries {
			agent[e.Path] = true
		}
		out, err := g.Run(ctx, nil, "ls-files", "-z", "--cached")
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		inIndex = map[string]bool{}
		for _, p := range gitcmd.SplitLines(out) {
			if !agent[p] {
				inIndex[p] = true
				candidates = append(candidates, p)
			}
		}
	}
	var large []LargeFile
	var drop bytes.Buffer
	for _, p := range candidates {
		// What the agent tracks is judged below (untracked by the
		// private index only because no snapshot took it yet).
		if agent[p] || underQuarantine(p, quarantined) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.Worktree, p))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() <= s.MaxFileSize {
			continue
		}
		large = append(large, LargeFile{Path: p, Size: fi.Size()})
		if inIndex[p] {
			drop.WriteString(p + "\x00")
		}
	}
	// A file the agent tracks is kept whatever its size, unless it is
	// sparse: a few blocks on disk that git would read (and hash, with the
	// agent paused) at their full size on every snapshot that finds them
	// touched.
	listed := map[string]bool{}
	for _, f := range large {
		listed[f.Path] = true
	}
	for _, e := range tr.entries {
		if e.Mode == "160000" || listed[e.Path] || underQuarantine(e.Path, quarantined) || agentrepo.CheckPath(e.Path) != nil {
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.Worktree, e.Path))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() <= s.MaxFileSize || !sparse(fi) {
			continue
		}
		large = append(large, LargeFile{Path: e.Path, Size: fi.Size()})
		drop.WriteString(e.Path + "\x00")
	}
	if drop.Len() > 0 {
		if _, err := g.Run(ctx, &drop, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	slices.SortFunc(large, func(a, b LargeFile) int { return strings.Compare(a.Path, b.Path) })
	return large, nil
}

// sparse reports whether a file has less than half of its size allocated
// on disk (holes, or a file system that compresses).
func sparse(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Blocks*512 < fi.Size()/2
}

// underQuarantine reports whether p is a path a snapshot leaves alone
// because of a quarantined entry.
func underQuarantine(p string, quarantined []worktree.Nested) bool {
	for _, q := range quarantined {
		qp := quarantinedPath(q)
		if p == qp || strings.HasPrefix(p, qp+"/") {
			return true
		}
	}
	return false
}

// skippedPaths returns the paths a git add --ignore-errors could not
// store, or its error when it failed otherwise.
func skippedPaths(err error) ([]string, error) {
	if err == nil {
		return nil, nil
	}
	var ge *gitcmd.Error
	if !errors.As(err, &ge) || ge.Code != 1 {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	skipped := refusedPaths(ge.Stderr)
	if len(skipped) == 0 {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return skipped, nil
}

// refusedPaths reads, from git add's errors, the paths it could not add:
// names git refuses (.GIT), unreadable files, a tracked file replaced by
// something that is no file (a FIFO, a socket, a device), a nested
// repository with no commit.
func refusedPaths(stderr string) []string {
	var skipped []string
	for _, line := range strings.Split(stderr, "\n") {
		for _, pre := range []string{"error: unable to add '", "error: unable to index file '"} {
			if p, ok := strings.CutPrefix(line, pre); ok {
				skipped = append(skipped, strings.TrimSuffix(strings.TrimSuffix(p, "' to index"), "'"))
			}
		}
		if p, ok := strings.CutPrefix(line, "error: "); ok {
			if p, ok := strings.CutSuffix(p, ": can only add regular files, symbolic links or git-directories"); ok {
				skipped = append(skipped, p)
			}
		}
		if p, ok := strings.CutPrefix(line, "error: '"); ok {
			if p, ok := strings.CutSuffix(p, "' does not have a commit checked out"); ok {
				skipped = append(skipped, strings.TrimSuffix(p, "/"))
			}
		}
	}
	return skipped
}

// agentTracked lists what the agent tracks: its index, and the tree of
// its HEAD when that commit is in the user's store (checked by sync). The
// index wins where both name a path. Before the agent's repository exists
// (the baseline) only the start commit's gitlinks are known.
func (s *Snapshotter) agentTracked(ctx context.Context, head string) tracked {
	var out []agentrepo.IndexEntry
	seen := map[string]bool{}
	if s.AgentGitDir == "" {
		if s.Start == "" {
			return tracked{}
		}
		for _, e := range s.treeEntries(ctx, s.Start) {
			if e.Mode == "160000" {
				out = append(out, e)
			}
		}
		return tracked{entries: out}
	}
	entries, _ := agentrepo.Index(s.AgentGitDir)
	for _, e := range entries {
		seen[e.Path] = true
		out = append(out, e)
	}
	if head == "" || !s.hasCommit(ctx, head) {
		return tracked{entries: out, complete: len(out) > 0}
	}
	for _, e := range s.treeEntries(ctx, head) {
		if !seen[e.Path] {
			seen[e.Path] = true
			out = append(out, e)
		}
	}
	return tracked{entries: out, complete: len(out) > 0}
}

// treeEntries lists a commit's tree from the user's store, every path
// checked.
func (s *Snapshotter) treeEntries(ctx context.Context, commit string) []agentrepo.IndexEntry {
	b, err := s.host().Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return nil
	}
	var out []agentrepo.IndexEntry
	for _, rec := range gitcmd.SplitLines(b) {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || agentrepo.CheckPath(p) != nil {
			continue
		}
		out = append(out, agentrepo.IndexEntry{Path: p, Mode: f[0], ID: f[2]})
	}
	return out
}

// addForced stages the files the agent tracks that git add --all left
// out because they are ignored (the agent's git add -f). Only regular
// files and symlinks whose every parent is a real directory of the
// worktree are added.
func (s *Snapshotter) addForced(ctx context.Context, g *gitcmd.Runner, entries []agentrepo.IndexEntry, large []LargeFile) ([]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	left := map[string]bool{}
	for _, f := range large {
		left[f.Path] = true
	}
	out, err := g.Run(ctx, nil, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	have := map[string]bool{}
	for _, p := range gitcmd.SplitLines(out) {
		have[p] = true
	}
	var list bytes.Buffer
	for _, e := range entries {
		if e.Mode == "160000" || have[e.Path] || left[e.Path] || !plainFileIn(s.Worktree, e.Path) {
			continue
		}
		list.WriteString(e.Path)
		list.WriteByte(0)
	}
	if list.Len() == 0 {
		return nil, nil
	}
	lit := *g
	lit.Env = append(slices.Clip(g.Env), "GIT_LITERAL_PATHSPECS=1")
	_, err = lit.Run(ctx, &list, "add", "--force", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul")
	return skippedPaths(err)
}

// plainFileIn reports whether rel is a regular file or a symlink in dir
// with no symlink among its parents.
func plainFileIn(dir, rel string) bool {
	parts := strings.Split(rel, "/")
	p := dir
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return false
		}
		if i == len(parts)-1 {
			return fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0
		}
	}
	return false
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
