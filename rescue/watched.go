package rescue

// A snapshot fed by a watcher of the worktree: the candidates are the
// paths the watcher saw change since the last snapshot, and the git that
// stages them is told the same paths through its fsmonitor hook (protocol
// version 2, on the private index only: core.fsmonitor is set on this
// git's command line, never in a file any other git reads), so it
// lstat()s those entries of the private index and trusts the others.
//
// The token of the last watched snapshot is kept beside the private
// index, and it is the token git stored in that index (every watched
// snapshot writes the index). The hook is a shell function that answers
// from a file written here, for this snapshot only: the paths for the
// token the snapshot started from, nothing for the token it ends at, and
// "/" (everything) for any other token. Whenever the watcher cannot vouch
// for what changed — it lost events, restarted, is not running, a
// nested repository or ignore file changed — the snapshot looks at
// everything as it did before, and refreshes the private index's stat
// data so the next one can trust it again.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Watcher says which paths of the worktree changed since a token.
type Watcher interface {
	Since(ctx context.Context, token string) (Changed, error)
}

// Changed is a watcher's answer.
type Changed struct {
	// Token names the moment of the answer ("" when the watcher cannot
	// vouch for anything).
	Token string
	// All is set when what changed is not known.
	All bool
	// Paths changed since the token asked about; a directory that went
	// away ends with "/".
	Paths []string
}

// maxWatchedPaths: more changed paths than this are looked at with a
// walk of everything, which then costs less than the paths one by one.
const maxWatchedPaths = 50_000

// watchState is what the last watched snapshot leaves for the next,
// beside the private index.
type watchState struct {
	// Token is the watcher's token the snapshot started from the answer
	// of; the private index carries it too.
	Token string `json:"token"`
	// TooLarge and Skipped are what the snapshot left out: a path the
	// watcher does not report again is left out again, as a walk would.
	TooLarge []LargeFile `json:"too_large,omitempty"`
	Skipped  []string    `json:"skipped,omitempty"`
	// Tree is the snapshot's tree; Lag says the private index does not
	// hold it (the fast way, quick.go, wrote it without the index).
	Tree string `json:"tree,omitempty"`
	Lag  bool   `json:"lag,omitempty"`
}

// watchRun is how a snapshot's candidates were found.
type watchRun struct {
	// watched: a watcher answered (the index is written with its token);
	// partial: the candidates are the paths it reported, not a walk's.
	watched, partial bool
	// reported are the paths reported; carried what the last snapshot
	// left out.
	reported map[string]bool
	carried  []LargeFile
	// tree is the tree the fast way wrote, large what it left out, delta
	// its change from the last tree.
	tree  string
	large []LargeFile
	delta *delta
}

func (s *Local) stateFile() string  { return s.Index + ".watch" }
func (s *Local) answerFile() string { return s.Index + ".fsmonitor" }

// forgetToken makes the next snapshot look at everything.
func (s *Local) forgetToken() { _ = os.Remove(s.stateFile()) }

func (s *Local) readState() *watchState {
	b, err := os.ReadFile(s.stateFile())
	if err != nil {
		return &watchState{}
	}
	var st watchState
	if json.Unmarshal(b, &st) != nil {
		return &watchState{}
	}
	return &st
}

// saveState keeps the token, the tree and what was left out for the
// next snapshot.
func (s *Local) saveState(left added, tree string) error {
	if s.pending == "" {
		return nil
	}
	b, err := json.Marshal(watchState{Token: s.pending, TooLarge: left.tooLarge, Skipped: left.skipped, Tree: tree, Lag: left.lag})
	if err != nil {
		return err
	}
	return writeFileAtomic(s.stateFile(), b)
}

// unchanged reports whether the watcher vouches that nothing changed
// since the last snapshot and nothing else asks for a look (what the
// agent tracks, nested repositories): the snapshot is then the last tree,
// read from nowhere, without pausing the agent, leaving out what the
// last one left out.
func (s *Local) unchanged(ctx context.Context, v *agentView) (added, bool) {
	if s.watcher() == nil || v.fresh || v.Tree == "" || len(v.Gitlinks) > 0 || s.hasGitlinksMarker() {
		return added{}, false
	}
	for _, p := range v.Missing {
		if plainFileIn(s.Worktree, p) {
			return added{}, false
		}
	}
	if s.Quarantine != "" {
		if entries, err := os.ReadDir(s.Quarantine); err != nil && !errors.Is(err, os.ErrNotExist) || len(entries) > 0 {
			return added{}, false
		}
	}
	st := s.readState()
	if st.Token == "" {
		return added{}, false
	}
	a, err := s.watcher().Since(ctx, st.Token)
	if err != nil || a.All || a.Token == "" || len(a.Paths) > 0 {
		return added{}, false
	}
	return added{tooLarge: st.TooLarge, skipped: st.Skipped, tree: st.Tree, lag: st.Lag}, true
}

func (s *Local) hasGitlinksMarker() bool {
	_, err := os.Stat(s.gitlinksMarker())
	return err == nil
}

// watchedCandidates returns the candidates of a snapshot, asking the
// watcher when there is one; g is given the fsmonitor hook.
func (s *Local) watchedCandidates(ctx context.Context, g *gitcmd.Runner, v *agentView, quarantined []worktree.Nested) (*candidates, watchRun, error) {
	if s.watcher() == nil {
		c, err := findCandidates(ctx, g)
		return c, watchRun{}, err
	}
	st := s.readState()
	s.forgetToken() // a snapshot that fails leaves the next one looking at everything
	a, werr := s.watcher().Since(ctx, st.Token)
	if werr != nil || a.Token == "" {
		c, err := findCandidates(ctx, g)
		return c, watchRun{}, err
	}
	trusted := !a.All && st.Token != "" && len(st.Skipped) == 0 && len(quarantined) == 0 && !s.hasGitlinksMarker()
	if trusted && quickReason(s.reason) && !v.fresh && len(v.Gitlinks) == 0 && len(v.Missing) == 0 {
		q, err := s.quickTree(ctx, g, v, st.Tree, a.Paths)
		if err == nil {
			s.pending = a.Token
			run := watchRun{watched: true, partial: true, reported: map[string]bool{}, carried: st.TooLarge, tree: q.tree, large: q.large, delta: q.delta}
			for _, p := range a.Paths {
				run.reported[p] = true
			}
			return nil, run, nil
		}
		if !errors.Is(err, errNotQuick) {
			return nil, watchRun{}, err
		}
	}
	if err := s.useHook(g, st.Token, a); err != nil {
		return nil, watchRun{}, fmt.Errorf("snapshot: %w", err)
	}
	s.pending = a.Token
	run := watchRun{watched: true}
	// After the fast way the index lags: only a walk brings it up to date.
	if trusted && !st.Lag {
		c, ok, err := s.fromPaths(ctx, g, a.Paths)
		if err != nil || ok {
			run.partial = ok
			run.reported = map[string]bool{}
			for _, p := range a.Paths {
				run.reported[p] = true
			}
			run.carried = st.TooLarge
			return c, run, err
		}
	}
	// Everything is looked at; the stat data of what did not change is
	// marked valid for the hook's next answers.
	if _, _, err := g.RunFull(ctx, nil, "update-index", "-q", "--ignore-missing", "--unmerged", "--refresh"); err != nil {
		var ge *gitcmd.Error
		if !errors.As(err, &ge) || ge.Code != 1 {
			return nil, watchRun{}, fmt.Errorf("snapshot: %w", err)
		}
	}
	c, err := findCandidates(ctx, g)
	return c, run, err
}

// stillLarge returns the files the last snapshot left out for their size
// that were not reported since (so are as they were) and are not among
// this snapshot's.
func (r watchRun) stillLarge(now []LargeFile) []LargeFile {
	var out []LargeFile
	for _, f := range r.carried {
		if !r.reported[f.Path] && !slices.ContainsFunc(now, func(n LargeFile) bool { return n.Path == f.Path }) {
			out = append(out, f)
		}
	}
	return out
}

// useHook writes the hook's answer and sets core.fsmonitor on g: the
// paths for the token prev (git's, when the last watched snapshot wrote
// the index), nothing for a.Token (the index this snapshot writes), "/"
// for any other.
func (s *Local) useHook(g *gitcmd.Runner, prev string, a Changed) error {
	var ans bytes.Buffer
	ans.WriteString(a.Token + "\x00")
	if a.All {
		ans.WriteString("/\x00")
	}
	for _, p := range a.Paths {
		ans.WriteString(p + "\x00")
	}
	if err := writeFileAtomic(s.answerFile(), ans.Bytes()); err != nil {
		return err
	}
	for _, t := range []string{prev, a.Token} {
		if !safeToken(t) {
			return fmt.Errorf("a watcher token that is not plain: %q", t)
		}
	}
	from := prev
	if from == "" || a.All {
		from = "-"
	}
	hook := `f() { case "$1:$2" in ` +
		`2:` + from + `) exec cat ` + shellQuote(s.answerFile()) + `;; ` +
		`2:` + a.Token + `) printf '%s\000' ` + a.Token + `;; ` +
		`*) printf '%s\000/\000' ` + a.Token + `;; esac; }; f`
	g.Config = append(g.Config, "core.fsmonitor="+hook)
	return nil
}

// safeToken reports whether t can stand in the hook's shell text as it
// is.
func safeToken(t string) bool {
	for _, r := range t {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == ':' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fromPaths finds the candidates among the paths the watcher reported:
// git diff-files (told the same paths by the hook, so it looks at those
// entries only) names the tracked ones that changed or are gone; the
// others that are files now, not under a symlink and not ignored are the
// new ones. ok is false when the paths cannot be trusted to tell
// (a nested repository, an ignore file, too many): then everything is
// looked at.
func (s *Local) fromPaths(ctx context.Context, g *gitcmd.Runner, paths []string) (*candidates, bool, error) {
	if len(paths) > maxWatchedPaths {
		return nil, false, nil
	}
	for _, p := range paths {
		for _, part := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
			if part == ".git" || part == ".gitignore" {
				return nil, false, nil
			}
		}
	}
	diff, err := g.Run(ctx, nil, "diff-files", "-z", "--name-status", "--ignore-submodules=all")
	if err != nil {
		return nil, false, fmt.Errorf("snapshot: %w", err)
	}
	c := &candidates{gone: map[string]bool{}}
	changed := map[string]bool{}
	recs := gitcmd.SplitLines(diff)
	for i := 0; i+1 < len(recs); i += 2 {
		if recs[i] == "D" {
			c.gone[recs[i+1]] = true
		}
		if !changed[recs[i+1]] {
			c.changed = append(c.changed, recs[i+1])
		}
		changed[recs[i+1]] = true
	}
	var maybe bytes.Buffer
	repos := map[string]bool{}
	for _, p := range paths {
		if strings.HasSuffix(p, "/") || changed[p] || !s.newFile(p, repos) {
			continue
		}
		if repos[""] {
			return nil, false, nil // under a nested repository
		}
		maybe.WriteString(p + "\x00")
	}
	if maybe.Len() == 0 {
		return c, true, nil
	}
	ignored, err := g.Run(ctx, bytes.NewReader(maybe.Bytes()), "check-ignore", "--no-index", "-z", "--stdin")
	var ge *gitcmd.Error
	if err != nil && !(errors.As(err, &ge) && ge.Code == 1) {
		return nil, false, fmt.Errorf("snapshot: %w", err)
	}
	skip := map[string]bool{}
	for _, p := range gitcmd.SplitLines(ignored) {
		skip[p] = true
	}
	for _, p := range gitcmd.SplitLines(maybe.Bytes()) {
		if !skip[p] {
			c.untracked = append(c.untracked, p)
		}
	}
	return c, true, nil
}

// newFile reports whether p is a regular file or symlink of the
// worktree with no symlink among its leading directories, as git's walk
// finds files. A leading directory holding .git (a nested repository)
// sets repos[""]; repos caches what each directory is ("d" plain, "r"
// repository) by keying "d:dir" and "r:dir".
func (s *Local) newFile(p string, repos map[string]bool) bool {
	fi, err := os.Lstat(filepath.Join(s.Worktree, p))
	if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0) {
		return false
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if repos["d:"+dir] {
			continue
		}
		if repos["r:"+dir] {
			repos[""] = true
			return true
		}
		di, err := os.Lstat(filepath.Join(s.Worktree, dir))
		if err != nil || !di.IsDir() {
			return false // beyond a symlink, or gone
		}
		if _, err := os.Lstat(filepath.Join(s.Worktree, dir, ".git")); err == nil {
			repos["r:"+dir] = true
			repos[""] = true
			return true
		}
		repos["d:"+dir] = true
	}
	return true
}

// watcher is the watcher a snapshot of this reason trusts (nil when none
// runs; a Watch with a Running method is asked): none for the
// snapshots taken as the agent is gone or going (exit, stop, rm), which
// look at every file — a watcher does not see a write made through a
// hard link outside the worktree or a shared memory mapping.
func (s *Local) watcher() Watcher {
	if s.Watch == nil || s.reason == ReasonExit || s.reason == ReasonStop || s.reason == ReasonRemove {
		return nil
	}
	if r, ok := s.Watch.(interface{ Running() bool }); ok && !r.Running() {
		return nil
	}
	return s.Watch
}

// quickReason reports whether a snapshot of this reason may take the fast
// way (quick.go): those taken while the agent works. The others go
// through the private index, which then holds what they read (restore,
// update and start check the worktree out through it).
func quickReason(r Reason) bool { return r == ReasonInterval || r == ReasonManual }
