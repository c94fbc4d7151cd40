package rescue

// What a snapshot of a worktree on this machine looks at: only the paths
// git finds changed. The private index's stat data says which of its files
// changed (git diff-files), one walk of the directories which files it
// lacks (git ls-files --others); sizes are taken for those paths only, and
// only those are staged. A watcher of the worktree feeds the same list
// instead of the two git runs (watched.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// candidates are the worktree paths a snapshot has to look at.
type candidates struct {
	// changed are paths of the private index whose files changed, changed
	// type or are gone.
	changed []string
	// gone are the changed paths whose files are gone.
	gone map[string]bool
	// untracked are files the private index lacks that no ignore rule
	// covers, and nested repositories ("dir/").
	untracked []string
}

func (c *candidates) empty() bool { return len(c.changed) == 0 && len(c.untracked) == 0 }

// findCandidates asks git which paths changed since the private index
// recorded them. Both runs read the index; one compares its stat data with
// the files (reading a file only when its entry is racily clean), the
// other walks the directories. Neither writes anything; they run side by
// side.
func findCandidates(ctx context.Context, g *gitcmd.Runner) (*candidates, error) {
	var wg sync.WaitGroup
	var diff, others []byte
	var derr, oerr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		// Gitlinks are stripped before; --ignore-submodules=all makes sure
		// no git ever runs inside one.
		diff, derr = g.Run(ctx, nil, "diff-files", "-z", "--name-status", "--ignore-submodules=all")
	}()
	go func() {
		defer wg.Done()
		others, oerr = g.Run(ctx, nil, "ls-files", "-z", "--others", "--exclude-standard")
	}()
	wg.Wait()
	if derr != nil {
		return nil, fmt.Errorf("snapshot: %w", derr)
	}
	if oerr != nil {
		return nil, fmt.Errorf("snapshot: %w", oerr)
	}
	c := &candidates{untracked: gitcmd.SplitLines(others), gone: map[string]bool{}}
	recs := gitcmd.SplitLines(diff)
	for i := 0; i+1 < len(recs); i += 2 {
		if recs[i] == "D" {
			c.gone[recs[i+1]] = true
		}
		c.changed = append(c.changed, recs[i+1])
	}
	c.changed = slices.Compact(c.changed) // an unmerged path is listed per stage
	return c, nil
}

// staging is what a snapshot stages, found from the candidates.
type staging struct {
	// files are staged with git update-index (they exist or are gone).
	files []string
	// repos are nested repositories ("dir/"), staged by git add, which
	// records them and says so.
	repos []string
	// large are left out for their size; drop are those of them the
	// private index holds, removed from it.
	large []LargeFile
	drop  []string
	// forceWrite writes the private index even when nothing in it
	// changes (it carries the watcher's token); partial says the
	// candidates are what a watcher reported, not a walk's.
	forceWrite, partial bool
}

// plan sorts the candidates: those under a quarantined repository are
// left as the private index has them, those too large are left out (their
// size from lstat, taken for these paths only), the rest is staged.
func (s *Local) plan(c *candidates, v *agentView, quarantined []worktree.Nested) *staging {
	st := &staging{}
	repos := map[string]bool{}
	for _, p := range c.untracked {
		if strings.HasSuffix(p, "/") && !underQuarantine(strings.TrimSuffix(p, "/"), quarantined) {
			st.repos = append(st.repos, p)
			repos[strings.TrimSuffix(p, "/")] = true
		}
	}
	consider := func(p string, inIndex bool) {
		if strings.HasSuffix(p, "/") || underQuarantine(p, quarantined) || repos[p] {
			return
		}
		if c.gone[p] && beyondLink(s.Worktree, p) {
			// Gone behind a symlink: update-index would refuse the path.
			st.drop = append(st.drop, p)
			return
		}
		if f, ok := s.tooBig(v, p, inIndex); ok {
			st.large = append(st.large, f)
			if inIndex {
				st.drop = append(st.drop, p)
			}
			return
		}
		st.files = append(st.files, p)
	}
	for _, p := range c.changed {
		consider(p, true)
	}
	for _, p := range c.untracked {
		consider(p, false)
	}
	slices.SortFunc(st.large, func(a, b LargeFile) int { return strings.Compare(a.Path, b.Path) })
	return st
}

// tooBig reports whether the file at p is to be left out for its size: a
// regular file larger than MaxFileSize that the agent does not track, or
// one it tracks that is sparse (a few blocks on disk that git would read
// at their full size). Judged from lstat: nothing is opened.
func (s *Local) tooBig(v *agentView, p string, inIndex bool) (LargeFile, bool) {
	if s.MaxFileSize <= 0 {
		return LargeFile{}, false
	}
	fi, err := os.Lstat(filepath.Join(s.Worktree, p))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= s.MaxFileSize {
		return LargeFile{}, false
	}
	if s.tracks(v, p, inIndex) && !sparse(fi) {
		return LargeFile{}, false
	}
	return LargeFile{Path: p, Size: fi.Size()}, true
}

// errWalk says staging what a watcher reported needs the candidates of a
// walk of the whole worktree.
var errWalk = errors.New("snapshot: a walk of the worktree is needed")

// stage writes the planned paths into the private index. Files go through
// git update-index, which looks at exactly the paths it is given; when it
// refuses or ignores one (a name git cannot store, an unreadable file, a
// FIFO where a file was), the whole worktree is staged by git add --all instead, which
// skips what it cannot store and says so. Nested repositories are staged
// by git add, whose warnings name them.
func (s *Local) stage(ctx context.Context, g *gitcmd.Runner, st *staging, quarantined []worktree.Nested) (added, error) {
	if len(st.drop) > 0 {
		if err := dropPaths(ctx, g, st.drop); err != nil {
			return added{}, err
		}
	}
	if len(st.files) > 0 {
		var in bytes.Buffer
		for _, p := range st.files {
			in.WriteString(p + "\x00")
		}
		// Silent when every path was stored; a path it ignores (a name git
		// refuses) it names on stderr.
		args := []string{"update-index", "--add", "--remove", "--replace"}
		if st.forceWrite {
			args = append(args, "--force-write-index")
		}
		_, stderr, err := g.RunFull(ctx, &in, append(args, "-z", "--stdin")...)
		if (err != nil || len(bytes.TrimSpace(stderr)) > 0) && st.partial {
			// The candidates came from a watcher: the files too large
			// elsewhere in the worktree are not known.
			return added{}, errWalk
		}
		if err != nil || len(bytes.TrimSpace(stderr)) > 0 {
			return s.addEverything(ctx, g, st.large, quarantined)
		}
	} else if st.forceWrite {
		if _, err := g.Run(ctx, nil, "update-index", "--force-write-index"); err != nil {
			return added{}, fmt.Errorf("snapshot: %w", err)
		}
	}
	if len(st.repos) == 0 {
		return added{tooLarge: st.large}, nil
	}
	spec := &bytes.Buffer{}
	for _, p := range st.repos {
		spec.WriteString(":(literal)" + p + "\x00")
	}
	left, err := s.gitAdd(ctx, g, spec)
	left.tooLarge = st.large
	return left, err
}

// addEverything stages the whole worktree with git add --all, leaving out
// the files too large and the quarantined repositories.
func (s *Local) addEverything(ctx context.Context, g *gitcmd.Runner, large []LargeFile, quarantined []worktree.Nested) (added, error) {
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
	left, err := s.gitAdd(ctx, g, spec)
	left.tooLarge = large
	return left, err
}

// gitAdd runs git add --all on the pathspecs of spec and reads from what
// it says the paths it could not store and the nested repositories it met.
func (s *Local) gitAdd(ctx context.Context, g *gitcmd.Runner, spec *bytes.Buffer) (added, error) {
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
	return added{skipped: skipped, stderr: string(stderr)}, nil
}

// dropPaths removes paths from the private index.
func dropPaths(ctx context.Context, g *gitcmd.Runner, paths []string) error {
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p + "\x00")
	}
	if _, err := g.Run(ctx, &in, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// addMissing stages the tracked files the private index lacks (v.Missing)
// that are plain files of the worktree now, as the agent's git add -f
// staged them, leaving out a sparse one too large; those staged leave
// v.Missing. It returns the paths git refused and the files left out.
func (s *Local) addMissing(ctx context.Context, g *gitcmd.Runner, v *agentView) ([]string, []LargeFile, error) {
	var list bytes.Buffer
	var large []LargeFile
	var left []string
	for _, p := range v.Missing {
		if !plainFileIn(s.Worktree, p) {
			left = append(left, p)
			continue
		}
		if f, ok := s.tooBig(v, p, false); ok {
			large = append(large, f)
			left = append(left, p)
			continue
		}
		list.WriteString(p + "\x00")
	}
	v.Missing = left
	if list.Len() == 0 {
		return nil, large, nil
	}
	lit := *g
	lit.Env = append(slices.Clip(g.Env), "GIT_LITERAL_PATHSPECS=1")
	_, err := lit.Run(ctx, &list, "add", "--force", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul")
	skipped, err := skippedPaths(err)
	v.Missing = append(v.Missing, skipped...)
	slices.Sort(v.Missing)
	return skipped, large, err
}

// beyondLink reports whether a leading directory of rel (a path in dir)
// is a symlink.
func beyondLink(dir, rel string) bool {
	parts := strings.Split(rel, "/")
	p := dir
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return true
		}
	}
	return false
}
