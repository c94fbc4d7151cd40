package sandbox

// Copy mode's snapshots and restores: staged by the helper on the engine,
// brought back as checked packs; restores sent the other way.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// snapScript waits for "go" on its stdin (the agent is paused by then),
// stages the worktree into the helper's private index, then prints a
// header — its length in bytes on a line, then the tree, the
// untracked files left out for their size ("SIZE\tPATH" records, each
// ended by a NUL, then one more NUL), and what git add complained about —
// and then a pack of the tree without what tree $2 (the host's newest
// snapshot, when the helper has it) already holds. One exec does both:
// the host thaws the agent as soon as the header has come (the files are
// read by then), while the pack streams. The same rules as a local snapshot: gitlinks leave the
// index first (for one already there, git add would run git status inside
// that nested repository, whose configuration the agent wrote); untracked
// files over $1 bytes (0: no limit) that the agent does not track stay out
// and leave the index; ignored files the agent tracks (its git add -f) are
// added. What the agent tracks is read from a copy of its index by this
// git: the agent's configuration plays no part. Two listings of the
// index are kept in $C for the next snapshot, since each is a pass over
// every file of the repository: what the agent's index tracks, good while
// that index is byte for byte the same; and, good while the helper's index
// ends in the checksum this snapshot left (written last, removed before
// the index changes), its gitlinks and what the agent tracks that it
// lacks. When the agent's index is the same, nothing left the helper's
// (git add --verbose says "remove" for each that does) and no gitlink is
// in it or came in, what it lacks now is among what it lacked then: only
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
if [ -f ` + CopyGitDir + `/index ] && [ ! -L ` + CopyGitDir + `/index ] && cp ` + CopyGitDir + `/index "$T/agent.index"; then
	if [ -f "$C/agent" ] && cmp -s "$T/agent.index" "$C/agent.index"; then
		cp "$C/agent" "$T/agent"
	else
		full=1
		rm -f "$C/agent" "$C/agent.index"
		{ GIT_INDEX_FILE="$T/agent.index" ` + helperGit + ` ls-files -z --cached 2>/dev/null || : ; } | sort -z >"$T/agent"
		cp "$T/agent.index" "$C/agent.index" && cp "$T/agent" "$C/agent"
	fi
fi
: >"$T/excl"
if [ "$1" -gt 0 ]; then
	find . -path ./.git -prune -o -type f -size +"$1"c -printf '%P\0' >"$T/big"
	{
		GIT_LITERAL_PATHSPECS=1 xargs -0 -r $HG ls-files -z --others --exclude-standard -- <"$T/big"
		GIT_LITERAL_PATHSPECS=1 xargs -0 -r ` + helperGit + ` ls-files -z --cached -- <"$T/big"
	} | sort -z -u >"$T/large"
	comm -z -23 "$T/large" "$T/agent" >"$T/excl"
	` + helperGit + ` update-index --force-remove -z --stdin <"$T/excl"
fi
rc=0
{ printf '.\0'; sed -z 's/^/:(exclude,literal)/' "$T/excl"; } | $HG add --all --verbose --ignore-errors --pathspec-from-file=- --pathspec-file-nul >"$T/add.out" 2>"$T/add.err" || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ]
if [ "$full" = 0 ] && [ ! -s "$T/gitlinks" ] && ! grep -q "^remove '" "$T/add.out" && ! grep -q "embedded git repository" "$T/add.err"; then
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
head -c 1048576 "$T/add.err" >>"$T/head"
wc -c <"$T/head"
cat "$T/head"
tree=$(head -n 1 "$T/head")
if [ -n "${2:-}" ] && ` + helperGit + ` cat-file -e "$2^{tree}" 2>/dev/null; then
	printf '%s\n--not\n%s\n' "$tree" "$2"
else
	printf '%s\n' "$tree"
fi | ` + helperGit + ` pack-objects --revs --stdout -q
`

// parseAdded reads what addScript printed after the tree.
func parseAdded(rest string) (large []rescue.LargeFile, addErrors string) {
	for rest != "" && rest[0] != 0 {
		rec, more, ok := strings.Cut(rest, "\x00")
		if !ok {
			return large, ""
		}
		rest = more
		size, p, ok := strings.Cut(rec, "\t")
		n, err := strconv.ParseInt(size, 10, 64)
		if ok && err == nil && agentrepo.CheckPath(p) == nil {
			large = append(large, rescue.LargeFile{Path: p, Size: n})
		}
	}
	return large, strings.TrimPrefix(rest, "\x00")
}

// copySnapshotter takes the snapshots of a copy-mode sandbox through its
// helper.
func (s *Sandbox) copySnapshotter() *rescue.Snapshotter {
	l := s.env.Layout
	return &rescue.Snapshotter{
		CommonDir: s.env.Repo.CommonDir,
		Branch:    s.Branch,
		Scratch:   l.ScratchGitDir(s.Branch),
		Lock:      l.Lock(s.Branch),
		Start:     s.Start,
		Baseline:  s.Baseline,
		Remote:    s.remoteTree,
		// Set for restore: the files go back to the engine.
		RemoteCheckout: s.remoteCheckout,
	}
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

// remoteCheckout ships the objects of tree to that tree from lacks and
// checks them out on the engine.
func (s *Sandbox) remoteCheckout(ctx context.Context, from, to string) error {
	d, err := s.engine(ctx)
	if err != nil {
		return err
	}
	if err := s.ensureHelper(ctx, d); err != nil {
		return err
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	return s.env.packToHelper(ctx, d, s.Copy.Helper, user, packTo{Input: to + "\n--not\n" + from + "\n", Revs: true}, checkoutScript,
		"write the files on the engine", "send the snapshot", from, to)
}

// remoteTree stages the worktree on the engine while the agent is paused,
// and brings the tree's new objects back, checked.
func (s *Sandbox) remoteTree(ctx context.Context, prevTree string) (rt *rescue.RemoteTree, err error) {
	d, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	if err := s.ensureHelper(ctx, d); err != nil {
		return nil, err
	}
	began := time.Now()
	defer func() {
		s.env.UI.Tracef("copy snapshot of %s: %s in all", s.Branch, time.Since(began).Round(time.Millisecond))
	}()
	budget, err := s.env.syncBudget()
	if err != nil {
		return nil, err
	}
	// The script waits for a line on its stdin before it reads a file:
	// the exec is set up while the agent is paused, and the go-ahead is
	// written once it is. Closing the gate without it ends the script.
	gate, open := io.Pipe()
	defer open.Close()
	pr, pw := io.Pipe()
	defer pr.Close()
	xerr := make(chan error, 1)
	go func() {
		err := helperExec(ctx, d, s.Copy.Helper, user, snapScript, gate, pw, strconv.FormatInt(s.env.maxFileSize(), 10), prevTree)
		gate.Close()
		pw.CloseWithError(err)
		xerr <- err
	}()
	// end ends the exec and returns its error.
	end := func() error {
		open.Close()
		pr.CloseWithError(errors.New("snapshot ended"))
		return <-xerr
	}
	// fail ends the exec and reports its own error first: a script that
	// failed says why on its stderr.
	fail := func(what string, err error) error {
		if xe := end(); xe != nil {
			return fmt.Errorf("%s: %w", what, xe)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var thaw func()
	if s.Baseline != "" {
		if thaw, err = s.env.freezer(s.Record.Engine, s.Container)(ctx); err != nil {
			_ = end()
			return nil, err
		}
	}
	// Thawing takes round trips of its own on a remote engine: it runs
	// while the pack streams, and the snapshot waits for it before it
	// returns.
	thawed := make(chan struct{})
	thawing := false
	thawOnce := func() {
		if !thawing {
			thawing = true
			go func() {
				defer close(thawed)
				if thaw != nil {
					thaw()
				}
			}()
		}
	}
	defer func() {
		thawOnce()
		<-thawed
	}()
	if _, err := io.WriteString(open, "go\n"); err != nil {
		return nil, fail("read the worktree on the engine", err)
	}
	open.Close()
	br := bufio.NewReader(pr)
	head, err := readHeader(br)
	thawOnce()
	if err != nil {
		return nil, fail("read the worktree on the engine", err)
	}
	s.env.UI.Tracef("copy snapshot of %s: staged on the engine after %s", s.Branch, time.Since(began).Round(time.Millisecond))
	tree, rest, _ := strings.Cut(head, "\n")
	tree = strings.TrimSpace(tree)
	rt = &rescue.RemoteTree{Tree: tree}
	rt.TooLarge, rt.AddErrors = parseAdded(rest)
	if _, err := s.env.Git().Run(ctx, nil, "cat-file", "-e", tree+"^{tree}"); err == nil && tree != "" {
		// The user's store has it (and what it holds): the pack is not
		// needed.
		if _, err := io.Copy(io.Discard, br); err != nil {
			return nil, fail("bring the snapshot back", err)
		}
		if err := <-xerr; err != nil {
			return nil, fmt.Errorf("bring the snapshot back: %w", err)
		}
		return rt, nil
	}
	ierr := agentrepo.ImportTree(ctx, agentrepo.ImportOptions{
		CommonDir: s.env.Repo.CommonDir, Pack: br, Tree: tree, Known: prevTree, Budget: budget,
	})
	pr.CloseWithError(errors.New("import ended"))
	if err := <-xerr; err != nil && ierr == nil {
		return nil, fmt.Errorf("bring the snapshot back: %w", err)
	}
	if ierr != nil {
		return nil, fmt.Errorf("bring the snapshot back: %w", ierr)
	}
	return rt, nil
}
