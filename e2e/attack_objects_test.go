package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// Issue 16, item 3: the shared object store was readable. The agent's
// repository borrowed the user's whole object store, so the agent could
// list and read every object in it: the stash, a blob staged and then
// unstaged (dangling), another sandbox's snapshots (its .env). The agent
// now borrows only a store of what the user's branches and tags reach, and
// what its own sandbox was given.

// atkReadObjectsAgent lists every object its repository can reach, tries
// each id it was told about ($IDS: name=id pairs), and reads ordinary
// history ($MAIN, a commit on main).
const atkReadObjectsAgent = `
git cat-file --batch-all-objects --batch-check='%(objectname)' > /tmp/all 2>/dev/null
echo "OBJECTS: $(wc -l < /tmp/all)"
for kv in $IDS; do
	name=${kv%%=*} id=${kv#*=}
	if git cat-file -p "$id" >/dev/null 2>&1; then echo "READ: $name"; else echo "unreadable: $name"; fi
	if grep -q "^$id\$" /tmp/all; then echo "LISTED: $name"; fi
done
if git cat-file --batch-all-objects --batch 2>/dev/null | grep -aq "$NONCE"; then echo "SECRET FOUND"; fi
if [ "$(git cat-file -t "$MAIN" 2>/dev/null)" = commit ] && git log --format=%s "$MAIN" | grep -q "ordinary history"; then echo "HISTORY: readable"; fi
echo AGENT-DONE
`

func TestAttackAgentReadsOnlyObjectsItWasGiven(t *testing.T) {
	t.Parallel()
	attackReadObjects(t, false)
}

// TestAttackAgentReadsOnlyObjectsItWasGivenFromPacks: the same with every
// object of the user's store in packs (a repository after gc: the stash,
// the snapshot and the dangling blob sit in one pack with main's history)
// and the store agents read made anew, which reuses the user's packs that
// hold only what branches and tags reach: that pack must not be one.
func TestAttackAgentReadsOnlyObjectsItWasGivenFromPacks(t *testing.T) {
	t.Parallel()
	attackReadObjects(t, true)
}

func attackReadObjects(t *testing.T, packed bool) {
	e := NewEnv(t)
	nonce := "gsbx-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e.WriteFile("history.txt", "ordinary\n")
	e.Git("add", "history.txt")
	e.Git("commit", "-qm", "ordinary history")
	main := e.Git("rev-parse", "main")

	// The stash.
	e.WriteFile("README.md", "stashed "+nonce+"\n")
	e.Git("stash", "-q")
	ids := map[string]string{
		"stash":      e.Git("rev-parse", "refs/stash"),
		"stash-blob": e.Git("rev-parse", "refs/stash:README.md"),
	}
	// A blob staged, then unstaged: nothing reaches it.
	e.WriteFile("dangling.txt", "dangling "+nonce+"\n")
	e.Git("add", "dangling.txt")
	ids["dangling"] = e.Git("rev-parse", ":dangling.txt")
	e.Git("rm", "-q", "--cached", "dangling.txt")
	must(t, os.Remove(filepath.Join(e.Repo, "dangling.txt")))
	// Another sandbox's snapshot of a secret .env.
	e.atkStart("victim", "echo 'TOKEN="+nonce+"' > .env; echo AGENT-DONE")
	Eventually(t, 60*time.Second, "the victim's snapshot of .env", func() bool {
		return e.Run(e.Repo, nil, "git", "cat-file", "-e", "refs/sandbox/victim/rescue:.env").Code == 0
	})
	ids["snapshot"] = e.Git("rev-parse", "refs/sandbox/victim/rescue")
	ids["snapshot-env"] = e.Git("rev-parse", "refs/sandbox/victim/rescue:.env")

	// Armed: each is in the user's store, and the secret ones hold the
	// secret.
	for name, id := range ids {
		r := e.Run(e.Repo, nil, "git", "cat-file", "-p", id)
		if r.Code != 0 {
			t.Fatalf("the %s %s is not readable from the user's store: the test proves nothing: %s", name, id, r)
		}
		if strings.HasSuffix(name, "-blob") || name == "dangling" || name == "snapshot-env" {
			if !strings.Contains(r.Stdout, nonce) {
				t.Fatalf("the %s %s does not hold the secret: %q", name, id, r.Stdout)
			}
		}
	}

	if packed {
		e.Git("repack", "-adq")
		idx, _ := filepath.Glob(filepath.Join(e.Repo, ".git", "objects", "pack", "pack-*.idx"))
		if len(idx) != 1 {
			t.Fatalf("repack left %d packs", len(idx))
		}
		listed := e.Run(e.Repo, nil, "sh", "-c", "git show-index < "+idx[0]).Stdout
		for _, name := range []string{"stash-blob", "snapshot-env"} {
			if !strings.Contains(listed, " "+ids[name]+" ") {
				t.Fatalf("the %s is not in the one pack with main's history: the test proves nothing", name)
			}
		}
		must(t, os.RemoveAll(filepath.Join(e.State, e.RepoID(), ".visible")))
	}
	var pairs []string
	for name, id := range ids {
		pairs = append(pairs, name+"="+id)
	}
	r := e.atkStart("reader", atkReadObjectsAgent, "IDS="+strings.Join(pairs, " "), "MAIN="+main, "NONCE="+nonce)
	for name := range ids {
		if strings.Contains(r.Stdout, "READ: "+name+"\n") {
			t.Errorf("ATTACK SUCCEEDED: the agent read the %s %s", name, ids[name])
		} else if !strings.Contains(r.Stdout, "unreadable: "+name+"\n") {
			t.Errorf("no report of the attempt to read the %s:\n%s", name, r.Stdout)
		}
		if strings.Contains(r.Stdout, "LISTED: "+name+"\n") {
			t.Errorf("ATTACK SUCCEEDED: the agent's listing of its objects names the %s %s", name, ids[name])
		}
	}
	if strings.Contains(r.Stdout, "SECRET FOUND") {
		t.Errorf("ATTACK SUCCEEDED: an object the agent can read holds the secret")
	}
	if !strings.Contains(r.Stdout, "HISTORY: readable\n") {
		t.Errorf("the agent cannot read main's history:\n%s", r.Stdout)
	}
	if strings.Contains(r.Stdout, "OBJECTS: 0\n") {
		t.Errorf("the agent lists no objects at all:\n%s", r.Stdout)
	}
}
