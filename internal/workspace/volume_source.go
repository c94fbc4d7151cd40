package workspace

// Copy mode's snapshots and restores: staged by the helper on the engine,
// brought back as checked packs; restores sent the other way.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// snapScript waits for "go" on its stdin (the agent is paused by then),
// stages the worktree into the helper's private index, then prints a
// header — its length in bytes on a line, then the tree, the
// untracked files left out for their size ("SIZE\tPATH" records, each
// ended by a NUL, then one more NUL), and what git add complained about —
// and then a pack of the tree without what tree $2 (the host's newest
// snapshot, when the helper has it) already holds. One exec does both:
// the host thaws the agent as soon as the header has come (the files are
// read by then), while the pack streams.
//
// The same rules as a local snapshot: gitlinks leave the index first (for
// one already there, git add would run git status inside that nested
// repository, whose configuration the agent wrote); untracked files over
// $1 bytes (0: no limit) that the agent does not track stay out and leave
// the index; ignored files the agent tracks (its git add -f) are added.
// And the same way: git lists the files changed since the helper's index
// took them (diff-files) and those it lacks (ls-files --others), side by
// side; sizes are taken of those only, and only those are staged
// (update-index, and git add for a nested repository). When update-index
// refuses a path (a FIFO, a path beyond a symlink) or a repository is
// quarantined, the whole worktree is staged by git add --all instead
// (after a find of the files too large), which skips what it cannot store
// and says so.
//
// What the agent tracks is read from a copy of its index by this git: the
// agent's configuration plays no part. Two listings of the index are kept
// in $C for the next snapshot, since each is a pass over every file of
// the repository: what the agent's index tracks, good while that index is
// byte for byte the same; and, good while the helper's index ends in the
// checksum this snapshot left (written last, removed before the index
// changes), its gitlinks and what the agent tracks that it lacks. When the
// agent's index is the same, nothing it tracks left the helper's (no such
// file gone, and git add --verbose said no "remove") and no gitlink is in
// it or came in, what it lacks now is among what it lacked then: only
// those paths are looked up, not every path of the index.
// git lists an index in the order of its bytes, which is sort's in the C
// locale of helperGitEnv: the helper's own listing is compared unsorted.
const snapScript = `set -eu
IFS= read -r go && [ "$go" = go ] || exit 3
HG="` + helperGit + ` -c core.excludesFile=` + copyExcludes + `"
export GIT_DIR=` + copyScratch + ` GIT_WORK_TREE=` + container.Workspace + ` GIT_INDEX_FILE=` + copyIndex + `
cd ` + container.Workspace + `
T=` + copyState + `/tmp C=` + copyState + `/last
rm -rf "$T" && mkdir -p "$T" "$C"
max=$1 prev=${2:-}
shift 2
: >"$T/quar"
: >"$T/qlinks"
for q; do
	l=${q%%	*} p=${q#*	}
	printf '%s\0' "$p" >>"$T/quar"
	[ "$l" = - ] || printf '160000 %s 0\t%s\0' "$l" "$p" >>"$T/qlinks"
done
: >"$T/qkeep"
if [ -s "$T/quar" ]; then
	rc=0
	$HG check-ignore -z --stdin <"$T/quar" >"$T/qign" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 1 ]
	sort -z "$T/qign" >"$T/qign.s"
	sort -z "$T/quar" | comm -z -23 - "$T/qign.s" >"$T/qkeep"
fi
full=1
if [ -s "$C/index.sum" ] && tail -c 20 ` + copyIndex + ` | cmp -s - "$C/index.sum"; then
	cp "$C/gitlinks" "$T/gitlinks"
	[ ! -f "$C/missing" ] || full=0
else
	` + helperGit + ` ls-files -s -z | { grep -z '^160000' || true; } | cut -z -f2- >"$T/gitlinks"
fi
rm -f "$C/index.sum"
[ ! -s "$T/gitlinks" ] || ` + helperGit + ` update-index --force-remove -z --stdin <"$T/gitlinks"
: >"$T/agent"
if [ -f ` + CopyGitDir + `/index ] && [ ! -L ` + CopyGitDir + `/index ]; then
	if [ -f "$C/agent" ] && [ -f "$C/agentlinks" ] && cmp -s ` + CopyGitDir + `/index "$C/agent.index"; then
		cp "$C/agent" "$T/agent"
		cp "$C/agentlinks" "$T/agentlinks"
	elif cp ` + CopyGitDir + `/index "$T/agent.index"; then
		full=1
		rm -f "$C/agent" "$C/agent.index" "$C/agentlinks"
		{ GIT_INDEX_FILE="$T/agent.index" ` + helperGit + ` ls-files -z --cached 2>/dev/null || : ; } | sort -z >"$T/agent"
		{ GIT_INDEX_FILE="$T/agent.index" ` + helperGit + ` ls-files -s -z 2>/dev/null || : ; } | { grep -z '^160000' || true; } | cut -z -f2- >"$T/agentlinks"
		cp "$T/agent.index" "$C/agent.index" && cp "$T/agent" "$C/agent" && cp "$T/agentlinks" "$C/agentlinks"
	fi
fi
[ -f "$T/agentlinks" ] || : >"$T/agentlinks"
: >"$T/excl"
: >"$T/add.out"
: >"$T/add.err"
removed=1
quick() {
	[ ! -s "$T/quar" ] || return 1
	$HG diff-files -z --name-status --ignore-submodules=all >"$T/diff" &
	d=$!
	o=0
	$HG ls-files -z --others --exclude-standard >"$T/others" || o=1
	wait "$d" || return 1
	[ "$o" = 0 ] || return 1
	{ sed -z -n 'n;p' "$T/diff"; grep -z -v '/$' "$T/others" || true; } | sort -z -u >"$T/cand" || return 1
	{ grep -z '/$' "$T/others" || true; } >"$T/repos"
	if [ "$max" -gt 0 ]; then
		{ sed -z 's|^|./|' "$T/cand" | xargs -0 -r sh -c 'find "$@" -maxdepth 0 -type f -size +'"$max"'c -printf "%p\0"' sh 2>/dev/null || true; } | sed -z 's|^\./||' | sort -z | comm -z -23 - "$T/agent" >"$T/excl" || return 1
		[ ! -s "$T/excl" ] || ` + helperGit + ` update-index --force-remove -z --stdin <"$T/excl" || return 1
	fi
	comm -z -23 "$T/cand" "$T/excl" >"$T/stage" || return 1
	if [ -s "$T/stage" ]; then
		` + helperGit + ` update-index --add --remove --replace -z --stdin <"$T/stage" >/dev/null 2>"$T/add.err" || return 1
		[ ! -s "$T/add.err" ] || return 1
	fi
	if [ -s "$T/repos" ]; then
		rc=0
		sed -z 's/^/:(literal)/' "$T/repos" | $HG add --all --verbose --ignore-errors --pathspec-from-file=- --pathspec-file-nul >"$T/add.out" 2>"$T/add.err" || rc=$?
		[ "$rc" = 0 ] || [ "$rc" = 1 ] || return 1
		! grep -q "^remove '" "$T/add.out" || return 0
	fi
	sed -z -n '/^D$/{n;p;b};n' "$T/diff" | sort -z | comm -z -12 - "$T/agent" | grep -z -q . || removed=0
}
if ! quick; then
	removed=1
	: >"$T/excl"
	if [ "$max" -gt 0 ]; then
		find . -path ./.git -prune -o -type f -size +"$max"c -printf '%P\0' >"$T/big"
		{
			GIT_LITERAL_PATHSPECS=1 xargs -0 -r $HG ls-files -z --others --exclude-standard -- <"$T/big"
			GIT_LITERAL_PATHSPECS=1 xargs -0 -r ` + helperGit + ` ls-files -z --cached -- <"$T/big"
		} | sort -z -u >"$T/large"
		comm -z -23 "$T/large" "$T/agent" >"$T/excl"
		` + helperGit + ` update-index --force-remove -z --stdin <"$T/excl"
	fi
	rc=0
	{ printf '.\0'; cat "$T/excl" "$T/qkeep" | sed -z 's/^/:(exclude,literal)/'; } | $HG add --all --verbose --ignore-errors --pathspec-from-file=- --pathspec-file-nul >"$T/add.out" 2>"$T/add.err" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 1 ]
fi
[ ! -s "$T/qlinks" ] || ` + helperGit + ` update-index -z --index-info <"$T/qlinks"
if [ "$full" = 0 ] && [ "$removed" = 0 ] && [ ! -s "$T/gitlinks" ] && [ ! -s "$T/quar" ] && ! grep -q "embedded git repository" "$T/add.err"; then
	if [ -s "$C/missing" ]; then
		GIT_LITERAL_PATHSPECS=1 xargs -0 -r ` + helperGit + ` ls-files -z --cached -- <"$C/missing" | sort -z -u >"$T/have"
		comm -z -23 "$C/missing" "$T/have" >"$T/missing"
	else
		: >"$T/missing"
	fi
else
	` + helperGit + ` ls-files -s -z >"$T/staged"
	{ grep -z '^160000' "$T/staged" || true; } | cut -z -f2- >"$T/gitlinks"
	cut -z -f2- "$T/staged" >"$T/have"
	comm -z -23 "$T/agent" "$T/have" >"$T/missing"
fi
xargs -0 -r sh -c 'for p; do if [ -f "$p" ] || [ -L "$p" ]; then printf "%s\0" "$p"; fi; done' sh <"$T/missing" >"$T/forced"
if [ -s "$T/forced" ]; then
	rc=0
	GIT_LITERAL_PATHSPECS=1 ` + helperGit + ` add --force --ignore-errors --pathspec-from-file="$T/forced" --pathspec-file-nul 2>>"$T/add.err" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 1 ]
fi
` + helperGit + ` write-tree >"$T/head"
cp "$T/gitlinks" "$C/gitlinks" && cp "$T/missing" "$C/missing" && tail -c 20 ` + copyIndex + ` >"$C/index.sum"
xargs -0 -r stat --printf '%s\t%n\0' -- <"$T/excl" >>"$T/head"
printf '\0' >>"$T/head"
cat "$T/qkeep" >>"$T/head"
printf '\0' >>"$T/head"
cat "$T/agentlinks" >>"$T/head"
printf '\0' >>"$T/head"
head -c 1048576 "$T/add.err" >>"$T/head"
wc -c <"$T/head"
cat "$T/head"
tree=$(head -n 1 "$T/head")
if [ -n "$prev" ] && ` + helperGit + ` cat-file -e "$prev^{tree}" 2>/dev/null; then
	printf '%s\n--not\n%s\n' "$tree" "$prev"
else
	printf '%s\n' "$tree"
fi | ` + helperGit + ` pack-objects --revs --stdout -q
`

// parseAdded reads what snapScript printed after the tree: the files too
// large, the quarantined paths no ignore rule covers, the agent's
// gitlinks (each list NUL-ended records, ended by one more NUL), and what
// git add complained of.
func parseAdded(rest string) rescue.Elsewhere {
	var x rescue.Elsewhere
	lists := []func(rec string){
		func(rec string) {
			size, p, ok := strings.Cut(rec, "\t")
			n, err := strconv.ParseInt(size, 10, 64)
			if ok && err == nil && agentrepo.CheckPath(p) == nil {
				x.TooLarge = append(x.TooLarge, rescue.LargeFile{Path: p, Size: n})
			}
		},
		func(rec string) { x.NotIgnored = append(x.NotIgnored, rec) },
		func(rec string) { x.Submodules = append(x.Submodules, rec) },
	}
	for _, add := range lists {
		for rest != "" && rest[0] != 0 {
			rec, more, ok := strings.Cut(rest, "\x00")
			if !ok {
				return rescue.Elsewhere{}
			}
			rest = more
			add(rec)
		}
		rest = strings.TrimPrefix(rest, "\x00")
	}
	x.AddErrors = rest
	return x
}

// Source reads the worktree on the engine through the helper.
func (v *Volume) Source(freeze Freeze) rescue.Source { return &volumeSource{v: v, freeze: freeze} }

// volumeSource reads a copy-mode worktree through its helper.
type volumeSource struct {
	v      *Volume
	freeze Freeze
}

func (s *volumeSource) Read(ctx context.Context, prevTree, _ string) (*rescue.Tree, error) {
	if seeded := rescue.TakeSeed(s.v.seedMarker(), s.v.rec.Start); seeded != "" {
		tree, err := s.v.env.Repo.Git().Output(ctx, "rev-parse", "--verify", "--end-of-options", seeded+"^{tree}")
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		return &rescue.Tree{ID: tree}, nil
	}
	rt, err := s.remoteTree(ctx, prevTree)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return rt, nil
}

// checkoutScript indexes the pack on stdin into the helper's repository and
// changes the worktree from tree $1 (what the last snapshot read, and so
// what the helper's index holds) to tree $2, as a local restore does: git
// refuses, changing nothing, when a file it would write changed since.
const checkoutScript = `set -eu
export GIT_DIR=` + copyScratch + ` GIT_WORK_TREE=` + container.Workspace + ` GIT_INDEX_FILE=` + copyIndex + `
` + helperGit + ` index-pack --stdin >/dev/null
cd ` + container.Workspace + `
` + helperGit + ` read-tree -m -u "$1" "$2"
`

// maxHeader bounds snapScript's header: the tree, the refused files and
// at most 1 MiB of git add's complaints.
const maxHeader = 64 << 20

// readHeader reads snapScript's header: its length on a line, then that
// many bytes.
func readHeader(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no header from the helper: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || n < 0 || n > maxHeader {
		return "", fmt.Errorf("the helper's header length %q is not one", strings.TrimSpace(line))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", fmt.Errorf("the helper's header: %w", err)
	}
	return string(b), nil
}

// Checkout ships the objects of tree to that tree from lacks and
// checks them out on the engine.
func (s *volumeSource) Checkout(ctx context.Context, from, to string) error {
	d, err := s.v.helper(ctx)
	if err != nil {
		return err
	}
	return s.v.packToHelper(ctx, d, packTo{Input: to + "\n--not\n" + from + "\n", Revs: true}, helperRun{
		Script: checkoutScript, Args: []string{from, to},
		Doing: "write the files on the engine", Sending: "send the snapshot",
	})
}

// remoteTree stages the worktree on the engine while the agent is
// frozen, and brings the tree's new objects back, checked.
func (s *volumeSource) remoteTree(ctx context.Context, prevTree string) (*rescue.Tree, error) {
	d, err := s.v.helper(ctx)
	if err != nil {
		return nil, err
	}
	quarantined, err := worktree.Quarantined(s.v.env.Layout.Quarantine(s.v.rec.Branch))
	if err != nil {
		return nil, err
	}
	began := time.Now()
	defer func() {
		s.v.env.UI.Tracef("copy snapshot of %s: %s in all", s.v.rec.Branch, time.Since(began).Round(time.Millisecond))
	}()
	x := s.v.startSnapExec(ctx, d, prevTree, quarantined)
	var thaw func()
	if s.freeze != nil {
		if thaw, err = s.freeze(ctx); err != nil {
			_ = x.end()
			return nil, err
		}
	}
	// Thawing takes round trips of its own on a remote engine: it runs
	// while the pack streams, and the snapshot waits for it before it
	// returns.
	t := newThawer(thaw)
	defer t.wait()
	br, head, err := x.staged(t)
	if err != nil {
		if errors.Is(err, errCannotExec) {
			s.v.remake.Store(true)
		}
		return nil, err
	}
	s.v.env.UI.Tracef("copy snapshot of %s: staged on the engine after %s", s.v.rec.Branch, time.Since(began).Round(time.Millisecond))
	tree, rest, _ := strings.Cut(head, "\n")
	tree = strings.TrimSpace(tree)
	added := parseAdded(rest)
	added.Quarantined = quarantined
	changes, err := s.v.bringTree(ctx, x, br, tree, prevTree)
	if err != nil {
		return nil, err
	}
	if changes != nil {
		added.Base, added.Changes = prevTree, changes
	}
	return rescue.TreeOf(tree, added), nil
}

// snapExec is one run of snapScript in the helper.
type snapExec struct {
	open io.WriteCloser
	pr   *io.PipeReader
	xerr chan error
}

// startSnapExec starts snapScript. It waits for a line on its stdin
// before it reads a file: the exec is set up while the agent is being
// paused, and the go-ahead is written once it is. Closing the gate
// without it ends the script. Each quarantined entry is an argument: the
// commit snapshots recorded for it ("-" for none), a tab, and the path a
// snapshot leaves as the index has it.
func (v *Volume) startSnapExec(ctx context.Context, d Engine, prevTree string, quarantined []worktree.Nested) *snapExec {
	gate, open := io.Pipe()
	pr, pw := io.Pipe()
	x := &snapExec{open: open, pr: pr, xerr: make(chan error, 1)}
	args := []string{strconv.FormatInt(v.env.MaxFileSize, 10), prevTree}
	for _, q := range quarantined {
		link := "-"
		if !q.Bare && q.Gitlink != "" && agentrepo.CheckPath(q.Repo()) == nil {
			link = q.Gitlink
		}
		args = append(args, link+"\t"+rescue.QuarantinedPath(q))
	}
	go func() {
		err := helperExec(ctx, d, v.rec.Copy.Helper, user(), snapScript, gate, pw, args...)
		gate.Close()
		pw.CloseWithError(err)
		x.xerr <- err
	}()
	return x
}

// end ends the exec and returns its error.
func (x *snapExec) end() error {
	x.open.Close()
	x.pr.CloseWithError(errors.New("snapshot ended"))
	return <-x.xerr
}

// fail ends the exec and reports its own error first: a script that
// failed says why on its stderr.
func (x *snapExec) fail(what string, err error) error {
	if xe := x.end(); xe != nil {
		return fmt.Errorf("%s: %w", what, xe)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// staged gives the go-ahead, reads the header (the files are read by
// then) and starts thawing the agent.
func (x *snapExec) staged(t *thawer) (*bufio.Reader, string, error) {
	if _, err := io.WriteString(x.open, "go\n"); err != nil {
		return nil, "", x.fail("read the worktree on the engine", err)
	}
	x.open.Close()
	br := bufio.NewReader(x.pr)
	head, err := readHeader(br)
	t.start()
	if err != nil {
		return nil, "", x.fail("read the worktree on the engine", err)
	}
	return br, head, nil
}

// bringTree imports the pack that follows the header, checked, unless the
// user's store has the tree already. It returns what the tree changed
// from prevTree, file by file, when the import listed that (nil
// otherwise).
func (v *Volume) bringTree(ctx context.Context, x *snapExec, br *bufio.Reader, tree, prevTree string) ([]agentrepo.TreeChange, error) {
	if _, err := v.env.Repo.Git().Run(ctx, nil, "cat-file", "-e", tree+"^{tree}"); err == nil && tree != "" {
		// The user's store has it (and what it holds): the pack is not
		// needed.
		if _, err := io.Copy(io.Discard, br); err != nil {
			return nil, x.fail("bring the snapshot back", err)
		}
		if err := <-x.xerr; err != nil {
			return nil, fmt.Errorf("bring the snapshot back: %w", err)
		}
		return nil, nil
	}
	changes, ierr := agentrepo.ImportTree(ctx, agentrepo.ImportOptions{
		CommonDir: v.env.Repo.CommonDir, Pack: br, Tree: tree, Known: prevTree, Budget: v.env.SyncBudget,
	})
	x.pr.CloseWithError(errors.New("import ended"))
	if err := <-x.xerr; err != nil && ierr == nil {
		return nil, fmt.Errorf("bring the snapshot back: %w", err)
	}
	if ierr != nil {
		return nil, fmt.Errorf("bring the snapshot back: %w", ierr)
	}
	return changes, nil
}

// thawer lets a frozen agent go on in the background, once.
type thawer struct {
	thaw    func()
	started bool
	done    chan struct{}
}

func newThawer(thaw func()) *thawer { return &thawer{thaw: thaw, done: make(chan struct{})} }

// start begins thawing (once).
func (t *thawer) start() {
	if t.started {
		return
	}
	t.started = true
	go func() {
		defer close(t.done)
		if t.thaw != nil {
			t.thaw()
		}
	}()
}

// wait thaws, if that has not begun, and waits until it is done.
func (t *thawer) wait() {
	t.start()
	<-t.done
}
