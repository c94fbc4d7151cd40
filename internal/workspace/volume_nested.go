package workspace

// Copy mode's nested repositories: found and moved by the helper on the
// engine, quarantined by the same rules and into the same record (on this
// machine, beside the sandbox's state) as a worktree here
// (worktree.QuarantineIn). Their git directories are kept in the helper's
// own volume, which the agent's container never mounts.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// copyQuarantine is where the helper keeps quarantined entries.
const copyQuarantine = copyState + "/quarantine"

// findNestedScript lists the worktree's nested repositories as
// worktree.FindNested does: a .git entry below the top (never entering
// one, never following a symlink: find does not), and a regular file HEAD
// beside the directories objects and refs (a bare layout). Each is
// printed as "G PATH" or "B PATH", NUL-ended. A directory find cannot
// read holds nothing git could read either.
const findNestedScript = `set -eu
cd ` + container.Workspace + `
L=` + copyState + `/nested.list
{ find . -mindepth 1 \( -path ./.git -prune \) -o \( -name .git -printf 'G %P\0' -prune \) -o \( -type f -name HEAD -printf 'H %P\0' \) 2>/dev/null || :; } >"$L"
{ grep -z '^G ' "$L" || :; }
{ grep -z '^H ' "$L" || :; } | cut -z -c3- | xargs -0 -r sh -c 'for p; do
	d=$(dirname -- "$p")
	if [ -d "$d/objects" ] && [ ! -L "$d/objects" ] && [ -d "$d/refs" ] && [ ! -L "$d/refs" ]; then printf "B %s\0" "$p"; fi
done' sh
rm -f "$L"
`

// moveNestedScript moves entries between the worktree and the helper's
// volume: $1 is 1 to move back; then pairs of a worktree path and where
// it is kept. For each it prints, NUL-ended, "ok", "gone" (nothing to
// move), "taken" (the place it goes to is), or "fail WHY". Nothing is
// moved through a symlink: a directory on the way that is not where its
// name says is refused.
const moveNestedScript = `set -eu
mkdir -p ` + copyQuarantine + `
back=$1
shift
real() { d=$(dirname -- "$1") && [ "$(cd -- "$d" 2>/dev/null && pwd -P)" = "$d" ]; }
while [ $# -ge 2 ]; do
	w=` + container.Workspace + `/$1 k=$2
	shift 2
	if [ "$back" = 1 ]; then f=$k t=$w; else f=$w t=$k; fi
	if [ ! -e "$f" ] && [ ! -L "$f" ]; then
		printf 'gone\0'
	elif [ -e "$t" ] || [ -L "$t" ]; then
		printf 'taken\0'
	elif ! real "$f" || ! real "$t"; then
		printf 'fail a directory on the way is a symbolic link\0'
	elif err=$(mv -T -- "$f" "$t" 2>&1); then
		printf 'ok\0'
	else
		printf 'fail %s\0' "$err"
	fi
done
`

// volumePlace is a copy-mode worktree, for the quarantine.
type volumePlace struct {
	v *Volume
	d Engine
}

var _ worktree.Place = (*volumePlace)(nil)

// FindNested asks the helper.
func (p *volumePlace) FindNested(ctx context.Context) ([]worktree.Nested, error) {
	var out bytes.Buffer
	if err := helperExec(ctx, p.d, p.v.rec.Copy.Helper, user(), findNestedScript, nil, &out); err != nil {
		return nil, err
	}
	var list []worktree.Nested
	for _, rec := range strings.Split(out.String(), "\x00") {
		kind, path, ok := strings.Cut(rec, " ")
		if !ok || path == "" {
			continue
		}
		list = append(list, worktree.Nested{Path: path, Bare: kind == "B"})
	}
	return list, nil
}

// KeptAt is a path of the helper's volume.
func (p *volumePlace) KeptAt(n int) string { return copyQuarantine + "/" + strconv.Itoa(n) }

// Move has the helper move the entries, in one exec.
func (p *volumePlace) Move(ctx context.Context, list []worktree.Nested, back bool) []error {
	args := []string{"0"}
	if back {
		args[0] = "1"
	}
	for _, n := range list {
		args = append(args, n.Path, n.Kept)
	}
	var out bytes.Buffer
	if err := helperExec(ctx, p.d, p.v.rec.Copy.Helper, user(), moveNestedScript, nil, &out, args...); err != nil {
		return repeatErr(err, len(list))
	}
	results := strings.Split(strings.TrimSuffix(out.String(), "\x00"), "\x00")
	errs := make([]error, len(list))
	for i := range list {
		if i >= len(results) {
			errs[i] = errors.New("the helper did not say")
			continue
		}
		switch r := results[i]; {
		case r == "ok":
		case r == "gone":
			errs[i] = fs.ErrNotExist
		case r == "taken":
			errs[i] = fs.ErrExist
		default:
			errs[i] = fmt.Errorf("%s", strings.TrimPrefix(r, "fail "))
		}
	}
	return errs
}

// repeatErr is n times err.
func repeatErr(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Quarantine moves nested repositories' git directories into the
// helper's volume; each one's commit is taken from the helper's snapshot
// index, so snapshots meanwhile record it as before.
func (v *Volume) Quarantine(ctx context.Context) error {
	d, err := v.helper(ctx)
	if err != nil {
		return err
	}
	// The snapshot index is read once, and only when there is a nested
	// repository to quarantine.
	var links map[string]string
	var lerr error
	gitlink := func(repo string) string {
		if links == nil && lerr == nil {
			links, lerr = v.indexedGitlinks(ctx, d)
		}
		return links[repo]
	}
	_, err = worktree.QuarantineIn(ctx, &volumePlace{v: v, d: d}, v.env.Layout.Quarantine(v.rec.Branch), gitlink)
	return errors.Join(err, lerr)
}

// Unquarantine puts the quarantined git directories back.
func (v *Volume) Unquarantine(ctx context.Context) ([]worktree.Nested, error) {
	dir := v.env.Layout.Quarantine(v.rec.Branch)
	if list, err := worktree.Quarantined(dir); err != nil || len(list) == 0 {
		return nil, err
	}
	d, err := v.helper(ctx)
	if err != nil {
		return nil, err
	}
	return worktree.RestoreQuarantinedIn(ctx, &volumePlace{v: v, d: d}, dir)
}

// WarnNested says nothing: no git of this machine runs in a worktree on
// an engine.
func (v *Volume) WarnNested([]string) {}

// NestedKept is the helper's volume.
func (v *Volume) NestedKept() string {
	return "in the helper's volume on engine " + termsafe.String(engineName(v.rec))
}

// NestedCopyHint is an exec that copies one out: exec runs with the git
// directories back.
func (v *Volume) NestedCopyHint(first string) string {
	b := termsafe.String(v.rec.Branch)
	return fmt.Sprintf("copy what you need out of the sandbox first, for example: git sandbox exec %s -- tar -c %s > nested.tar (each one's git directory is kept %s while the agent is stopped, and back for exec)", b, first, v.NestedKept())
}

// indexedGitlinks returns the gitlinks of the helper's snapshot index
// (what the last snapshot recorded for nested repositories), by path.
func (v *Volume) indexedGitlinks(ctx context.Context, d Engine) (map[string]string, error) {
	var out bytes.Buffer
	script := `set -eu
[ -f ` + copyIndex + ` ] || exit 0
GIT_DIR=` + copyScratch + ` GIT_INDEX_FILE=` + copyIndex + ` ` + helperGit + ` ls-files -s -z | { grep -z '^160000' || :; }
`
	if err := helperExec(ctx, d, v.rec.Copy.Helper, user(), script, nil, &out); err != nil {
		return nil, fmt.Errorf("read the snapshot index: %w", err)
	}
	links := map[string]string{}
	for _, rec := range strings.Split(out.String(), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			links[p] = f[1]
		}
	}
	return links, nil
}
