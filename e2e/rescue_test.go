package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SnapshotEntry is one object of rescue list --json.
type SnapshotEntry struct {
	ID       string   `json:"id"`
	Tree     string   `json:"tree"`
	Branch   string   `json:"branch"`
	Time     string   `json:"time"`
	Reason   string   `json:"reason"`
	Changes  int      `json:"changes"`
	Baseline string   `json:"baseline"`
	Skipped  []string `json:"skipped"`
}

func (e *Env) Snapshots(branch string) []SnapshotEntry {
	e.t.Helper()
	args := []string{"rescue", "list", "--json"}
	if branch != "" {
		args = append(args, branch)
	}
	r := e.MustSandbox(args...)
	var list []SnapshotEntry
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		e.t.Fatalf("rescue list --json: %v\n%s", err, r.Stdout)
	}
	return list
}

// snapshotWith finds a snapshot whose tree holds path with content.
func (e *Env) snapshotWith(branch, path, content string) string {
	for _, s := range e.Snapshots(branch) {
		r := e.Run(e.Repo, nil, "git", "cat-file", "blob", s.ID+":"+path)
		if r.Code == 0 && r.Stdout == content {
			return s.ID
		}
	}
	return ""
}

// restoreAndCompare restores a snapshot as a branch and checks every given
// file byte for byte.
func (e *Env) restoreAndCompare(snap, branch string, files map[string]string) {
	e.t.Helper()
	e.MustSandbox("rescue", "restore", snap, "--branch", branch)
	for p, want := range files {
		r := e.Run(e.Repo, nil, "git", "cat-file", "blob", "refs/heads/"+branch+":"+p)
		if r.Code != 0 || r.Stdout != want {
			e.t.Errorf("restored %s:%s = %q (exit %d), want %q", branch, p, r.Stdout, r.Code, want)
		}
	}
}

// writerAgent writes numbered files, one every 0.2s, and never stops.
const writerAgent = `i=0; while true; do i=$((i+1)); echo "file $i" > "out-$i.txt"; sleep 0.2; done`

func TestKill9OfAttachedStartKeepsSnapshotting(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// The binary itself, not git's wrapper process: kill -9 must hit it.
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "start", "k9", "--agent", "shell", "--", "sh", "-c", writerAgent)
	cmd.Dir = e.Repo
	cmd.Env = e.vars
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	must(t, cmd.Start())
	wt := filepath.Join(e.State, e.RepoID(), "k9", "worktree")
	Eventually(t, 60*time.Second, "the agent to write out-5.txt", func() bool {
		_, err := os.Stat(filepath.Join(wt, "out-5.txt"))
		return err == nil
	})
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	// The supervisor is a separate process: snapshots continue.
	var snap string
	Eventually(t, 2*time.Minute, "a snapshot holding out-5.txt", func() bool {
		snap = e.snapshotWith("k9", "out-5.txt", "file 5\n")
		return snap != ""
	})
	e.restoreAndCompare(snap, "recovered/k9", map[string]string{"out-1.txt": "file 1\n", "out-5.txt": "file 5\n", "README.md": "hello\n"})
	e.MustSandbox("stop", "k9", "--timeout", "1s")
}

func TestDockerKillMidRunKeepsTheWork(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "dk", "-d", "--agent", "shell", "--", "sh", "-c", writerAgent)
	wt := e.Worktree("dk")
	Eventually(t, 60*time.Second, "the agent to write out-3.txt", func() bool {
		_, err := os.Stat(filepath.Join(wt, "out-3.txt"))
		return err == nil
	})
	runOK(t, "", nil, "docker", "kill", e.PsOf("dk").Container)
	// The supervisor takes the exit snapshot when the container dies.
	var snap string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("supervisor log:\n%s", readFile(filepath.Join(filepath.Dir(wt), "supervisor.log")))
		}
	})
	Eventually(t, 2*time.Minute, "an exit snapshot", func() bool {
		for _, s := range e.Snapshots("dk") {
			if s.Reason == "exit" {
				snap = s.ID
				return true
			}
		}
		return false
	})
	files := map[string]string{}
	entries, _ := os.ReadDir(wt)
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), "out-") {
			b, _ := os.ReadFile(filepath.Join(wt, en.Name()))
			files[en.Name()] = string(b)
		}
	}
	if len(files) < 3 {
		t.Fatalf("expected at least 3 files in the worktree, got %v", files)
	}
	e.restoreAndCompare(snap, "recovered/dk", files)
}

// destroyerAgent writes files, waits for a snapshot to hold them, then
// wipes the worktree, resets git and deletes its own repository.
const destroyerAgent = `
echo precious > precious.txt
mkdir -p deep/dir && printf 'keep\000me' > deep/dir/bin.dat
git add -A && git commit -qm "agent work"
while [ ! -e /workspace/.snapshotted ]; do sleep 0.1; done
rm -rf /workspace/* /workspace/.snapshotted
git reset -q --hard HEAD~1 2>/dev/null
rm -rf "$(git rev-parse --absolute-git-dir)"/* 2>/dev/null
echo destroyed
`

func TestDestructiveAgentCannotLoseSnapshottedWork(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "wipe", "-d", "--agent", "shell", "--", "sh", "-c", destroyerAgent)
	wt := e.Worktree("wipe")
	Eventually(t, 60*time.Second, "the agent's files", func() bool {
		_, err := os.Stat(filepath.Join(wt, "deep", "dir", "bin.dat"))
		return err == nil
	})
	e.MustSandbox("rescue", "snapshot", "wipe")
	must(t, os.WriteFile(filepath.Join(wt, ".snapshotted"), nil, 0o644))
	if r := e.Sandbox("wait", "wipe", "--timeout", "60s"); r.Code != 0 {
		t.Fatalf("wait: %s", r)
	}
	if _, err := os.Stat(filepath.Join(wt, "precious.txt")); !os.IsNotExist(err) {
		t.Fatalf("the agent did not wipe its worktree")
	}
	// bin.dat is written after precious.txt: a snapshot taken between the
	// two writes holds only the first.
	snap := e.snapshotWith("wipe", "deep/dir/bin.dat", "keep\x00me")
	if snap == "" {
		t.Fatal("no snapshot holds the agent's work")
	}
	e.restoreAndCompare(snap, "recovered/wipe", map[string]string{"precious.txt": "precious\n", "deep/dir/bin.dat": "keep\x00me"})
	// The host is unaffected by the agent deleting its repository.
	if st := e.GitIn(e.Repo, "status", "--porcelain"); st != "" {
		t.Errorf("main checkout status: %q", st)
	}
}

func TestRmForceThenRestore(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "gone", "--agent", "shell", "--", "sh", "-c", "echo 'the work' > work.txt; echo changed > README.md")
	if p := e.PsOf("gone"); p.Changes != 2 {
		t.Errorf("ps changes = %d, want 2", p.Changes)
	}
	e.MustSandbox("rm", "--force", "gone")
	// gc must not take the snapshots away.
	e.Git("gc", "-q", "--prune=now")
	list := e.Snapshots("gone")
	if len(list) == 0 {
		t.Fatalf("no snapshots after rm --force")
	}
	if list[0].Changes != 2 {
		t.Errorf("newest snapshot changes = %d, want 2", list[0].Changes)
	}
	e.restoreAndCompare(list[0].ID, "back", map[string]string{"work.txt": "the work\n", "README.md": "changed\n"})
	// The restored branch is one commit on top of where the sandbox began.
	if parent := e.Git("rev-parse", "back^"); parent != e.Git("rev-parse", "main") {
		t.Errorf("restored branch parent = %s, want main", parent)
	}
	// Restoring never overwrites without --force.
	if r := e.Sandbox("rescue", "restore", list[0].ID, "--branch", "back"); r.Code == 0 || !strings.Contains(r.Stderr, "already exists") {
		t.Errorf("restore over an existing branch: %s", r)
	}
	e.MustSandbox("rescue", "restore", list[0].ID, "--branch", "back", "--force")
	// A new sandbox of the same name keeps the old chain.
	e.MustSandbox("start", "gone", "--agent", "shell", "--", "true")
	if e.snapshotWith("gone", "work.txt", "the work\n") != list[0].ID {
		t.Errorf("the old sandbox's snapshots were lost when its name was reused: %+v", e.Snapshots("gone"))
	}
}

func TestSnapshotFileKinds(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".gitignore", "*.log\nbuild/\n")
	e.Git("add", ".gitignore")
	e.Git("commit", "-qm", "ignore")
	script := `
printf '\000\001\002binary\377' > blob.bin
printf '#!/bin/sh\necho hi\n' > run.sh && chmod +x run.sh
ln -s /etc/passwd link-out
ln -s README.md link-in
echo untracked > new.txt
echo ignored > debug.log
mkdir -p build empty/nested && echo ignored > build/out
`
	e.MustSandbox("start", "kinds", "--agent", "shell", "--", "sh", "-c", script)
	snap := e.Snapshots("kinds")[0]
	tree := e.Git("ls-tree", "-r", snap.ID)
	want := map[string]string{
		"blob.bin": "100644", "run.sh": "100755", "link-out": "120000", "link-in": "120000", "new.txt": "100644",
	}
	for p, mode := range want {
		if !strings.Contains(tree, mode+" blob ") || !containsLine(tree, mode, p) {
			t.Errorf("snapshot lacks %s with mode %s:\n%s", p, mode, tree)
		}
	}
	for _, p := range []string{"debug.log", "build/out", "empty"} {
		if strings.Contains(tree, "\t"+p) {
			t.Errorf("snapshot holds %s:\n%s", p, tree)
		}
	}
	if got := e.Git("cat-file", "blob", snap.ID+":link-out"); got != "/etc/passwd" {
		t.Errorf("symlink stored as %q, want its target", got)
	}
	e.restoreAndCompare(snap.ID, "kinds-back", map[string]string{"blob.bin": "\x00\x01\x02binary\xff", "run.sh": "#!/bin/sh\necho hi\n"})
	// Back into the worktree: remove everything, restore with --force.
	wt := e.Worktree("kinds")
	for _, p := range []string{"blob.bin", "run.sh", "link-out", "new.txt"} {
		must(t, os.Remove(filepath.Join(wt, p)))
	}
	must(t, os.WriteFile(filepath.Join(wt, "later.txt"), []byte("later\n"), 0o644))
	if r := e.Sandbox("rescue", "restore", snap.ID, "--worktree"); r.Code != 4 || !strings.Contains(r.Stderr, "--force") {
		t.Errorf("restore --worktree without --force: %s", r)
	}
	if _, err := os.Stat(filepath.Join(wt, "later.txt")); err != nil {
		t.Errorf("restore without --force changed the worktree")
	}
	e.MustSandbox("rescue", "restore", snap.ID, "--worktree", "--force")
	if fi, err := os.Lstat(filepath.Join(wt, "link-out")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link-out not restored as a symlink: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(wt, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh not restored executable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(wt, "later.txt")); !os.IsNotExist(err) {
		t.Errorf("later.txt survived restoring a snapshot without it")
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "debug.log")); string(b) != "ignored\n" {
		t.Errorf("an ignored file was touched by restore")
	}
	// The state before the restore is kept too.
	if e.snapshotWith("kinds", "later.txt", "later\n") == "" {
		t.Errorf("no snapshot of the state before the restore")
	}
}

func containsLine(tree, mode, path string) bool {
	for _, l := range strings.Split(tree, "\n") {
		if strings.HasPrefix(l, mode+" ") && strings.HasSuffix(l, "\t"+path) {
			return true
		}
	}
	return false
}

func TestCarry(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("staged.txt", "staged\n")
	e.Git("add", "staged.txt")
	e.WriteFile("README.md", "unstaged change\n")
	e.WriteFile("untracked.txt", "untracked\n")
	e.WriteFile(".gitignore", "*.tmp\n")
	e.WriteFile("ignored.tmp", "ignored\n")
	statusBefore := e.Git("status", "--porcelain")
	indexBefore, _ := os.ReadFile(filepath.Join(e.Repo, ".git", "index"))
	before := e.HostState()

	r := e.MustSandbox("start", "carry", "--carry", "--agent", "shell", "--", "sh", "-c", "git status --porcelain; cat staged.txt README.md untracked.txt")
	for _, want := range []string{"A  staged.txt", " M README.md", "?? untracked.txt", "staged\n", "unstaged change\n", "untracked\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the sandbox does not see %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "ignored.tmp") {
		t.Errorf("an ignored file was carried")
	}
	p := e.PsOf("carry")
	for p2, want := range map[string]string{"staged.txt": "staged\n", "README.md": "unstaged change\n", "untracked.txt": "untracked\n"} {
		if got := e.Git("cat-file", "blob", p.Baseline+":"+p2); got+"\n" != want {
			t.Errorf("baseline %s = %q, want %q", p2, got, want)
		}
	}
	if p.Changes != 0 {
		t.Errorf("carried work counted as the agent's: %d changes", p.Changes)
	}
	// The main checkout is exactly as it was.
	e.AssertSameHostState(before, "carry")
	if st := e.Git("status", "--porcelain"); st != statusBefore {
		t.Errorf("main checkout status changed:\n%s\nwas:\n%s", st, statusBefore)
	}
	if indexAfter, _ := os.ReadFile(filepath.Join(e.Repo, ".git", "index")); !bytes.Equal(indexBefore, indexAfter) {
		t.Errorf("the main checkout's index changed")
	}
}

// TestSnapshotRunsNoFilter: a filter in the user's global config, named by
// a .gitattributes the agent writes, must not run when snapshots are taken.
func TestSnapshotRunsNoFilter(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	mark := filepath.Join(e.Root, "FILTER-RAN")
	f, err := os.OpenFile(filepath.Join(e.Home, ".gitconfig"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("[filter \"x\"]\n\tclean = touch " + mark + "; cat\n\tsmudge = touch " + mark + "; cat\n[diff \"x\"]\n\ttextconv = touch " + mark + "; cat\n")
	must(t, err)
	must(t, f.Close())
	e.MustSandbox("start", "flt", "--agent", "shell", "--", "sh", "-c", "echo '* filter=x diff=x' > .gitattributes; echo data > data.txt")
	e.MustSandbox("rescue", "snapshot", "flt")
	e.MustSandbox("rescue", "show", e.Snapshots("flt")[0].ID)
	e.MustSandbox("ps")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the filter driver ran on the host")
	}
	if snap := e.snapshotWith("flt", "data.txt", "data\n"); snap == "" {
		t.Error("the snapshot does not hold data.txt")
	}
}

func TestSnapshotSkipsPathsGitCannotStore(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "skip", "--agent", "shell", "--", "sh", "-c", "mkdir -p .GIT/hooks && echo evil > .GIT/hooks/post-checkout; echo fine > fine.txt")
	s := e.Snapshots("skip")[0]
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], ".GIT/hooks/post-checkout") {
		t.Errorf("skipped = %q", s.Skipped)
	}
	if got := e.Git("cat-file", "blob", s.ID+":fine.txt"); got != "fine" {
		t.Errorf("the other files were not snapshotted: %q", got)
	}
}

func TestRescuePrune(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "old", "--agent", "shell", "--", "sh", "-c", "echo x > x")
	e.MustSandbox("start", "live", "--agent", "shell", "--", "sh", "-c", "echo y > y")
	e.MustSandbox("rm", "--force", "old")
	r := e.MustSandbox("rescue", "prune", "--older-than", "0s", "--dry-run")
	if !strings.Contains(r.Stderr, "would prune") || !strings.Contains(r.Stderr, "of old") || strings.Contains(r.Stderr, "of live") {
		t.Errorf("prune --dry-run: %s", r)
	}
	if len(e.Snapshots("old")) == 0 {
		t.Fatal("--dry-run deleted snapshots")
	}
	e.MustSandbox("rescue", "prune", "--older-than", "1h")
	if len(e.Snapshots("old")) == 0 {
		t.Fatal("snapshots newer than --older-than were pruned")
	}
	e.MustSandbox("rescue", "prune", "--older-than", "0s")
	if l := e.Snapshots("old"); len(l) != 0 {
		t.Errorf("old snapshots survived prune: %+v", l)
	}
	if l := e.Snapshots("live"); len(l) == 0 {
		t.Errorf("a live sandbox's snapshots were pruned")
	}
}
