package rescue

// The worktree on this machine as a Source: staged through the private
// index by the configuration-free git, with the agent frozen while its
// files are read.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Local is a worktree on this machine, read through a private index by
// the configuration-free git of a scratch directory.
type Local struct {
	// CommonDir is the user's repository; Start the commit the sandbox
	// began at.
	CommonDir, Start string
	// Worktree is the sandbox worktree.
	Worktree string
	// Index is the private index file; Scratch the configuration-free git
	// directory.
	Index, Scratch string
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
	// Freeze, when set, stops the agent from changing the worktree while
	// its files are read (a running container is paused), and returns the
	// function that lets it go on. Without it, an agent swapping a
	// directory for a symlink at the right moment could make the host read
	// a file outside the worktree into the object store, which the agent
	// can read.
	Freeze func(ctx context.Context) (func(), error)
	// Watch, when set, is a watcher of the worktree: a snapshot looks at
	// the paths it saw change only, and one with nothing changed reads
	// nothing (see watched.go).
	Watch Watcher

	// pending is the watcher's token this Read will leave for the next.
	pending string
	// reason is why the snapshot being taken is taken, and counting what
	// its change count starts from (Snapshotter).
	reason   Reason
	counting counting
	// seeded is the commit SeedIndex said the index and worktree hold,
	// until the next Read.
	seeded string
}

var _ Source = (*Local)(nil)

// added is what staging the worktree left out.
type added struct {
	skipped     []string
	tooLarge    []LargeFile
	inSubmodule []string
	nested      []string
	// stderr is what git add said (its warnings name nested repositories).
	stderr string
	// staged is set when the private index may have changed.
	staged bool
	// tree is the tree when it was written without the index (quick.go),
	// lag set when the index does not hold it.
	tree  string
	lag   bool
	delta *delta
}

// Read stages what changed in the worktree into the private index while
// the agent is frozen, and writes its tree. Right after SeedIndex with a
// commit, it answers that commit's tree without reading anything.
func (s *Local) Read(ctx context.Context, prevTree, head string) (*Tree, error) {
	if err := ensureScratch(s.CommonDir, s.Scratch); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if _, err := os.Lstat(s.Worktree); errors.Is(err, os.ErrNotExist) {
		return nil, &WorktreeGoneError{Path: s.Worktree}
	} else if err != nil {
		return nil, fmt.Errorf("snapshot: worktree %s: %w", s.Worktree, err)
	}
	if seeded := s.takeSeed(); seeded != "" {
		tree, err := s.host().Output(ctx, "rev-parse", "--verify", "--end-of-options", seeded+"^{tree}")
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		return &Tree{ID: tree}, nil
	}
	g := s.isolated()
	s.pending = ""
	if s.watcher() == nil {
		// Written without a watcher, the private index no longer carries
		// the last watched snapshot's token.
		s.forgetToken()
	}
	v, err := s.agentView(ctx, head)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	left, thawed, err := s.addFrozen(ctx, g, v)
	if err != nil {
		thawed()
		return nil, err
	}
	tree := v.Tree
	switch {
	case left.tree != "":
		tree = left.tree // written without the index, which keeps v.Tree
	case left.staged || tree == "":
		tree, err = g.Output(ctx, "write-tree")
		v.Tree = tree
	}
	if err == nil {
		err = s.saveView(v)
	}
	if err == nil {
		err = s.saveState(left, tree)
	}
	if err != nil {
		thawed()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &Tree{ID: tree, Skipped: left.skipped, TooLarge: left.tooLarge, InSubmodule: left.inSubmodule, Nested: left.nested, Done: thawed, delta: left.delta}, nil
}

// isolated is the configuration-free git that reads the worktree. Its
// private index is split (a shared index of every entry, in the scratch
// directory, and a small index of what changed since): a snapshot's two
// writes of it (update-index, write-tree) then write kilobytes, not the
// whole index. A shared index no longer in use goes after an hour.
//
// With a watcher the index is whole: git's write-tree, told of an
// fsmonitor, writes a new shared index (the whole index again, under a
// new name kept for an hour) every time it writes a split one.
func (s *Local) isolated() *gitcmd.Runner {
	g := isolatedGit(s.CommonDir, s.Scratch, s.Worktree, s.Index, s.ExcludesFile)
	if s.watcher() != nil {
		return g
	}
	g.Config = slices.DeleteFunc(slices.Clone(g.Config), func(c string) bool { return c == "core.splitIndex=false" })
	g.Config = append(g.Config, "core.splitIndex=true", "splitIndex.sharedIndexExpire=1.hour.ago")
	return g
}

func (s *Local) host() *gitcmd.Runner { return &gitcmd.Runner{GitDir: s.CommonDir} }

func (s *Local) hasCommit(ctx context.Context, id string) bool {
	_, err := s.host().Run(ctx, nil, "cat-file", "-e", id+"^{commit}")
	return err == nil
}

// tracked is what the agent tracks (its index and HEAD). When complete is
// false only the gitlinks are known (of the start commit, before the
// agent's repository exists).
type tracked struct {
	entries  []agentrepo.IndexEntry
	complete bool
}

// SeedIndex copies an index (the worktree's own, just after checkout) as
// the private index, so a snapshot only hashes what differs. Its gitlinks
// (the user's submodules) are removed before the first add. When commit is
// not "", the index and the worktree hold exactly that commit (a checkout
// made a moment ago, nothing written since): the next Read answers its
// tree without looking at a file.
func (s *Local) SeedIndex(from, commit string) error {
	s.forgetView()
	s.forgetToken()
	s.seeded = commit
	// The next Read may be another Local's (the workspace is opened
	// again for the baseline): the commit is written down beside the
	// index too, and taken off by that Read.
	if err := writeSeed(SeedMarker(s.Index), commit); err != nil {
		return fmt.Errorf("seed snapshot index: %w", err)
	}
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

// addFrozen stages the worktree while the agent is frozen: the agent is
// paused only while git reads the files. It is thawed as soon as that is
// done, in the background; the returned function waits for that, so the
// snapshot's other steps overlap it.
func (s *Local) addFrozen(ctx context.Context, g *gitcmd.Runner, v *agentView) (added, func(), error) {
	noop := func() {}
	if left, ok := s.unchanged(ctx, v); ok {
		return left, noop, nil
	}
	stripped, err := s.stripGitlinks(ctx, g)
	if err != nil {
		return added{}, noop, err
	}
	if s.Freeze == nil {
		left, err := s.addChanges(ctx, g, v)
		left.staged = left.staged || stripped
		return left, noop, err
	}
	thaw, err := s.Freeze(ctx)
	if err != nil {
		return added{}, noop, fmt.Errorf("snapshot: %w", err)
	}
	left, err := s.addChanges(ctx, g, v)
	left.staged = left.staged || stripped
	done := make(chan struct{})
	go func() {
		defer close(done)
		thaw()
	}()
	return left, func() { <-done }, err
}

// SeedMarker is the file beside a snapshot's index (or, in copy mode,
// where one would be) that names the commit a fresh checkout holds,
// until the next snapshot reads it.
func SeedMarker(index string) string { return index + ".seeded" }

// writeSeed writes commit down at marker ("" takes it off).
func writeSeed(marker, commit string) error {
	if commit == "" {
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(commit), 0o600)
}

// WriteSeed says, at marker, that the worktree holds exactly commit (a
// checkout made a moment ago, nothing written since): the next snapshot
// answers its tree without reading a file.
func WriteSeed(marker, commit string) error { return writeSeed(marker, commit) }

// TakeSeed takes the seed at marker off and returns it if it names start
// (the sandbox's start commit), else "".
func TakeSeed(marker, start string) string {
	b, err := os.ReadFile(marker)
	if err != nil {
		return ""
	}
	_ = os.Remove(marker)
	if start == "" || string(b) != start {
		return ""
	}
	return start
}

// takeSeed is the commit SeedIndex named, once: from this Local, or
// written down beside the index by another.
func (s *Local) takeSeed() string {
	seeded := s.seeded
	s.seeded = ""
	if fromFile := TakeSeed(SeedMarker(s.Index), s.Start); seeded == "" {
		seeded = fromFile
	}
	return seeded
}

// gitlinksMarker is a file next to the private index that says the last
// snapshot recorded nested repositories (gitlinks).
func (s *Local) gitlinksMarker() string { return s.Index + ".gitlinks" }

// stripGitlinks removes gitlinks from the private index before git add:
// for a gitlink already in the index, git add asks whether that nested
// repository is modified by running git status inside it, and that git
// reads the nested repository's own config, which the agent wrote. For a
// directory not yet in the index git add only reads its HEAD.
func (s *Local) stripGitlinks(ctx context.Context, g *gitcmd.Runner) (bool, error) {
	if _, err := os.Stat(s.gitlinksMarker()); err != nil {
		return false, nil
	}
	if err := worktree.StripGitlinks(ctx, g); err != nil {
		return false, err
	}
	return true, os.Remove(s.gitlinksMarker())
}

// addChanges stages into the private index what changed in the worktree.
// Paths git refuses to store (a .GIT directory, unreadable files) are
// skipped and returned, so one hostile file cannot stop every later
// snapshot. Paths the agent tracks are staged even when ignored, as git
// add -f staged them.
func (s *Local) addChanges(ctx context.Context, g *gitcmd.Runner, v *agentView) (added, error) {
	var quarantined []worktree.Nested
	if s.Quarantine != "" {
		q, err := worktree.Quarantined(s.Quarantine)
		if err != nil {
			return added{}, fmt.Errorf("snapshot: %w", err)
		}
		quarantined = q
	}
	c, run, err := s.watchedCandidates(ctx, g, v, quarantined)
	if err != nil {
		return added{}, err
	}
	if run.tree != "" {
		left := added{tree: run.tree, delta: run.delta, lag: true, tooLarge: append(run.large, run.stillLarge(run.large)...)}
		slices.SortFunc(left.tooLarge, func(a, b LargeFile) int { return strings.Compare(a.Path, b.Path) })
		return left, nil
	}
	st := s.plan(c, v, quarantined)
	// The index is written even when nothing in it changed: it carries
	// the watcher's token the hook answers from next time.
	st.forceWrite, st.partial = run.watched, run.partial
	recount := v.fresh || len(c.gone) > 0 || len(st.drop) > 0
	if recount {
		// Missing is found again below; a snapshot that fails before
		// then leaves no stale view behind.
		_ = os.Remove(s.viewFile())
	}
	left, err := s.stage(ctx, g, st, quarantined)
	walked := err
	if errors.Is(err, errWalk) {
		if c, err = findCandidates(ctx, g); err != nil {
			return added{}, err
		}
		st = s.plan(c, v, quarantined)
		st.forceWrite = true
		left, err = s.stage(ctx, g, st, quarantined)
	}
	if err != nil {
		return added{}, err
	}
	excl, err := s.notIgnored(ctx, g, quarantined)
	if err != nil {
		return added{}, err
	}
	for _, p := range RefusedQuarantined(quarantined, excl) {
		if !slices.Contains(left.skipped, p) {
			left.skipped = append(left.skipped, p)
		}
	}
	if recount {
		if err := s.findMissing(ctx, g, v); err != nil {
			return added{}, fmt.Errorf("snapshot: %w", err)
		}
	}
	tried := len(v.Missing) > 0
	more, large, err := s.addMissing(ctx, g, v)
	if err != nil {
		return added{}, err
	}
	left.staged = !c.empty() || len(st.drop) > 0 || tried || len(quarantined) > 0 || len(v.Gitlinks) > 0
	if err := s.addQuarantinedGitlinks(ctx, g, quarantined); err != nil {
		return added{}, err
	}
	inSub, err := s.addGitlinks(ctx, g, v.Gitlinks)
	left.skipped = append(left.skipped, more...)
	left.tooLarge = append(left.tooLarge, large...)
	if run.partial && !errors.Is(walked, errWalk) {
		left.tooLarge = append(left.tooLarge, run.stillLarge(left.tooLarge)...)
	}
	slices.SortFunc(left.tooLarge, func(a, b LargeFile) int { return strings.Compare(a.Path, b.Path) })
	left.inSubmodule = inSub
	left.nested = s.notStartSubmodules(ctx, NestedRepos(left.stderr, quarantined, excl), v.Gitlinks)
	return left, err
}

// notStartSubmodules is nested without the submodules of the user's
// repository checked out at the commit the start commit records (the
// agent tracks the same gitlink): their files are that commit's, not the
// agent's work. A gitlink the agent added or moved stays nested: its
// commit is in no repository but the one in the worktree.
func (s *Local) notStartSubmodules(ctx context.Context, nested []string, tracked []agentrepo.IndexEntry) []string {
	links := map[string]string{}
	var paths []string
	for _, e := range tracked {
		if e.Mode == "160000" && slices.Contains(nested, e.Path) {
			links[e.Path] = e.ID
			paths = append(paths, e.Path)
		}
	}
	if len(paths) == 0 || s.Start == "" {
		return nested
	}
	b, err := s.host().Run(ctx, nil, append([]string{"ls-tree", "-z", "--full-tree", s.Start, "--"}, paths...)...)
	if err != nil {
		return nested
	}
	at := map[string]bool{}
	for _, rec := range gitcmd.SplitLines(b) {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[0] == "160000" && links[p] == f[2] {
			at[p] = true
		}
	}
	return slices.DeleteFunc(nested, func(p string) bool { return at[p] })
}

// notIgnored returns the paths of the quarantined entries that are not
// ignored: git add --all never enters an ignored directory, and an
// exclude pathspec naming one makes it fail ("paths are ignored").
func (s *Local) notIgnored(ctx context.Context, g *gitcmd.Runner, quarantined []worktree.Nested) ([]string, error) {
	if len(quarantined) == 0 {
		return nil, nil
	}
	var in bytes.Buffer
	for _, q := range quarantined {
		in.WriteString(QuarantinedPath(q) + "\x00")
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
		if p := QuarantinedPath(q); !ignored[p] {
			keep = append(keep, p)
		}
	}
	return keep, nil
}

// QuarantinedPath is what a snapshot leaves as the private index has it
// for a quarantined entry: a nested repository's directory, a bare
// layout's HEAD.
func QuarantinedPath(q worktree.Nested) string {
	if q.Bare {
		return q.Path
	}
	return q.Repo()
}

// addQuarantinedGitlinks records the commit of each quarantined nested
// repository that had one, as git add recorded it with its .git in place.
func (s *Local) addQuarantinedGitlinks(ctx context.Context, g *gitcmd.Runner, quarantined []worktree.Nested) error {
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

// RefusedQuarantined are the quarantined repositories a snapshot counts as
// paths git refused: without a commit, git add refused them with their
// .git in place (unless ignored, notIgnored says: git add never saw them).
func RefusedQuarantined(quarantined []worktree.Nested, notIgnored []string) []string {
	var out []string
	for _, q := range quarantined {
		if !q.Bare && q.Gitlink == "" && slices.Contains(notIgnored, q.Repo()) {
			out = append(out, q.Repo())
		}
	}
	return out
}

// NestedRepos lists the nested repositories a snapshot met, wherever the
// worktree was read: those git add recorded as embedded (a gitlink) or
// refused for having no commit, as its complaints (addErrors) say, and the
// quarantined ones it would have met (notIgnored). A gitlink the agent
// tracks counts too when its directory is a repository: the snapshot
// keeps its commit, never its files or history, which go with the
// worktree. (A submodule that is not checked out has no repository there
// and is not met; on this machine, one checked out at the start commit's
// gitlink is left out by notStartSubmodules.)
func NestedRepos(addErrors string, quarantined []worktree.Nested, notIgnored []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		p = strings.TrimSuffix(p, "/")
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, line := range strings.Split(addErrors, "\n") {
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
func (s *Local) IndexedGitlinks(ctx context.Context) (map[string]string, error) {
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
func (s *Local) addGitlinks(ctx context.Context, g *gitcmd.Runner, entries []agentrepo.IndexEntry) ([]string, error) {
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
		qp := QuarantinedPath(q)
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
func (s *Local) agentTracked(ctx context.Context, head string) tracked {
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
func (s *Local) treeEntries(ctx context.Context, commit string) []agentrepo.IndexEntry {
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

// Checkout changes the worktree from tree from (what the last snapshot
// read, and so what the private index holds) to tree to: files that differ
// are written or removed, nothing else is touched. Git refuses, changing
// nothing, when a file it would write changed since. The files are written
// by the configuration-free git, so no filter runs, and git does not
// follow a symlink in a leading path.
func (s *Local) Checkout(ctx context.Context, from, to string) error {
	if err := ensureScratch(s.CommonDir, s.Scratch); err != nil {
		return err
	}
	s.forgetView()
	s.forgetToken()
	// The tree's gitlinks come into the private index: the next snapshot
	// strips them before git add (see stripGitlinks).
	if err := os.WriteFile(s.gitlinksMarker(), nil, 0o600); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	return s.isolated().ReadTree(ctx, gitcmd.ReadTreeRequest{From: from, Tree: to, Update: true})
}

// Elsewhere is what a worktree read elsewhere (by a git add on an
// engine) said besides its tree.
type Elsewhere struct {
	// AddErrors is what git add complained of (the paths it could not
	// store and the nested repositories it met are read from them).
	AddErrors string
	// TooLarge are the untracked files left out for their size.
	TooLarge []LargeFile
	// Quarantined are the nested repositories quarantined meanwhile, and
	// NotIgnored the paths of those no ignore rule covers.
	Quarantined []worktree.Nested
	NotIgnored  []string
	// Submodules are the paths of the agent's own gitlinks (a gitlink
	// whose directory is a repository counts as nested all the same).
	Submodules []string
	// Changes are what differs from tree Base, file by file, when the
	// read listed that (a checked import does): the snapshot's cost and
	// change count come from them instead of diffs of the whole tree.
	Base    string
	Changes []agentrepo.TreeChange
}

// TreeOf is the Tree of a worktree read elsewhere, by the same rules as
// a worktree on this machine.
func TreeOf(id string, x Elsewhere) *Tree {
	large := slices.Clone(x.TooLarge)
	slices.SortFunc(large, func(a, b LargeFile) int { return strings.Compare(a.Path, b.Path) })
	skipped := refusedPaths(x.AddErrors)
	for _, p := range RefusedQuarantined(x.Quarantined, x.NotIgnored) {
		if !slices.Contains(skipped, p) {
			skipped = append(skipped, p)
		}
	}
	nested := NestedRepos(x.AddErrors, x.Quarantined, x.NotIgnored)
	return &Tree{ID: id, Skipped: skipped, TooLarge: large, Nested: nested, delta: listedDelta(x.Base, x.Changes)}
}
