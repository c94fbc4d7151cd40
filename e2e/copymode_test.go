package e2e

// Copy mode against the second engine (e2e/engine2): an engine that sees
// none of this machine's files. Sandboxes keep their files in volumes
// there; snapshots come back as packs.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyEngineConfig is the user config of a test with the second engine
// configured as "two", in copy mode.
func copyEngineConfig(e *Env, host string) {
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n", baseImage, host)
}

// containersOn lists the ids of the containers of a repository on an engine.
func containersOn(t testing.TB, host, repoID string) []string {
	t.Helper()
	return strings.Fields(dockerAt(t, host, "ps", "-aq", "--filter", "label=git-sandbox.repo="+repoID))
}

// assertNoBindMounts fails when a container on the engine mounts anything
// but a volume.
func assertNoBindMounts(t testing.TB, host string, ids []string) {
	t.Helper()
	for _, id := range ids {
		var mounts []struct{ Type, Source, Destination string }
		must(t, json.Unmarshal([]byte(dockerAt(t, host, "inspect", "--format", "{{json .Mounts}}", id)), &mounts))
		if len(mounts) == 0 {
			t.Errorf("container %s has no mounts at all", id)
		}
		for _, m := range mounts {
			if m.Type != "volume" {
				t.Errorf("container %s mounts %s %s at %s: copy mode mounts volumes only", id, m.Type, m.Source, m.Destination)
			}
		}
	}
}

func TestCopyModeLifecycle(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.WriteFile("src/old.txt", "old\n")
	e.Git("add", "src/old.txt")
	e.Git("commit", "-q", "-m", "old file")

	agent := `echo "status-at-start:[$(git status --porcelain)]"
echo "head:$(git rev-parse HEAD)"
test -e /workspace/src/old.txt && echo "has-old"
echo new >new.txt
echo more >>README.md
rm src/old.txt
git add new.txt && git commit -q -m "agent commit" && echo "committed:$(git rev-parse HEAD)"`
	r := e.MustSandbox("start", "t1", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	head := e.Git("rev-parse", "main")
	for _, want := range []string{"status-at-start:[]", "head:" + head, "has-old", "committed:"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("agent output lacks %q:\n%s", want, r)
		}
	}
	_, agentCommit, _ := strings.Cut(r.Stdout, "committed:")
	agentCommit = strings.TrimSpace(agentCommit)
	// Nothing of the sandbox's files is on this machine.
	if _, err := os.Stat(e.Worktree("t1")); !os.IsNotExist(err) {
		t.Errorf("copy mode made a worktree on the host: %v", err)
	}
	ids := containersOn(t, host, e.RepoID())
	if len(ids) < 2 {
		t.Fatalf("want the agent and the helper on the second engine, found %q", ids)
	}
	assertNoBindMounts(t, host, ids)
	if local := strings.Fields(dockerAt(t, "", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID())); len(local) > 0 {
		t.Errorf("copy mode made containers on the main daemon: %q", local)
	}

	ps := e.MustSandbox("ps")
	if !strings.Contains(ps.Stdout, "ENGINE") || !strings.Contains(ps.Stdout, "two") {
		t.Errorf("ps has no ENGINE column naming two:\n%s", ps)
	}
	p := e.PsOf("t1")
	if p.Changes != 3 {
		t.Errorf("ps counts %d changes, want 3 (new.txt, README.md, src/old.txt):\n%+v", p.Changes, p)
	}

	d := e.MustSandbox("diff", "t1", "--stat")
	for _, f := range []string{"new.txt", "README.md", "src/old.txt"} {
		if !strings.Contains(d.Stdout, f) {
			t.Errorf("diff --stat lacks %s:\n%s", f, d)
		}
	}

	// The agent's commit came back as checked objects (sync runs in diff).
	if got := e.Git("rev-parse", "refs/sandbox/t1/agent"); got != agentCommit {
		t.Errorf("refs/sandbox/t1/agent = %q, want the agent's commit %q", got, agentCommit)
	}
	if got := e.Git("log", "-1", "--format=%s", agentCommit); got != "agent commit" {
		t.Errorf("the agent's commit reads %q", got)
	}
	e.MustSandbox("land", "t1", "-m", "land from the second engine")
	if got := e.Git("show", "main:new.txt"); got != "new" {
		t.Errorf("main:new.txt = %q", got)
	}
	if got := e.Git("show", "main:README.md"); got != "hello\nmore" {
		t.Errorf("main:README.md = %q", got)
	}
	if out := e.Git("ls-tree", "-r", "--name-only", "main"); strings.Contains(out, "old.txt") {
		t.Errorf("src/old.txt was removed by the agent but is still on main:\n%s", out)
	}
	// Land removed the sandbox there: containers and volumes.
	if left := containersOn(t, host, e.RepoID()); len(left) > 0 {
		t.Errorf("containers left on the second engine after land: %q", left)
	}
	if vols := strings.Fields(dockerAt(t, host, "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID())); len(vols) > 0 {
		t.Errorf("volumes left on the second engine after land: %q", vols)
	}
	if e.hasSandbox("t1") {
		t.Errorf("ps still lists t1 after land")
	}
}

// Killing the engine's daemon mid-run loses at most one interval: the
// snapshots are on this machine, ps lists the sandbox as unreachable and
// still lists the local ones, and the newest snapshot restores.
func TestCopyModeEngineLostKeepsTheSnapshots(t *testing.T) {
	eng := newEngine2(t, baseImage)
	e := NewEnv(t)
	copyEngineConfig(e, eng.Host)
	// A local sandbox on the main daemon, to be listed while the engine is down.
	e.MustSandbox("start", "local1", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo local >local.txt")

	e.MustSandbox("start", "far", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "-d", "--",
		"sh", "-c", "echo precious >work.txt; sleep 600")
	Eventually(t, 2*time.Minute, "a snapshot holding work.txt on the host", func() bool {
		r := e.Run(e.Repo, nil, "git", "show", "refs/sandbox/far/rescue:work.txt")
		return r.Code == 0 && strings.TrimSpace(r.Stdout) == "precious"
	})
	snap := e.Git("rev-parse", "refs/sandbox/far/rescue")

	pid, err := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(eng.Dir, "docker.pid"))))
	if err != nil {
		t.Fatalf("engine pid: %v", err)
	}
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	Eventually(t, 30*time.Second, "the engine stops answering", func() bool {
		_, err := dockerAtErr(eng.Host, "version")
		return err != nil
	})

	r := e.MustSandbox("ps")
	var farLine, localLine string
	for _, line := range strings.Split(r.Stdout, "\n") {
		if strings.HasPrefix(line, "far ") {
			farLine = line
		}
		if strings.HasPrefix(line, "local1 ") {
			localLine = line
		}
	}
	if !strings.Contains(farLine, "unreachable") {
		t.Errorf("ps does not list far as unreachable:\n%s", r)
	}
	if !strings.Contains(localLine, "exited") {
		t.Errorf("ps does not list the local sandbox with its state while the engine is down:\n%s", r)
	}
	if !strings.Contains(r.Stderr, "engine two is unreachable") {
		t.Errorf("ps does not say why two is unreachable:\n%s", r)
	}
	var list []PsEntry
	must(t, json.Unmarshal([]byte(e.MustSandbox("ps", "--json").Stdout), &list))
	if len(list) != 2 {
		t.Errorf("ps --json lists %d sandboxes, want 2", len(list))
	}

	e.MustSandbox("rescue", "restore", snap[:12], "--branch", "saved")
	if got := e.Git("show", "saved:work.txt"); got != "precious" {
		t.Errorf("restored work.txt = %q", got)
	}

	// The machine is gone for good: rm refuses, rm --force forgets the
	// sandbox here and keeps its snapshots.
	if r := e.Sandbox("rm", "far"); r.Code == 0 || !strings.Contains(r.Stderr, "rm --force") {
		t.Errorf("rm of a sandbox on an engine that does not answer:\n%s", r)
	}
	if r := e.MustSandbox("rm", "--force", "far"); !strings.Contains(r.Stderr, "removed here only") {
		t.Errorf("rm --force does not say what it left:\n%s", r)
	}
	if e.hasSandbox("far") {
		t.Errorf("ps still lists far after rm --force")
	}
	if r := e.Run(e.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/heads/far"); r.Code == 0 {
		t.Errorf("the branch far is left")
	}
	// The chain stays (its tip is the snapshot taken before the loss, or
	// a later one).
	if r := e.Run(e.Repo, nil, "git", "merge-base", "--is-ancestor", snap, "refs/sandbox/far/rescue"); r.Code != 0 {
		t.Errorf("the snapshot chain went with the sandbox:\n%s", r)
	}
}

// gVisor for real: a sandbox run by runsc on the second engine (its runsc
// is registered with --network=none, so the sandbox's network is none).
func TestCopyModeGVisor(t *testing.T) {
	host := startEngine2(t)
	requireRunsc(t, host)
	var uts syscall.Utsname
	must(t, syscall.Uname(&uts))
	hostRelease := utsString(uts.Release[:])

	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "g1", "--engine", "two", "--runtime", "runsc", "--agent", "shell", "--image", baseImage, "--network", "none", "-d", "--",
		"sh", "-c", "uname -r >kernel.txt; dmesg | head -3 >dmesg.txt; sleep 600")
	// Interval snapshots pause the running gVisor sandbox while they read.
	Eventually(t, 2*time.Minute, "an interval snapshot of the running sandbox", func() bool {
		r := e.Run(e.Repo, nil, "git", "show", "refs/sandbox/g1/rescue:dmesg.txt")
		return r.Code == 0 && strings.TrimSpace(r.Stdout) != ""
	})
	if got := e.Git("log", "-1", "--format=%(trailers:key=Sandbox-Reason,valueonly)", "refs/sandbox/g1/rescue"); got != "interval" {
		t.Errorf("the snapshot's reason is %q, want interval (taken while it ran)", got)
	}
	e.MustSandbox("stop", "g1")
	for _, id := range containersOn(t, host, e.RepoID()) {
		if rt := dockerAt(t, host, "inspect", "--format", "{{.HostConfig.Runtime}}", id); rt != "runsc" {
			t.Errorf("container %s runs with %q, want runsc", id, rt)
		}
	}
	e.MustSandbox("land", "g1", "-m", "from gVisor")
	kernel := e.Git("show", "main:kernel.txt")
	if kernel == "" || kernel == hostRelease {
		t.Errorf("the sandbox saw kernel %q; the host's is %q: not gVisor", kernel, hostRelease)
	}
	if dm := e.Git("show", "main:dmesg.txt"); !strings.Contains(dm, "gVisor") {
		t.Errorf("dmesg inside does not say gVisor: %q", dm)
	}
	fmt.Fprintf(os.Stderr, "gVisor kernel %s (host %s)\n", kernel, hostRelease)
}

// The sandbox image missing on the engine is copied there from the local
// daemon; then logs, exec (running and stopped), stop and rm work against
// the sandbox's own engine.
func TestCopyModeShipsTheImageAndOperates(t *testing.T) {
	eng := newEngine2(t, baseImage)
	e := NewEnv(t)
	copyEngineConfig(e, eng.Host)
	if _, err := dockerAtErr(eng.Host, "image", "inspect", testImage); err == nil {
		t.Fatalf("the private engine has %s already", testImage)
	}
	r := e.MustSandbox("start", "op", "--engine", "two", "--agent", "shell", "--network", "none", "-d", "--", "sh", "-c", "echo hello-from-two; sleep 600")
	if !strings.Contains(r.Stderr, "copied to engine two") {
		t.Errorf("start does not say it copied the image:\n%s", r)
	}
	dockerAt(t, eng.Host, "image", "inspect", "--format", "{{.Id}}", testImage)

	Eventually(t, 30*time.Second, "logs from the engine", func() bool {
		return strings.Contains(e.Sandbox("logs", "op").Stdout, "hello-from-two")
	})
	if got := strings.TrimSpace(e.MustSandbox("exec", "op", "--", "sh", "-c", "echo from-exec >e.txt; git rev-parse --is-inside-work-tree").Stdout); got != "true" {
		t.Errorf("exec in the running sandbox: git sees no work tree: %q", got)
	}
	e.MustSandbox("stop", "op")
	if p := e.PsOf("op"); p.State != "stopped" {
		t.Errorf("ps after stop: %+v", p)
	}
	if got := strings.TrimSpace(e.MustSandbox("exec", "op", "--", "cat", "e.txt").Stdout); got != "from-exec" {
		t.Errorf("exec in the stopped sandbox reads %q, want from-exec", got)
	}
	if d := e.MustSandbox("diff", "op", "--stat"); !strings.Contains(d.Stdout, "e.txt") {
		t.Errorf("diff lacks e.txt:\n%s", d)
	}
	assertNoBindMounts(t, eng.Host, containersOn(t, eng.Host, e.RepoID()))
	e.MustSandbox("rm", "--force", "op")
	if left := containersOn(t, eng.Host, e.RepoID()); len(left) > 0 {
		t.Errorf("containers left after rm: %q", left)
	}
	if vols := strings.Fields(dockerAt(t, eng.Host, "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID())); len(vols) > 0 {
		t.Errorf("volumes left after rm: %q", vols)
	}
	// The work is still in the snapshots on this machine.
	if got := e.Git("show", "refs/sandbox/op/rescue:e.txt"); got != "from-exec" {
		t.Errorf("the last snapshot's e.txt = %q", got)
	}
}

// rescue restore --worktree sends the snapshot's files back to the engine.
func TestCopyModeRestoreWorktree(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "rw", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo one >a.txt")
	first := e.Git("rev-parse", "refs/sandbox/rw/rescue")
	e.MustSandbox("exec", "rw", "--", "sh", "-c", "echo two >a.txt; mkdir -p d; echo x >d/b.txt")
	if got := e.Git("show", "refs/sandbox/rw/rescue:a.txt"); got != "two" {
		t.Fatalf("the exec's snapshot holds a.txt = %q", got)
	}
	if r := e.Sandbox("rescue", "restore", first[:12], "--worktree"); r.Code == 0 {
		t.Errorf("restore without --force changed the worktree:\n%s", r)
	}
	e.MustSandbox("rescue", "restore", first[:12], "--worktree", "--force")
	got := e.MustSandbox("exec", "rw", "--", "sh", "-c", "cat a.txt; test -e d/b.txt && echo still-there; git status --porcelain").Stdout
	if !strings.HasPrefix(got, "one\n") || strings.Contains(got, "still-there") {
		t.Errorf("after restore the sandbox holds:\n%s", got)
	}
	if tree := e.Git("rev-parse", "refs/sandbox/rw/rescue^{tree}"); tree != e.Git("rev-parse", first+"^{tree}") {
		t.Errorf("the snapshot after restore is tree %s, want the restored %s", tree, e.Git("rev-parse", first+"^{tree}"))
	}
}

// verify runs on the engine: the tree streamed into volumes of its own,
// removed after.
func TestCopyModeVerify(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "vv", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none",
		"--verify", `test "$(cat a.txt)" = good && test -L link && echo verified-here`, "--", "sh", "-c", "echo bad >a.txt; ln -s a.txt link")
	// The verify volumes of this repository (the supervisor's verify of
	// the exit snapshot may be making or removing its own meanwhile).
	verifyVols := func() int {
		return len(strings.Fields(dockerAt(t, host, "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=verify")))
	}
	if r := e.Sandbox("verify", "vv"); r.Code == 0 {
		t.Errorf("verify passed on a.txt = bad:\n%s", r)
	}
	e.MustSandbox("exec", "vv", "--", "sh", "-c", "echo good >a.txt")
	r := e.MustSandbox("verify", "vv")
	if !strings.Contains(r.Stderr+r.Stdout, "verified-here") {
		t.Errorf("verify output lacks its command's output:\n%s", r)
	}
	EventuallyOr(t, time.Minute, "no verify volumes left", func() bool { return verifyVols() == 0 },
		func() string { return fmt.Sprintf("%d verify volumes", verifyVols()) })
	e.MustSandbox("land", "vv", "-m", "verified on the engine")
	if got := e.Git("show", "main:a.txt"); got != "good" {
		t.Errorf("main:a.txt = %q", got)
	}
}

// update brings the base's new commits into a copy-mode sandbox: its files
// and the agent's repository on the engine.
func TestCopyModeUpdate(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "cu", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--",
		"sh", "-c", "echo agent >a.txt && git add a.txt && git commit -qm 'agent: a.txt'")
	e.WriteFile("b.txt", "from main\n")
	e.Git("add", "b.txt")
	e.Git("commit", "-q", "-m", "main: b.txt")
	tip := e.Git("rev-parse", "main")
	e.MustSandbox("update", "cu")
	got := e.MustSandbox("exec", "cu", "--", "sh", "-c", `cat b.txt a.txt; echo "status:[$(git status --porcelain)]"; git log --format=%s -3; git rev-parse HEAD^2`).Stdout
	for _, want := range []string{"from main\nagent\n", "status:[]", "Merge branch 'main' into cu", "agent: a.txt", tip} {
		if !strings.Contains(got, want) {
			t.Errorf("after update the sandbox lacks %q:\n%s", want, got)
		}
	}
	e.MustSandbox("land", "cu", "-m", "after update")
	if got := e.Git("show", "main:a.txt"); got != "agent" {
		t.Errorf("main:a.txt = %q", got)
	}
	if got := e.Git("show", "main:b.txt"); got != "from main" {
		t.Errorf("main:b.txt = %q", got)
	}
}

// An update that conflicts leaves markers in the files on the engine and
// the agent's repository in the middle of the merge.
func TestCopyModeUpdateConflict(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "cc", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--",
		"sh", "-c", "echo agent >README.md && git commit -qam 'agent: readme'")
	e.WriteFile("README.md", "main\n")
	e.Git("commit", "-qam", "main: readme")
	r := e.Sandbox("update", "cc")
	if r.Code != 3 {
		t.Fatalf("a conflicting update exits %d, want 3:\n%s", r.Code, r)
	}
	got := e.MustSandbox("exec", "cc", "--", "sh", "-c", "cat README.md; cat /sandbox/git/MERGE_HEAD").Stdout
	if !strings.Contains(got, "<<<<<<<") || !strings.Contains(got, e.Git("rev-parse", "main")) {
		t.Errorf("after a conflicting update the sandbox holds:\n%s", got)
	}
	if r := e.Sandbox("land", "cc"); r.Code == 0 {
		t.Errorf("land took conflict markers:\n%s", r)
	}
}

// Copy-mode snapshots follow the local rules: an untracked file over
// rescue.max_file_size stays out (and is counted), what the agent tracks
// stays in, ignored files it tracks (git add -f) too.
func TestCopyModeSnapshotRules(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\nmax_file_size = \"1k\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n", baseImage, host)
	// The user's own ignore rules (this machine's files) apply there too.
	must(t, os.MkdirAll(filepath.Join(e.Home, ".config", "git"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.Home, ".config", "git", "ignore"), []byte("*.tmp\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.Repo, ".git", "info", "exclude"), []byte("local-only/\n"), 0o644))
	agent := `set -e
head -c 5000 /dev/zero >big.bin
head -c 5000 /dev/zero >tracked.bin && git add tracked.bin
echo '*.log' >.gitignore && echo data >secret.log && git add -f secret.log
echo ignored >other.log
echo scratch >a.tmp && mkdir -p local-only && echo x >local-only/x
echo small >small.txt`
	e.MustSandbox("start", "sr", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	files := e.Git("ls-tree", "-r", "--name-only", "refs/sandbox/sr/rescue")
	for _, want := range []string{"tracked.bin", "secret.log", "small.txt", ".gitignore"} {
		if !strings.Contains(files, want) {
			t.Errorf("the snapshot lacks %s:\n%s", want, files)
		}
	}
	for _, not := range []string{"big.bin", "other.log", "a.tmp", "local-only/x"} {
		if strings.Contains(files, not) {
			t.Errorf("the snapshot holds %s:\n%s", not, files)
		}
	}
	if p := e.PsOf("sr"); p.TooLarge != 1 {
		t.Errorf("ps counts %d files too large, want 1 (big.bin)", p.TooLarge)
	}
	// Grown past the limit after it was taken: it leaves the next snapshot.
	e.MustSandbox("exec", "sr", "--", "sh", "-c", "head -c 5000 /dev/zero >small.txt")
	e.MustSandbox("rescue", "snapshot", "sr")
	if files := e.Git("ls-tree", "-r", "--name-only", "refs/sandbox/sr/rescue"); strings.Contains(files, "small.txt") {
		t.Errorf("small.txt grew past the limit but is still in the snapshot:\n%s", files)
	}
	// A tracked file made a FIFO, which git update-index refuses: the
	// snapshot stages the whole worktree instead, names the FIFO and
	// keeps the rest; a file in a new directory and a deletion come too.
	e.MustSandbox("exec", "sr", "--", "sh", "-c", "rm tracked.bin && mkfifo tracked.bin && mkdir -p new/dir && echo after >new/dir/after.txt && rm .gitignore")
	e.MustSandbox("rescue", "snapshot", "sr")
	files = e.Git("ls-tree", "-r", "--name-only", "refs/sandbox/sr/rescue")
	if !strings.Contains(files, "new/dir/after.txt") || strings.Contains(files, ".gitignore") {
		t.Errorf("the snapshot after a FIFO lacks new/dir/after.txt or holds .gitignore:\n%s", files)
	}
	if d := e.Sandbox("diff", "sr"); !strings.Contains(d.Stderr, "tracked.bin cannot be stored") {
		t.Errorf("diff does not name the FIFO it could not store: %s", d)
	}
}

// Snapshots after the first look up only the paths the helper's index
// lacked (when nothing left it): a file the agent tracks but ignores is
// there, gone, back and changed, and each snapshot has it as it is; a
// nested repository and an index the agent rewrote make a full listing
// again.
func TestCopyModeSnapshotsFollowAnIgnoredTrackedFile(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n", baseImage, host)
	agent := `set -e
echo '*.log' >.gitignore && echo one >keep.log && git add -f keep.log .gitignore
echo a >a.txt
echo started; sleep 600`
	e.MustSandbox("start", "it", "-d", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	Eventually(t, 2*time.Minute, "the agent to start", func() bool {
		return strings.Contains(e.Sandbox("logs", "it").Stdout, "started")
	})
	snapshot := func(step, script string) string {
		t.Helper()
		if script != "" {
			e.MustSandbox("exec", "it", "--", "sh", "-c", script)
		}
		e.MustSandbox("rescue", "snapshot", "it")
		r := e.Run(e.Repo, nil, "git", "show", "refs/sandbox/it/rescue:keep.log")
		if r.Code != 0 {
			return "<absent>"
		}
		return strings.TrimSpace(r.Stdout)
	}
	for _, s := range []struct{ step, script, want string }{
		{"first", "", "one"},
		{"deleted", "rm keep.log", "<absent>"},
		{"back", "echo two >keep.log", "two"},
		{"changed", "echo three >keep.log", "three"},
		{"other files change", "echo b >a.txt; echo c >c.txt", "three"},
		// A file the agent does not track going leaves the shortcut on;
		// one it tracks going with it turns it off until the next full
		// listing, which must find it missing.
		{"an untracked file deleted", "rm c.txt", "three"},
		{"gone with an untracked one", "rm keep.log a.txt", "<absent>"},
		{"back after that", "echo 3b >keep.log && echo b >a.txt && echo c >c.txt", "3b"},
		{"nested repository", "mkdir -p sub && cd sub && git init -q && echo x >x && git add x && git -c user.name=a -c user.email=a@b commit -qm x && cd .. && rm keep.log", "<absent>"},
		{"back again", "echo four >keep.log", "four"},
		{"agent index rewritten", "echo z >>a.txt && git add a.txt && rm -rf sub && echo five >keep.log", "five"},
	} {
		if got := snapshot(s.step, s.script); got != s.want {
			t.Errorf("%s: keep.log in the snapshot = %q, want %q", s.step, got, s.want)
		}
	}
	if got := e.Git("show", "refs/sandbox/it/rescue:c.txt"); got != "c" {
		t.Errorf("c.txt = %q", got)
	}
	e.MustSandbox("rm", "--force", "it")
}

// image build --engine builds the sandbox image there, offline from a base
// the engine has; start on that engine then needs nothing copied.
func TestCopyModeImageBuildOnTheEngine(t *testing.T) {
	eng := newEngine2(t, baseImage)
	e := NewEnv(t)
	copyEngineConfig(e, eng.Host)
	tag := fmt.Sprintf("git-sandbox-e2e-engine-built:%d", time.Now().UnixNano())
	r := e.MustSandbox("image", "build", "--engine", "two", "--base", baseImage, "--tag", tag, "--no-agents")
	if !strings.Contains(r.Stderr, "on engine two") {
		t.Errorf("image build does not say where:\n%s", r)
	}
	dockerAt(t, eng.Host, "image", "inspect", "--format", "{{.Id}}", tag)
	if _, err := dockerAtErr("", "image", "inspect", tag); err == nil {
		t.Errorf("the image was built on the main daemon too")
	}
	s := e.MustSandbox("start", "ib", "--engine", "two", "--image", tag, "--agent", "shell", "--network", "none", "--", "echo", "ran-in-built-image")
	if !strings.Contains(s.Stdout, "ran-in-built-image") || strings.Contains(s.Stderr, "copied to engine") {
		t.Errorf("start in the engine-built image:\n%s", s)
	}
}

// Copy mode for a user who is not root: the engine makes new volumes
// root's, the helper opens them to the user, and everything in them is the
// user's.
func TestCopyModeAsNonRootUser(t *testing.T) {
	if os.Getuid() != 0 {
		notRunHere(t, "creating the test's non-root user needs root", "run make test as root")
	}
	host := startEngine2(t)
	cred := testUser(t)
	root := t.TempDir()
	for p := root; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		must(t, os.Chmod(p, 0o755))
	}
	e := newEnvAt(t, root, cred)
	e.WriteConfig("base_image = %q\nverify = \"test -s mine.txt\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n", baseImage, host)
	r := e.MustSandbox("start", "nr", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--",
		"sh", "-c", `echo mine >mine.txt && git add mine.txt && git commit -qm mine && echo "uid:$(id -u) owner:$(stat -c %u mine.txt) home:$(touch $HOME/x && echo ok)"`)
	want := fmt.Sprintf("uid:%d owner:%d home:ok", cred.uid, cred.uid)
	if !strings.Contains(r.Stdout, want) {
		t.Errorf("agent output lacks %q:\n%s", want, r)
	}
	if v := e.Sandbox("verify", "nr"); v.Code != 0 {
		t.Errorf("verify as a user:\n%s", v)
	}
	e.MustSandbox("land", "nr", "-m", "as a user")
	if got := e.Git("show", "main:mine.txt"); got != "mine" {
		t.Errorf("main:mine.txt = %q", got)
	}
}

// doctor checks every configured engine: one that answers, in copy mode,
// and one that does not, which fails the check with its error.
func TestCopyModeDoctorChecksEngines(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n\n[[engine]]\nname = \"two\"\nhost = %q\nmode = \"copy\"\n\n[[engine]]\nname = \"gone\"\nhost = \"unix://%s/none.sock\"\n", baseImage, host, e.Root)
	r := e.Sandbox("doctor")
	if r.Code == 0 {
		t.Errorf("doctor passed with an engine down:\n%s", r)
	}
	if !regexp.MustCompile(`(?m)^ok   engine two: engine \S+, API \S+, copy mode`).MatchString(r.Stdout) {
		t.Errorf("doctor does not report engine two:\n%s", r)
	}
	if !regexp.MustCompile(`(?m)^FAIL engine gone: unreachable`).MatchString(r.Stdout) {
		t.Errorf("doctor does not fail engine gone:\n%s", r)
	}
}

// A follow-up task in a copy-mode sandbox runs in a new container made like
// the first: the same volumes, so the agent goes on with its files.
func TestCopyModeFollowUpTask(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	copyEngineConfig(e, host)
	e.MustSandbox("start", "fu", "--engine", "two", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo first >f.txt")
	r := e.MustSandbox("start", "fu", "-p", "second task", "--", "sh", "-c", `echo "saw:$(cat f.txt) task:$GIT_SANDBOX_PROMPT"; echo second >>f.txt`)
	if !strings.Contains(r.Stdout, "saw:first task:second task") {
		t.Errorf("the follow-up does not see the first task's files:\n%s", r)
	}
	assertNoBindMounts(t, host, containersOn(t, host, e.RepoID()))
	if got := e.Git("show", "refs/sandbox/fu/rescue:f.txt"); got != "first\nsecond" {
		t.Errorf("snapshot f.txt = %q", got)
	}
}

// An engine reached over TCP with mutual TLS (host = "tcp://…", cert_path):
// start, diff and land through it.
func TestCopyModeOverTLS(t *testing.T) {
	env := startEngine2TLS(t)
	var host, certs string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "DOCKER_HOST":
			host = v
		case "DOCKER_CERT_PATH":
			certs = v
		}
	}
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"tls\"\nhost = %q\ncert_path = %q\n", baseImage, host, certs)
	// mode auto: a tcp:// engine is copy mode.
	e.MustSandbox("start", "tl", "--engine", "tls", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo over-tls >t.txt")
	if p := e.PsOf("tl"); !strings.HasPrefix(p.Worktree, "(volume ") {
		t.Errorf("a tcp:// engine in mode auto is not copy mode: worktree %q", p.Worktree)
	}
	e.MustSandbox("land", "tl", "-m", "over TLS")
	if got := e.Git("show", "main:t.txt"); got != "over-tls" {
		t.Errorf("main:t.txt = %q", got)
	}
	// Without the client certificate the engine is not reached.
	e.WriteConfig("base_image = %q\n\n[[engine]]\nname = \"tls\"\nhost = %q\n", baseImage, host)
	if r := e.Sandbox("start", "t2", "--engine", "tls", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "cannot reach engine tls") {
		t.Errorf("start without the client certificate:\n%s", r)
	}
}

// An engine named by a Docker context (context = "NAME"), read from the
// Docker CLI's store of contexts.
func TestCopyModeThroughADockerContext(t *testing.T) {
	host := startEngine2(t)
	e := NewEnv(t)
	if r := e.Run(e.Repo, nil, "docker", "context", "create", "second", "--docker", "host="+host); r.Code != 0 {
		t.Fatalf("docker context create: %s", r)
	}
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"ctx\"\ncontext = \"second\"\n", baseImage)
	e.MustSandbox("start", "cx", "--engine", "ctx", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo via-context >c.txt")
	if ids := containersOn(t, host, e.RepoID()); len(ids) == 0 {
		t.Errorf("nothing on the engine the context names")
	}
	e.MustSandbox("land", "cx", "-m", "via a context")
	if got := e.Git("show", "main:c.txt"); got != "via-context" {
		t.Errorf("main:c.txt = %q", got)
	}
	e.WriteConfig("base_image = %q\n\n[[engine]]\nname = \"ctx\"\ncontext = \"nope\"\n", baseImage)
	if r := e.Sandbox("start", "c2", "--engine", "ctx", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, `no Docker context "nope"`) {
		t.Errorf("start with a context that does not exist:\n%s", r)
	}
}

// The allowlist network on an engine in copy mode: the proxy, loaded into
// a volume there, lets the agent reach the allowed host only (and one
// allowed live, loaded into the volume again); the agent has no route out
// of its own. The engine is the main daemon, configured in
// copy mode: the second engine runs without iptables, and on this machine
// its containers cannot reach each other over its networks (the host's
// FORWARD policy drops bridged traffic it has no rule for), so the proxy
// could not be reached there. Copy mode uses none of this machine's files
// whichever engine it runs on, and every container is inspected for it.
func TestCopyModeAllowlist(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	mainHost := mainDockerHost()
	e.WriteConfig("allow = [\"api.allowed.test\"]\negress_network = %q\nbase_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"here\"\nhost = %q\nmode = \"copy\"\n", e.egressNetwork(), baseImage, mainHost)
	e.MustSandbox("start", "al", "-d", "--engine", "here", "--agent", "shell", "--image", baseImage, "--", "sleep", "600")
	assertNoBindMounts(t, "", containersOn(t, "", e.RepoID()))
	egressNet := e.egressNetwork()
	upName, upIP := startUpstream(t, egressNet, "api.allowed.test", "api.denied.test")

	got := e.MustSandbox("exec", "al", "--", "bash", "-c", probeScript, "probe", upIP, "9").Stdout
	t.Logf("probe:\n%s", got)
	if s := section(got, "allowed"); !strings.Contains(s, "200 OK") || !strings.Contains(s, "hello from api.allowed.test") {
		t.Errorf("allowed host through the proxy:\n%s", s)
	}
	for _, name := range []string{"denied", "ip literal", "metadata"} {
		if s := section(got, name); !strings.Contains(s, " 403 ") {
			t.Errorf("%s: want 403 from the proxy:\n%s", name, s)
		}
	}
	if s := section(got, "connect"); !strings.Contains(s, " 200 ") || !strings.Contains(s, "tunnel to api.allowed.test") {
		t.Errorf("CONNECT to the allowed host:\n%s", s)
	}
	if s := section(got, "direct"); strings.Contains(s, "REACHED") || strings.Count(s, "unreachable") != 2 {
		t.Errorf("direct connections (must all fail):\n%s", s)
	}
	// Stop and start again: the proxy is loaded again and still works.
	e.MustSandbox("stop", "al")
	e.MustSandbox("start", "al", "-d")
	if s := section(e.MustSandbox("exec", "al", "--", "bash", "-c", probeScript, "probe", upIP, "9").Stdout, "allowed"); !strings.Contains(s, "hello from api.allowed.test") {
		t.Errorf("after a restart, the allowed host through the proxy:\n%s", s)
	}
	// A live change reaches the running proxy through its volume.
	e.MustSandbox("net", "allow", "al", "api.denied.test")
	if r := e.MustSandbox("exec", "al", "--", "bash", "-c", getScript, "get", "api.denied.test"); !strings.Contains(r.Stdout, "(api.denied.test)") {
		t.Errorf("after net allow, the host through the proxy:\n%s", r)
	}
	dockerAt(t, "", "rm", "-f", upName) // the test's own, on the sandbox's network
	e.MustSandbox("rm", "--force", "al")
	if vols := strings.Fields(dockerAt(t, "", "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID())); len(vols) > 0 {
		t.Errorf("volumes left after rm: %q", vols)
	}
	if nets := e.sandboxNetworks("al"); len(nets) > 0 {
		t.Errorf("networks left after rm: %q", nets)
	}
}

// mainDockerHost is the address of the Docker daemon the tests run on, as
// an [[engine]] host names it.
func mainDockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///var/run/docker.sock"
}
