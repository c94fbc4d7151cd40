package workspace

// Copy mode's side of the agent's repository on the engine: its commits
// brought back (sync) and the base's commits sent in (update).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// headScript prints the agent's HEAD commit and the ref it goes through,
// read as files (no git runs in the agent's repository), or nothing for an
// unborn branch. The host checks both before using them.
const headScript = `G=` + CopyGitDir + `
[ -f "$G/HEAD" ] && [ ! -L "$G/HEAD" ] || exit 0
h=$(head -c 300 "$G/HEAD" | head -n 1)
ref=
case "$h" in
"ref: "*)
	ref=${h#ref: }
	case "$ref" in refs/heads/*) ;; *) exit 0 ;; esac
	case "$ref" in *..* | *//*) exit 0 ;; esac
	if [ -f "$G/$ref" ] && [ ! -L "$G/$ref" ]; then
		h=$(head -c 100 "$G/$ref" | head -n 1)
	elif [ -f "$G/packed-refs" ]; then
		h=$(awk -v r="$ref" '$2 == r { print $1; exit }' "$G/packed-refs")
	else
		h=
	fi ;;
esac
[ -n "$h" ] && printf '%s %s\n' "$h" "$ref"
exit 0
`

// commitsScript packs the agent's commits from $1 down to the start commit
// $2 (the repositories are shallow there) and without what the known
// commit $3 holds, reading the agent's objects as an alternate of the
// helper's repository: the agent's configuration plays no part.
const commitsScript = `set -eu
export GIT_DIR=` + copyScratch + ` GIT_ALTERNATE_OBJECT_DIRECTORIES=` + CopyGitDir + `/objects
{
	printf '%s\n--not\n%s\n' "$1" "$2"
	if [ -n "${3:-}" ] && ` + helperGit + ` cat-file -e "$3^{commit}" 2>/dev/null; then printf '%s\n' "$3"; fi
} | ` + helperGit + ` pack-objects --revs --stdout -q
`

// Sync brings the agent's commits back from the engine: its HEAD read as
// files by the helper, a pack of the commits since the start, indexed
// with index-pack --strict into a directory of the sandbox's state, and
// then the same checks and copy as a local sync (agentrepo.SyncWithin) with
// that directory as the agent's repository.
func (v *Volume) Sync(ctx context.Context, known string, budget agentrepo.Budget) (*agentrepo.SyncResult, error) {
	d, err := v.helper(ctx)
	if err != nil {
		return nil, err
	}
	id, ref, err := v.readHead(ctx, d)
	if err != nil || id == "" {
		return &agentrepo.SyncResult{}, err
	}
	if !agentrepo.ValidID(id) || (ref != "" && !agentrepo.ValidRef(ref)) {
		return nil, usererr.New("the agent's HEAD on the engine is not a commit id (%s)", termsafe.String(id)).
			WithCode(usererr.ExitRefused)
	}
	r := v.rec
	if id == r.Start || id == known {
		return &agentrepo.SyncResult{Head: id, Ref: ref}, nil
	}
	dir, err := os.MkdirTemp(v.env.Layout.Dir(r.Branch), "sync-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := v.fetchCommits(ctx, d, dir, id, known, budget); err != nil {
		return nil, err
	}
	if err := os.WriteFile(dir+"/HEAD", []byte(id+"\n"), 0o600); err != nil {
		return nil, err
	}
	res, err := agentrepo.SyncWithin(ctx, v.env.Repo.Git(), dir, r.Start, known, budget)
	if err != nil {
		return nil, err
	}
	res.Ref = ref
	return res, nil
}

// readHead reads the agent's HEAD commit and the ref it goes through on
// the engine (both checked by the caller).
func (v *Volume) readHead(ctx context.Context, d Engine) (id, ref string, err error) {
	var out bytes.Buffer
	if err := helperExec(ctx, d, v.rec.Copy.Helper, user(), headScript, nil, &out); err != nil {
		return "", "", fmt.Errorf("read the agent's HEAD on the engine: %w", err)
	}
	id, ref, _ = strings.Cut(strings.TrimSpace(out.String()), " ")
	return id, ref, nil
}

// fetchCommits indexes a pack of the agent's commits down to the start
// (and without known's) into dir/objects with index-pack --strict, unless
// the user's store has head already. The pack is checked as it streams: one
// over budget is cut before index-pack writes it into the sandbox's state.
func (v *Volume) fetchCommits(ctx context.Context, d Engine, dir, head, known string, budget agentrepo.Budget) error {
	objects := dir + "/objects"
	if err := os.MkdirAll(objects+"/pack", 0o700); err != nil {
		return err
	}
	if _, err := v.env.Repo.Git().Run(ctx, nil, "cat-file", "-e", head+"^{commit}"); err == nil {
		return nil
	}
	pr, pw := io.Pipe()
	xerr := make(chan error, 1)
	go func() {
		err := helperExec(ctx, d, v.rec.Copy.Helper, user(), commitsScript, nil, pw, head, v.rec.Start, known)
		pw.CloseWithError(err)
		xerr <- err
	}()
	q := &gitcmd.Runner{
		GitDir: v.env.Repo.CommonDir, ObjectDir: objects, Isolated: true,
		Env:    []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + v.env.Repo.ObjectsDir()},
		Config: []string{"core.bigFileThreshold=16m"},
	}
	ierr := agentrepo.IndexGuarded(ctx, q, pr, budget, "the agent's commits")
	pr.CloseWithError(errors.New("index ended"))
	if err := <-xerr; err != nil && ierr == nil {
		return fmt.Errorf("bring the agent's commits back: %w", err)
	}
	if ierr != nil {
		return refuseCommits(ierr)
	}
	return nil
}

// refuseCommits is the user's error for commits the engine handed back
// that were not taken in.
func refuseCommits(err error) error {
	e := usererr.Wrap(err, "the agent's commits were refused: %v", err).
		Hint("nothing was copied into your repository; inspect the sandbox with git sandbox exec, or discard it with git sandbox rm --force").
		WithCode(usererr.ExitRefused)
	if setting, ok := agentrepo.IsBudget(err); ok && setting != "" {
		e.Hint("if it belongs in the work, raise %s in your config", setting)
	}
	return e
}

// updateScript brings the base's new commits into the agent's repository
// on the engine: the pack on stdin is indexed by the helper and copied in,
// the base branch ($1) moves to the tip ($2), and then either the agent's
// branch ($3, "" when detached: HEAD) moves to $4 with its index following,
// or ($5 = merging) MERGE_HEAD and MERGE_MSG ($6) are written for the
// agent to finish the merge. Its index is written by the helper's own git
// (the agent's configuration plays no part).
const updateScript = `set -eu
G=` + CopyGitDir + ` S=` + copyScratch + `
before=$(ls "$S/objects/pack")
GIT_DIR="$S" ` + helperGit + ` index-pack --stdin >/dev/null
for f in $(ls "$S/objects/pack"); do
	case " $(echo $before) " in *" $f "*) ;; *) cp "$S/objects/pack/$f" "$G/objects/pack/" ;; esac
done
mkdir -p "$G/$(dirname "$1")"
printf '%s\n' "$2" >"$G/$1"
if [ "$5" = merging ]; then
	printf '%s\n' "$2" >"$G/MERGE_HEAD"
	printf '%s' "$6" >"$G/MERGE_MSG"
	exit 0
fi
if [ -n "$3" ]; then
	mkdir -p "$G/$(dirname "$3")"
	printf '%s\n' "$4" >"$G/$3"
else
	printf '%s\n' "$4" >"$G/HEAD"
fi
GIT_DIR="$S" GIT_INDEX_FILE="$G/index" ` + helperGit + ` read-tree "$4"
`

// GiveUpdate is update's step in the agent's repository on the engine:
// the objects between the old start and the new head and tip are sent
// there, the refs and index written by the helper.
func (v *Volume) GiveUpdate(ctx context.Context, up AgentUpdate) error {
	d, err := v.helper(ctx)
	if err != nil {
		return err
	}
	_, ref, err := v.readHead(ctx, d)
	if err != nil {
		return err
	}
	if ref != "" && !agentrepo.ValidRef(ref) {
		ref = ""
	}
	state := ""
	if up.Merging {
		state = "merging"
	}
	r := v.rec
	revs := up.NewHead.String() + "\n" + up.Tip.String() + "\n--not\n" + r.Start + "\n" + up.Head.String() + "\n"
	return v.packToHelper(ctx, d, packTo{Input: revs, Revs: true}, helperRun{
		Script: updateScript, Args: []string{r.BaseRef, up.Tip.String(), ref, up.NewHead.String(), state, up.Message},
		Doing: "update the agent's repository on the engine", Sending: "send the base's commits",
	})
}
