package e2e

// Adversarial round two: settings a sandbox was started with, history
// smuggled through sync, and host memory and disk spent on what an agent
// hands back (sync of huge objects, verify's export of huge files).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// atkProbe prints the limits and network of the container it runs in, on
// cgroup v2 or v1.
const atkProbe = `pids=$(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max)
mem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
net=$(ls /sys/class/net | tr '\n' ,)
echo "PROBE pids=$pids mem=$mem net=$net"`

// probeOf returns the fields of the first PROBE line of out.
func probeOf(t *testing.T, out string) map[string]string {
	t.Helper()
	var line string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "PROBE "); ok && !strings.Contains(s, "$") {
			line = s
			break
		}
	}
	if line == "" {
		t.Fatalf("no PROBE line in:\n%s", out)
	}
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// 2. Verify ran with the current config, not the sandbox's own settings: a
// sandbox started with --network none --pids 64 was verified with the
// network and pids 4096.
func TestAttackVerifyKeepsTheSandboxSettings(t *testing.T) {
	t.Parallel()
	e, _, _ := atkEnv(t)
	e.WriteConfig("base_image = %q\nnetwork = \"bridge\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 4096\n", baseImage)
	// Armed: the probe sees the config's network and limits in a sandbox
	// started without flags.
	open := probeOf(t, e.atkStart("open", atkProbe+"\necho AGENT-DONE").Stdout)
	if open["pids"] != "4096" || !strings.Contains(open["net"], "eth") {
		t.Fatalf("the probe does not see the config's settings: %v", open)
	}
	r := e.Sandbox("start", "strict", "--agent", "shell", "--network", "none", "--pids", "64", "--memory", "512m",
		"--verify", atkProbe, "--", "sh", "-c", atkProbe+"\necho AGENT-DONE")
	if r.Code != 0 {
		t.Fatalf("start: %s", r)
	}
	agent := probeOf(t, r.Stdout)
	if agent["pids"] != "64" || agent["net"] != "lo," || agent["mem"] != "536870912" {
		t.Fatalf("the agent's own container does not have its flags: %v", agent)
	}
	verifyProbe := func(what string) map[string]string {
		t.Helper()
		// A new file, so verify runs on a tree it has no verdict for.
		must(t, os.WriteFile(filepath.Join(e.Worktree("strict"), what+".txt"), []byte(what+"\n"), 0o644))
		v := e.Sandbox("verify", "strict")
		if v.Code != 0 {
			t.Fatalf("verify (%s): %s", what, v)
		}
		return probeOf(t, v.Stderr)
	}
	// The config is looser than the flags the sandbox started with.
	if got := verifyProbe("looser"); got["pids"] != "64" || got["net"] != "lo," || got["mem"] != "536870912" {
		t.Errorf("verify ran with the config's looser settings, not the sandbox's (pids 64, no network, 512m): %v", got)
	}
	// The config, tightened after start, is stricter than the record.
	e.WriteConfig("base_image = %q\nnetwork = \"bridge\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"256m\"\npids = 32\n", baseImage)
	if got := verifyProbe("tighter"); got["pids"] != "32" || got["net"] != "lo," || got["mem"] != "268435456" {
		t.Errorf("verify did not take the tightened config (pids 32, no network, 256m): %v", got)
	}
}

// atkVictimAgent leaves a secret in its worktree (so in its snapshots)
// and makes two commits of its own.
const atkVictimAgent = `
set -e
echo "SECRET=victim-token-4242" > .env
echo one > one.txt && git add one.txt && git commit -q -m "first victim commit"
echo two > two.txt && git add two.txt && git commit -q -m "second victim commit"
echo AGENT-DONE
`

// atkSmuggleAgent finds, through the object store its alternates reach,
// a commit of another sandbox's snapshots holding .env, and makes its own
// commit a merge of it whose tree is a harmless one-line change.
const atkSmuggleAgent = `
set -e
SNAP=
for c in $(git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' | awk '$1=="commit"{print $2}'); do
	if git cat-file -e "$c:.env" 2>/dev/null; then SNAP=$c; break; fi
done
[ -n "$SNAP" ] || { echo "no snapshot with .env found"; exit 1; }
echo "SNAP: $SNAP"
echo "a harmless line" >> README.md
git add README.md
C=$(git commit-tree "$(git write-tree)" -p HEAD -p "$SNAP" -m "fix a typo")
git update-ref HEAD "$C"
echo "SMUGGLED: $C"
if git show "$C^2:.env" | grep -q victim-token-4242; then echo "ARMED: SMUGGLE"; fi
echo AGENT-DONE
`

// 4. History smuggling: the agent's commit has another sandbox's snapshot
// (with its .env) as a parent; the diff showed one harmless line, and
// land --merge and a push put the secret on the remote.
func TestAttackHistorySmugglingThroughSync(t *testing.T) {
	t.Parallel()
	e, _, remote := atkEnv(t)
	e.atkStart("victim", atkVictimAgent)
	// The commits land --merge would keep are listed by diff.
	d := e.Sandbox("diff", "victim")
	if d.Code != 0 {
		t.Fatalf("diff victim: %s", d)
	}
	for _, want := range []string{"land --merge would also add the agent's 2 commit(s)", "first victim commit", "second victim commit"} {
		if !strings.Contains(d.Stdout, want) {
			t.Errorf("diff does not list the agent's commits (%q):\n%s", want, d.Stdout)
		}
	}
	r := e.atkStart("smuggle", atkSmuggleAgent)
	if !strings.Contains(r.Stdout, "ARMED: SMUGGLE\n") {
		t.Fatalf("the smuggling commit was not made:\n%s", r)
	}
	snap, smuggled := between(r.Stdout, "SNAP: ", "\n"), between(r.Stdout, "SMUGGLED: ", "\n")
	if !strings.Contains(e.Git("for-each-ref", "--contains", snap, "refs/sandbox/"), "refs/sandbox/victim/") {
		t.Fatalf("the agent's find %s is not a snapshot of the victim sandbox", snap)
	}
	mainBefore := e.Git("rev-parse", "main")
	for _, args := range [][]string{
		{"diff", "smuggle"},
		{"sync", "smuggle"},
		{"land", "smuggle", "--merge"},
	} {
		x := e.Sandbox(args...)
		if x.Code == 0 {
			t.Errorf("git sandbox %s accepted the smuggled history: %s", strings.Join(args, " "), x)
		} else if !strings.Contains(x.Stderr, "another sandbox's snapshots") {
			t.Errorf("git sandbox %s: no clear refusal: %s", strings.Join(args, " "), x)
		}
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	if x := e.Run(e.Repo, nil, "git", "rev-parse", "-q", "--verify", "refs/heads/smuggle"); strings.TrimSpace(x.Stdout) == smuggled {
		t.Errorf("the sandbox branch was moved to the smuggling commit")
	}
	if x := e.Run(e.Repo, nil, "git", "cat-file", "-e", smuggled); x.Code == 0 {
		t.Errorf("the smuggling commit reached the host object store")
	}
	e.Run(e.Repo, nil, "git", "push", "-q", "origin", "main", "smuggle")
	if x := e.Run(e.Repo, nil, "git", "--git-dir", remote, "cat-file", "-e", snap); x.Code == 0 {
		t.Errorf("the other sandbox's snapshot, with its .env, reached the remote")
	}
}
