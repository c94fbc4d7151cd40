package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// blobEntry is one non-tree entry of a commit's tree: its mode and content.
type blobEntry struct {
	Mode, Content string
}

// treeFiles reads every blob (and symlink) of a commit's tree, with modes
// and contents, from the host repository.
func (e *Env) treeFiles(rev string) map[string]blobEntry {
	e.t.Helper()
	files := map[string]blobEntry{}
	for _, line := range strings.Split(e.Git("ls-tree", "-r", "--full-tree", rev), "\n") {
		if line == "" {
			continue
		}
		meta, path, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			e.t.Fatalf("ls-tree %s: unexpected line %q", rev, line)
		}
		if f[1] != "blob" {
			files[path] = blobEntry{Mode: f[0], Content: f[1] + " " + f[2]}
			continue
		}
		r := e.Run(e.Repo, nil, "git", "cat-file", "blob", f[2])
		if r.Code != 0 {
			e.t.Fatalf("cat-file blob %s (%s): %s", f[2], path, r)
		}
		files[path] = blobEntry{Mode: f[0], Content: r.Stdout}
	}
	return files
}

// assertTree compares a commit's tree with the files expected in it, file
// by file.
func (e *Env) assertTree(rev string, want map[string]blobEntry) {
	e.t.Helper()
	got := e.treeFiles(rev)
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		g, gok := got[p]
		w, wok := want[p]
		switch {
		case !gok:
			e.t.Errorf("%s: %s is missing (want mode %s, %q)", rev, p, w.Mode, w.Content)
		case !wok:
			e.t.Errorf("%s: unexpected %s (mode %s, %q)", rev, p, g.Mode, g.Content)
		case g != w:
			e.t.Errorf("%s: %s = mode %s %q, want mode %s %q", rev, p, g.Mode, g.Content, w.Mode, w.Content)
		}
	}
}

// changedPaths lists the paths a commit changes against its first parent.
func (e *Env) changedPaths(rev string) []string {
	e.t.Helper()
	out := e.Git("diff-tree", "-r", "--no-renames", "--name-only", "--no-commit-id", rev+"^1", rev)
	if out == "" {
		return nil
	}
	list := strings.Split(out, "\n")
	sort.Strings(list)
	return list
}

// parents returns a commit's parents, in order.
func (e *Env) parents(rev string) []string {
	e.t.Helper()
	f := strings.Fields(e.Git("rev-list", "--parents", "-n", "1", rev))
	return f[1:]
}

// containerExists reports whether docker knows a container of that name.
func containerExists(t testing.TB, name string) bool {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "name="+name).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.TrimSpace(string(out)) != ""
}

// assertSandboxIntact checks that a sandbox survived a refused land: ps
// lists it, its branch and worktree exist and the worktree holds a file
// with the agent's content.
func (e *Env) assertSandboxIntact(branch, file, content string) {
	e.t.Helper()
	if !e.hasSandbox(branch) {
		e.t.Errorf("ps no longer lists %s", branch)
		return
	}
	if e.Git("branch", "--list", branch) == "" {
		e.t.Errorf("branch %s is gone", branch)
	}
	if got := readFile(filepath.Join(e.Worktree(branch), file)); got != content {
		e.t.Errorf("worktree %s of %s = %q, want %q", file, branch, got, content)
	}
}

// assertSandboxGone checks that nothing of a landed sandbox is left but its
// snapshots.
func (e *Env) assertSandboxGone(p PsEntry) {
	e.t.Helper()
	if list := e.Ps(); len(list) != 0 {
		e.t.Errorf("ps --json after land: %+v", list)
	}
	if b := e.Git("branch", "--list", p.Branch); b != "" {
		e.t.Errorf("branch %s left after land: %q", p.Branch, b)
	}
	if _, err := os.Stat(p.Worktree); !os.IsNotExist(err) {
		e.t.Errorf("worktree %s left after land: %v", p.Worktree, err)
	}
	if wl := e.Git("worktree", "list", "--porcelain"); strings.Contains(wl, p.Worktree) {
		e.t.Errorf("git still lists the worktree:\n%s", wl)
	}
	if containerExists(e.t, p.Container) {
		e.t.Errorf("container %s left after land", p.Container)
	}
	if len(e.Snapshots(p.Branch)) == 0 {
		e.t.Errorf("no snapshots of %s left after land", p.Branch)
	}
}

// everyKindOfChange adds, modifies, deletes and renames files, adds a
// binary file, sets an exec bit and adds a symlink; part of it committed in
// the agent's own repository, part left uncommitted.
const everyKindOfChange = `set -e
echo modified > modify.txt
git rm -q delete.txt
mkdir -p moved
git mv rename-me.txt moved/renamed.txt
printf '\000\001binary\377' > blob.bin
git add blob.bin modify.txt
git commit -q -m "agent: part one"
echo "agent-commit:$(git rev-parse HEAD)"
chmod +x script.sh
ln -s modify.txt link
echo new > new.txt
echo more >> dir/nested.txt
`

func TestLandAppliesEveryKindOfChangeAsOneCommit(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("modify.txt", "old\n")
	e.WriteFile("delete.txt", "delete me\n")
	e.WriteFile("rename-me.txt", "moving\n")
	e.WriteFile("script.sh", "#!/bin/sh\necho hi\n")
	e.WriteFile("dir/nested.txt", "nested\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "files")
	oldMain := e.Git("rev-parse", "main")
	want := e.treeFiles(oldMain)

	r := e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", everyKindOfChange)
	if c := between(r.Stdout, "agent-commit:", "\n"); len(c) != 40 {
		t.Fatalf("the agent did not commit:\n%s", r)
	}
	p := e.PsOf("t1")
	if len(p.Baseline) != 40 {
		t.Fatalf("ps has no baseline: %+v", p)
	}
	if !containerExists(t, p.Container) {
		t.Fatalf("no container %s before land", p.Container)
	}

	l := e.MustSandbox("land", "t1")
	newMain := e.Git("rev-parse", "main")
	if strings.TrimSpace(l.Stdout) != newMain {
		t.Errorf("land printed %q, main is %s", l.Stdout, newMain)
	}
	if n := e.Git("rev-list", "--count", oldMain+"..main"); n != "1" {
		t.Errorf("main has %s new commits, want 1", n)
	}
	if ps := e.parents("main"); !slices.Equal(ps, []string{oldMain}) {
		t.Errorf("parents of the landed commit = %v, want [%s]", ps, oldMain)
	}

	// old main's tree + (baseline → final snapshot).
	delete(want, "delete.txt")
	delete(want, "rename-me.txt")
	want["modify.txt"] = blobEntry{"100644", "modified\n"}
	want["moved/renamed.txt"] = blobEntry{"100644", "moving\n"}
	want["blob.bin"] = blobEntry{"100644", "\x00\x01binary\xff"}
	want["script.sh"] = blobEntry{"100755", "#!/bin/sh\necho hi\n"}
	want["link"] = blobEntry{"120000", "modify.txt"}
	want["new.txt"] = blobEntry{"100644", "new\n"}
	want["dir/nested.txt"] = blobEntry{"100644", "nested\nmore\n"}
	e.assertTree("main", want)

	msg := e.Git("log", "-1", "--format=%B", "main")
	for _, line := range []string{"Sandbox: t1", "Sandbox-Agent: shell", "Sandbox-Baseline: " + p.Baseline} {
		if !strings.Contains("\n"+msg+"\n", "\n"+line+"\n") {
			t.Errorf("commit message lacks the trailer %q:\n%s", line, msg)
		}
	}
	trailers := e.Git("log", "-1", "--format=%(trailers:key=Sandbox,valueonly)", "main")
	if trailers != "t1" {
		t.Errorf("git does not parse a Sandbox trailer t1 from the message: %q\n%s", trailers, msg)
	}
	if a := e.Git("log", "-1", "--format=%an <%ae>", "main"); a != "Test User <test@example.com>" {
		t.Errorf("author = %q", a)
	}
	if c := e.Git("log", "-1", "--format=%cn <%ce>", "main"); c != "Test User <test@example.com>" {
		t.Errorf("committer = %q", c)
	}

	e.assertSandboxGone(p)

	// The main checkout has main checked out: it follows.
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("main checkout not clean after land:\n%s", st)
	}
	for path, w := range want {
		full := filepath.Join(e.Repo, path)
		fi, err := os.Lstat(full)
		if err != nil {
			t.Errorf("main checkout lacks %s: %v", path, err)
			continue
		}
		switch w.Mode {
		case "120000":
			target, err := os.Readlink(full)
			if err != nil || target != w.Content {
				t.Errorf("main checkout %s: symlink to %q (%v), want %q", path, target, err, w.Content)
			}
		default:
			if got := readFile(full); got != w.Content {
				t.Errorf("main checkout %s = %q, want %q", path, got, w.Content)
			}
			if isExec := fi.Mode().Perm()&0o100 != 0; isExec != (w.Mode == "100755") {
				t.Errorf("main checkout %s has mode %v, want git mode %s", path, fi.Mode(), w.Mode)
			}
		}
	}
	for _, gone := range []string{"delete.txt", "rename-me.txt"} {
		if _, err := os.Lstat(filepath.Join(e.Repo, gone)); !os.IsNotExist(err) {
			t.Errorf("main checkout still has %s: %v", gone, err)
		}
	}
}

func TestLandCarryLeavesCarriedDirtInTheCheckout(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("other.txt", "other\n")
	e.Git("add", "other.txt")
	e.Git("commit", "-qm", "other")
	oldMain := e.Git("rev-parse", "main")
	e.WriteFile("README.md", "unstaged change\n")
	e.WriteFile("untracked.txt", "untracked\n")
	statusBefore := e.Git("status", "--porcelain")

	r := e.MustSandbox("start", "t1", "--carry", "--agent", "shell", "--", "sh", "-c",
		`cat README.md untracked.txt; echo "agent change" > other.txt`)
	if !strings.Contains(r.Stdout, "unstaged change") || !strings.Contains(r.Stdout, "untracked") {
		t.Fatalf("the dirt was not carried into the sandbox:\n%s", r)
	}
	e.MustSandbox("land", "t1")

	if ps := e.parents("main"); !slices.Equal(ps, []string{oldMain}) {
		t.Errorf("parents of the landed commit = %v, want [%s]", ps, oldMain)
	}
	if ch := e.changedPaths("main"); !slices.Equal(ch, []string{"other.txt"}) {
		t.Errorf("landed commit changes %v, want only other.txt", ch)
	}
	e.assertTree("main", map[string]blobEntry{
		"README.md": {"100644", "hello\n"},
		"other.txt": {"100644", "agent change\n"},
	})
	// The dirt stays in the main checkout, uncommitted and unchanged.
	if got := readFile(filepath.Join(e.Repo, "README.md")); got != "unstaged change\n" {
		t.Errorf("README.md in the main checkout = %q", got)
	}
	if got := readFile(filepath.Join(e.Repo, "untracked.txt")); got != "untracked\n" {
		t.Errorf("untracked.txt in the main checkout = %q", got)
	}
	if got := readFile(filepath.Join(e.Repo, "other.txt")); got != "agent change\n" {
		t.Errorf("other.txt in the main checkout = %q", got)
	}
	if st := e.Git("status", "--porcelain"); st != statusBefore {
		t.Errorf("main checkout status after land:\n%s\nwant:\n%s", st, statusBefore)
	}
}

func TestLandOntoMovedBase(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("agent.txt", "one\ntwo\nthree\n")
	e.WriteFile("host.txt", "host\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "files")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `printf 'one\nTWO by agent\nthree\n' > agent.txt`)
	e.WriteFile("host.txt", "host moved on\n")
	e.Git("commit", "-qam", "host change")
	moved := e.Git("rev-parse", "main")

	e.MustSandbox("land", "t1")
	if ps := e.parents("main"); !slices.Equal(ps, []string{moved}) {
		t.Errorf("parents of the landed commit = %v, want the moved main [%s]", ps, moved)
	}
	e.assertTree("main", map[string]blobEntry{
		"README.md": {"100644", "hello\n"},
		"agent.txt": {"100644", "one\nTWO by agent\nthree\n"},
		"host.txt":  {"100644", "host moved on\n"},
	})
	if ch := e.changedPaths("main"); !slices.Equal(ch, []string{"agent.txt"}) {
		t.Errorf("landed commit changes %v, want only agent.txt", ch)
	}
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("main checkout not clean:\n%s", st)
	}
}

func TestLandConflictChangesNothing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("lines.txt", "one\ntwo\nthree\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "lines")
	agentVersion := "one\nTWO by agent\nthree\n"
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `printf 'one\nTWO by agent\nthree\n' > lines.txt; echo fine > fine.txt`)
	e.WriteFile("lines.txt", "one\nTWO by host\nthree\n")
	e.Git("commit", "-qam", "host change to the same line")
	mainBefore := e.Git("rev-parse", "main")
	before := e.HostState()
	indexBefore := e.Git("ls-files", "--stage")
	wt := e.Worktree("t1")

	r := e.Sandbox("land", "t1")
	if r.Code != 3 {
		t.Errorf("land of a conflicting change: want exit 3, got %s", r)
	}
	if !strings.Contains(r.Stderr, "lines.txt") || !strings.Contains(r.Stderr, "conflict") {
		t.Errorf("land does not name the conflicted path:\n%s", r.Stderr)
	}
	if strings.Contains(r.Stderr, "fine.txt") {
		t.Errorf("land names a path that does not conflict:\n%s", r.Stderr)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved from %s to %s", mainBefore, got)
	}
	e.AssertSameHostState(before, "t1")
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("main checkout changed:\n%s", st)
	}
	if idx := e.Git("ls-files", "--stage"); idx != indexBefore {
		t.Errorf("the main checkout's index changed:\n%s\nwas:\n%s", idx, indexBefore)
	}
	e.assertSandboxIntact("t1", "lines.txt", agentVersion)
	if got := e.Worktree("t1"); got != wt {
		t.Errorf("worktree moved from %s to %s", wt, got)
	}
	if got := readFile(filepath.Join(wt, "fine.txt")); got != "fine\n" {
		t.Errorf("worktree fine.txt = %q", got)
	}
}

func TestLandCleanCheckoutFollows(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo changed > README.md; mkdir -p sub; echo added > sub/new.txt`)
	r := e.MustSandbox("land", "t1")
	if !strings.Contains(r.Stderr, "updated the checkout") {
		t.Errorf("land does not say it updated the checkout:\n%s", r.Stderr)
	}
	if st := e.Git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("main checkout not clean after land:\n%s", st)
	}
	// The index matches the new commit, not just the files.
	if d := e.Git("diff-index", "--cached", "--name-only", "HEAD"); d != "" {
		t.Errorf("index differs from HEAD: %q", d)
	}
	if got := e.Git("show", ":sub/new.txt"); got != "added" {
		t.Errorf("index sub/new.txt = %q", got)
	}
	for p, want := range map[string]string{"README.md": "changed\n", "sub/new.txt": "added\n"} {
		if got := readFile(filepath.Join(e.Repo, p)); got != want {
			t.Errorf("main checkout %s = %q, want %q", p, got, want)
		}
	}
}

func TestLandKeepsUnrelatedLocalChanges(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("agent.txt", "agent\n")
	e.WriteFile("unrelated.txt", "unrelated\n")
	e.WriteFile("staged.txt", "staged\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "files")
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo "agent change" > agent.txt`)
	// Dirt elsewhere: unstaged, staged and untracked.
	e.WriteFile("unrelated.txt", "unrelated dirt\n")
	e.WriteFile("staged.txt", "staged dirt\n")
	e.Git("add", "staged.txt")
	e.WriteFile("stray.txt", "stray\n")
	statusBefore := e.Git("status", "--porcelain")

	e.MustSandbox("land", "t1")
	if ps := e.parents("main"); !slices.Equal(ps, []string{oldMain}) {
		t.Errorf("parents = %v, want [%s]", ps, oldMain)
	}
	if ch := e.changedPaths("main"); !slices.Equal(ch, []string{"agent.txt"}) {
		t.Errorf("landed commit changes %v, want only agent.txt", ch)
	}
	for p, want := range map[string]string{"agent.txt": "agent change\n", "unrelated.txt": "unrelated dirt\n", "staged.txt": "staged dirt\n", "stray.txt": "stray\n"} {
		if got := readFile(filepath.Join(e.Repo, p)); got != want {
			t.Errorf("main checkout %s = %q, want %q", p, got, want)
		}
	}
	if st := e.Git("status", "--porcelain"); st != statusBefore {
		t.Errorf("main checkout status after land:\n%s\nwant:\n%s", st, statusBefore)
	}
	if got := e.Git("show", ":staged.txt"); got != "staged dirt" {
		t.Errorf("the staged change was lost from the index: %q", got)
	}
	if got := e.Git("show", ":agent.txt"); got != "agent change" {
		t.Errorf("index agent.txt = %q", got)
	}
}

func TestLandRefusesOverLocalChangesToTheSamePath(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile("agent.txt", "agent\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "files")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo "agent change" > agent.txt`)
	e.WriteFile("agent.txt", "my local edit\n")
	mainBefore := e.Git("rev-parse", "main")
	before := e.HostState()
	indexBefore := e.Git("ls-files", "--stage")

	r := e.Sandbox("land", "t1")
	if r.Code != 4 {
		t.Errorf("land over local changes: want exit 4, got %s", r)
	}
	if !strings.Contains(r.Stderr, "agent.txt") || !strings.Contains(r.Stderr, "local changes where the land would write") {
		t.Errorf("the refusal does not name the path:\n%s", r.Stderr)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	if got := readFile(filepath.Join(e.Repo, "agent.txt")); got != "my local edit\n" {
		t.Errorf("the local edit was changed: %q", got)
	}
	if idx := e.Git("ls-files", "--stage"); idx != indexBefore {
		t.Errorf("the main checkout's index changed:\n%s\nwas:\n%s", idx, indexBefore)
	}
	if st := e.Run(e.Repo, nil, "git", "status", "--porcelain").Stdout; st != " M agent.txt\n" {
		t.Errorf("main checkout status = %q, want only the local edit", st)
	}
	e.AssertSameHostState(before, "t1")
	e.assertSandboxIntact("t1", "agent.txt", "agent change\n")
}

func TestLandRefusesARunningSandbox(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "-d", "--agent", "shell", "--", "sh", "-c",
		`echo work > work.txt; while [ ! -e /workspace/go ]; do sleep 0.1; done`)
	wt := e.Worktree("t1")
	Eventually(t, 30*time.Second, "the agent's work.txt", func() bool {
		return readFile(filepath.Join(wt, "work.txt")) == "work\n"
	})
	mainBefore := e.Git("rev-parse", "main")
	before := e.HostState()
	r := e.Sandbox("land", "t1")
	if r.Code != 4 || !strings.Contains(r.Stderr, "running") {
		t.Errorf("land of a running sandbox: want exit 4 mentioning running, got %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	e.AssertSameHostState(before, "t1")
	// An interval snapshot may have it paused this instant.
	if p := e.PsOf("t1"); p.State != "running" && p.State != "paused" {
		t.Errorf("the refused land changed the sandbox: %+v", p)
	}
	// Once the agent is done, the same land goes through.
	must(t, os.WriteFile(filepath.Join(wt, "go"), nil, 0o644))
	if w := e.Sandbox("wait", "t1", "--timeout", "60s"); w.Code != 0 {
		t.Fatalf("wait: %s", w)
	}
	e.MustSandbox("land", "t1")
	if got := e.Git("show", "main:work.txt"); got != "work" {
		t.Errorf("main:work.txt = %q", got)
	}
}

func TestLandRefusesFailedVerifyUnlessForced(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "t1", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", `echo work > work.txt`)
	before := e.HostState()
	r := e.Sandbox("land", "t1")
	if r.Code != 4 || !strings.Contains(r.Stderr, "verify failed") {
		t.Errorf("land after a failed verify: want exit 4 saying verify failed, got %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("main moved to %s", got)
	}
	e.AssertSameHostState(before, "t1")
	e.assertSandboxIntact("t1", "work.txt", "work\n")

	// A dry run says what would happen, and nothing happens.
	r = e.MustSandbox("land", "t1", "--force", "--dry-run")
	if !strings.Contains(r.Stderr, "verify FAILED (exit code 1), would land with --force") || strings.Contains(r.Stderr, "landed") {
		t.Errorf("land --force --dry-run does not say what it would do:\n%s", r.Stderr)
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("land --dry-run moved main to %s", got)
	}

	r = e.MustSandbox("land", "t1", "--force")
	if !strings.Contains(r.Stderr, "verify FAILED (exit code 1), landed with --force") {
		t.Errorf("land --force does not say verify failed:\n%s", r.Stderr)
	}
	if ps := e.parents("main"); !slices.Equal(ps, []string{oldMain}) {
		t.Errorf("parents = %v, want [%s]", ps, oldMain)
	}
	if got := e.Git("show", "main:work.txt"); got != "work" {
		t.Errorf("main:work.txt = %q", got)
	}
	if e.hasSandbox("t1") {
		t.Errorf("the sandbox is still listed after land --force")
	}
}

func TestLandRefusesStaleVerify(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "t1", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", `echo ok > ok.txt`)
	if v := e.Sandbox("verify", "t1"); v.Code != 0 {
		t.Fatalf("verify of a tree with ok.txt: %s", v)
	}
	wt := e.PsOf("t1").Worktree
	must(t, os.WriteFile(filepath.Join(wt, "later.txt"), []byte("changed after verify\n"), 0o644))
	before := e.HostState()
	r := e.Sandbox("land", "t1")
	if r.Code != 4 || !strings.Contains(r.Stderr, "verify ran on another version") {
		t.Errorf("land after verify of other work: want exit 4 about a stale verify, got %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("main moved to %s", got)
	}
	e.AssertSameHostState(before, "t1")
	e.assertSandboxIntact("t1", "later.txt", "changed after verify\n")
	// Verifying what would land now lifts the refusal.
	if v := e.Sandbox("verify", "t1"); v.Code != 0 {
		t.Fatalf("verify again: %s", v)
	}
	e.MustSandbox("land", "t1")
	e.assertTree("main", map[string]blobEntry{
		"README.md": {"100644", "hello\n"},
		"ok.txt":    {"100644", "ok\n"},
		"later.txt": {"100644", "changed after verify\n"},
	})
}

func TestLandMergeKeepsTheAgentsCommits(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	oldMain := e.Git("rev-parse", "main")
	r := e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `set -e
echo one > one.txt; git add one.txt; git commit -q -m "agent: first commit"
echo two > two.txt; git add two.txt; git commit -q -m "agent: second commit"
echo "agent-head:$(git rev-parse HEAD)"`)
	head := between(r.Stdout, "agent-head:", "\n")
	if len(head) != 40 {
		t.Fatalf("the agent did not report its head:\n%s", r)
	}
	p := e.PsOf("t1")
	e.MustSandbox("land", "t1", "--merge")
	if ps := e.parents("main"); !slices.Equal(ps, []string{oldMain, head}) {
		t.Errorf("parents of the landed merge = %v, want [%s %s]", ps, oldMain, head)
	}
	subjects := e.Git("log", "--format=%s", "main")
	for _, s := range []string{"agent: first commit", "agent: second commit"} {
		if !strings.Contains(subjects, s) {
			t.Errorf("git log of main lacks %q:\n%s", s, subjects)
		}
	}
	if got := e.Git("rev-list", "--count", oldMain+"..main"); got != "3" {
		t.Errorf("main gained %s commits, want 3 (two of the agent's and the merge)", got)
	}
	e.assertTree("main", map[string]blobEntry{
		"README.md": {"100644", "hello\n"},
		"one.txt":   {"100644", "one\n"},
		"two.txt":   {"100644", "two\n"},
	})
	if msg := e.Git("log", "-1", "--format=%B", "main"); !strings.Contains(msg, "Sandbox: t1") {
		t.Errorf("merge message lacks its trailers:\n%s", msg)
	}
	e.assertSandboxGone(p)
}

func TestLandKeepThenLandAgain(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo first > first.txt`)
	wt := e.Worktree("t1")
	e.MustSandbox("land", "t1", "--keep")
	first := e.Git("rev-parse", "main")
	if ps := e.parents(first); !slices.Equal(ps, []string{oldMain}) {
		t.Errorf("parents = %v, want [%s]", ps, oldMain)
	}
	if ch := e.changedPaths(first); !slices.Equal(ch, []string{"first.txt"}) {
		t.Errorf("first land changes %v", ch)
	}
	if !e.hasSandbox("t1") {
		t.Fatalf("ps no longer lists t1 after land --keep")
	}
	if got := readFile(filepath.Join(wt, "first.txt")); got != "first\n" {
		t.Fatalf("the worktree did not survive land --keep: first.txt = %q", got)
	}
	// A second change lands alone on top of the first.
	must(t, os.WriteFile(filepath.Join(wt, "second.txt"), []byte("second\n"), 0o644))
	e.MustSandbox("land", "t1")
	if ps := e.parents("main"); !slices.Equal(ps, []string{first}) {
		t.Errorf("second land's parents = %v, want [%s]", ps, first)
	}
	if ch := e.changedPaths("main"); !slices.Equal(ch, []string{"second.txt"}) {
		t.Errorf("second land changes %v, want only second.txt", ch)
	}
	e.assertTree("main", map[string]blobEntry{
		"README.md":  {"100644", "hello\n"},
		"first.txt":  {"100644", "first\n"},
		"second.txt": {"100644", "second\n"},
	})
	if e.hasSandbox("t1") {
		t.Errorf("t1 still listed after the final land")
	}
}

func TestLandDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo changed > README.md; echo new > new.txt`)
	p := e.PsOf("t1")
	mainBefore := e.Git("rev-parse", "main")
	before := e.HostState()
	r := e.MustSandbox("land", "t1", "--dry-run")
	for _, want := range []string{"Land sandbox t1", "Sandbox: t1", "Sandbox-Agent: shell", "Sandbox-Baseline: " + p.Baseline, "M\tREADME.md", "A\tnew.txt"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("land --dry-run stdout lacks %q:\n%s", want, r.Stdout)
		}
	}
	if !strings.Contains(r.Stderr, "nothing was changed") {
		t.Errorf("land --dry-run stderr:\n%s", r.Stderr)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	e.AssertSameHostState(before, "t1")
	e.assertSandboxIntact("t1", "new.txt", "new\n")
	if got := readFile(filepath.Join(e.Repo, "new.txt")); got != "<absent>" {
		t.Errorf("--dry-run wrote new.txt into the main checkout")
	}
}

func TestLandOntoOtherBranch(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.Git("checkout", "-q", "-b", "other")
	e.WriteFile("other.txt", "other\n")
	e.Git("add", "other.txt")
	e.Git("commit", "-qm", "other branch")
	e.Git("checkout", "-q", "main")
	oldMain := e.Git("rev-parse", "main")
	oldOther := e.Git("rev-parse", "other")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo new > new.txt`)
	p := e.PsOf("t1")
	e.MustSandbox("land", "t1", "--onto", "other")
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("main moved to %s", got)
	}
	if ps := e.parents("other"); !slices.Equal(ps, []string{oldOther}) {
		t.Errorf("parents on other = %v, want [%s]", ps, oldOther)
	}
	e.assertTree("other", map[string]blobEntry{
		"README.md": {"100644", "hello\n"},
		"other.txt": {"100644", "other\n"},
		"new.txt":   {"100644", "new\n"},
	})
	// main is checked out, not other: the checkout stays as it was.
	if _, err := os.Lstat(filepath.Join(e.Repo, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("the main checkout got new.txt although other was landed on")
	}
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("main checkout status: %q", st)
	}
	e.assertSandboxGone(p)
}

// evilCommit commits a tree with .GIT/hooks/post-checkout in the agent's
// repository through plumbing (a checkout would refuse it).
const evilCommit = `set -e
b=$(echo evil | git hash-object -w --stdin)
h=$(printf "100644 blob $b\tpost-checkout\n" | git mktree)
d=$(printf "040000 tree $h\thooks\n" | git mktree)
t=$( (git ls-tree HEAD; printf "040000 tree $d\t.GIT\n") | git mktree)
c=$(echo "innocent" | git commit-tree $t -p HEAD)
git update-ref HEAD $c
echo "evil-commit:$c"
echo "evil-tree:$d"
echo innocent > innocent.txt
`

func TestLandRefusesAgentCommitWithGitLikePath(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", evilCommit)
	c := between(r.Stdout, "evil-commit:", "\n")
	d := between(r.Stdout, "evil-tree:", "\n")
	if len(c) != 40 || len(d) != 40 {
		t.Fatalf("the agent did not make its commit:\n%s", r)
	}
	if ls := e.GitIn(e.Repo, "--git-dir", e.PrivateGitDir("t1"), "ls-tree", "-r", "--name-only", c); !strings.Contains(ls, ".GIT/hooks/post-checkout") {
		t.Fatalf("the agent's commit does not hold .GIT/hooks/post-checkout:\n%s", ls)
	}
	mainBefore := e.Git("rev-parse", "main")
	before := e.HostState()
	l := e.Sandbox("land", "t1")
	if l.Code == 0 {
		t.Fatalf("land of a commit with .GIT/hooks succeeded: %s", l)
	}
	if l.Code != 4 {
		t.Errorf("land of a commit with .GIT/hooks: want exit 4 (refused), got %s", l)
	}
	if !strings.Contains(strings.ToLower(l.Stderr), ".git") {
		t.Errorf("the refusal does not name .GIT:\n%s", l.Stderr)
	}
	if got := e.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	e.AssertSameHostState(before, "t1")
	for _, id := range []string{c, d} {
		if x := e.Run(e.Repo, nil, "git", "cat-file", "-e", id); x.Code == 0 {
			t.Errorf("object %s of the evil commit is in the host object store", id)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.Repo, ".GIT")); !os.IsNotExist(err) {
		t.Errorf(".GIT appeared in the main checkout")
	}
	if !e.hasSandbox("t1") {
		t.Errorf("the refused sandbox is gone")
	}
}

func TestLandTwoSandboxesOneAfterTheOther(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo one > one.txt`)
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `echo two > two.txt; echo changed > README.md`)
	e.MustSandbox("land", "t1")
	first := e.Git("rev-parse", "main")
	e.MustSandbox("land", "t2")
	if n := e.Git("rev-list", "--count", oldMain+"..main"); n != "2" {
		t.Errorf("main gained %s commits, want 2", n)
	}
	if ps := e.parents(first); !slices.Equal(ps, []string{oldMain}) {
		t.Errorf("first land's parents = %v", ps)
	}
	if ps := e.parents("main"); !slices.Equal(ps, []string{first}) {
		t.Errorf("second land's parents = %v, want [%s]", ps, first)
	}
	if got := e.Git("log", "-1", "--format=%(trailers:key=Sandbox,valueonly)", first); got != "t1" {
		t.Errorf("first landed commit is from sandbox %q", got)
	}
	if got := e.Git("log", "-1", "--format=%(trailers:key=Sandbox,valueonly)", "main"); got != "t2" {
		t.Errorf("second landed commit is from sandbox %q", got)
	}
	if ch := e.changedPaths("main"); !slices.Equal(ch, []string{"README.md", "two.txt"}) {
		t.Errorf("second land changes %v", ch)
	}
	e.assertTree("main", map[string]blobEntry{
		"README.md": {"100644", "changed\n"},
		"one.txt":   {"100644", "one\n"},
		"two.txt":   {"100644", "two\n"},
	})
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("main checkout status: %q", st)
	}
	if list := e.Ps(); len(list) != 0 {
		t.Errorf("sandboxes left: %+v", list)
	}
}

func TestDiffShowsWhatLandWouldApply(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo changed > README.md; echo new > new.txt; ln -s /etc/passwd pw`)
	before := e.HostState()

	r := e.MustSandbox("diff", "t1", "--name-only")
	got := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	sort.Strings(got)
	if !slices.Equal(got, []string{"README.md", "new.txt", "pw"}) {
		t.Errorf("diff --name-only = %q, want README.md, new.txt, pw", r.Stdout)
	}

	r = e.MustSandbox("diff", "t1", "--stat")
	for _, want := range []string{"README.md", "new.txt", "pw", "3 files changed"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("diff --stat lacks %q:\n%s", want, r.Stdout)
		}
	}

	r = e.MustSandbox("diff", "t1")
	if !strings.Contains(r.Stdout, "look at these twice:") || !strings.Contains(r.Stdout, "! pw: symlink to /etc/passwd") {
		t.Errorf("diff does not flag the symlink to /etc/passwd:\n%s", r.Stdout)
	}
	for _, want := range []string{"-hello", "+changed", "+new", "new file mode 120000"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("diff patch lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "\x1b[") {
		t.Errorf("diff coloured output that is not a terminal")
	}
	e.AssertSameHostState(before, "t1")

	// Nothing changed: nothing to land.
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "true")
	r = e.Sandbox("diff", "t2")
	if r.Code != 0 || !strings.Contains(r.Stderr, "nothing to land") || r.Stdout != "" {
		t.Errorf("diff of an empty change: %s", r)
	}
}

// TestLandRefusesOverIgnoredFiles: an ignored file in the checkout at a
// path the land writes is the user's (a local secret, a build output);
// land refuses rather than replace it.
func TestLandRefusesOverIgnoredFiles(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".gitignore", "*.local\n")
	e.Git("add", ".gitignore")
	e.Git("commit", "-qm", "ignore")
	e.MustSandbox("start", "ign", "--agent", "shell", "--", "sh", "-c", ": > .gitignore; echo agent > secret.local")
	e.WriteFile("secret.local", "MY LOCAL PASSWORD\n")
	main := e.Git("rev-parse", "main")
	r := e.Sandbox("land", "ign")
	if r.Code != 4 || !strings.Contains(r.Stderr, "secret.local") {
		t.Errorf("land over an ignored file: %s", r)
	}
	if b, _ := os.ReadFile(filepath.Join(e.Repo, "secret.local")); string(b) != "MY LOCAL PASSWORD\n" {
		t.Errorf("the ignored file was overwritten: %q", b)
	}
	if got := e.Git("rev-parse", "main"); got != main {
		t.Errorf("main moved")
	}
}

// TestLandKeepLeavesNothingUnlanded: after land --keep, the sandbox has no
// unlanded work: ps counts none, diff has nothing, rm needs no --force.
func TestLandKeepLeavesNothingUnlanded(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "kp", "--agent", "shell", "--", "sh", "-c", "echo one > one.txt")
	e.MustSandbox("land", "kp", "--keep")
	if p := e.PsOf("kp"); p.Changes != 0 {
		t.Errorf("ps after land --keep counts %d changes", p.Changes)
	}
	if r := e.MustSandbox("diff", "kp"); !strings.Contains(r.Stderr, "nothing to land") {
		t.Errorf("diff after land --keep: %s", r)
	}
	if r := e.Sandbox("rm", "kp"); r.Code != 0 {
		t.Errorf("rm after land --keep: %s", r)
	}
}

// TestLandOntoKeepMovesTheBase: land --onto release --keep makes release
// the sandbox's base: ps shows it, and the next land (without --onto)
// lands the newer work on release. The base stayed main while the
// baseline moved to what landed on release, so the next land said
// "nothing to land" on main and the work never reached it.
func TestLandOntoKeepMovesTheBase(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.Git("branch", "release")
	oldMain := e.Git("rev-parse", "main")
	e.MustSandbox("start", "rk", "--agent", "shell", "--", "sh", "-c", `echo fix > fix.txt`)
	wt := e.Worktree("rk")
	r := e.MustSandbox("land", "rk", "--onto", "release", "--keep")
	if !strings.Contains(r.Stderr, "the base of rk is now release") {
		t.Errorf("land --onto --keep does not say the base moved:\n%s", r.Stderr)
	}
	if p := e.PsOf("rk"); p.Base != "release" || p.Changes != 0 {
		t.Errorf("after land --onto release --keep ps shows base %q and %d changes, want release and 0", p.Base, p.Changes)
	}
	first := e.Git("rev-parse", "release")
	must(t, os.WriteFile(filepath.Join(wt, "second.txt"), []byte("second\n"), 0o644))
	r = e.MustSandbox("land", "rk")
	if !strings.Contains(r.Stderr, "on release as") {
		t.Errorf("the next land did not go to release:\n%s", r.Stderr)
	}
	if ps := e.parents("release"); !slices.Equal(ps, []string{first}) {
		t.Errorf("second land's parents = %v, want [%s]", ps, first)
	}
	if ch := e.changedPaths("release"); !slices.Equal(ch, []string{"second.txt"}) {
		t.Errorf("second land changes %v, want only second.txt", ch)
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("main moved to %s", got)
	}
}

// TestLandNestedRepositoryHintAndForceAgree: for every kind of nested
// repository the agent can leave (empty, without commits, a gitlink in its
// index, one with uncommitted files), diff's hint and land agree: land and
// land --dry-run refuse naming it and --force, and --force (dry run or
// not) goes ahead and lands the rest. A gitlink the agent tracked was not
// counted as a nested repository (its repository was deleted with the
// worktree, uncommitted files and all), and one whose repository had no
// commit was refused under --force as a path "git cannot store".
func TestLandNestedRepositoryHintAndForceAgree(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	const commit = `(cd n && echo a > a && $G add a && $G commit -q -m a)`
	cases := []struct{ name, script string }{
		{"empty", `git init -q n`},
		{"nocommit", `git init -q n && echo x > n/f`},
		{"gitlink", `git init -q n && ` + commit + ` && git add n`},
		{"gitlink-nocommit", `git init -q n && ` + commit + ` && git add n && rm -rf n/.git && git init -q n`},
		{"dirty", `git init -q n && ` + commit + ` && echo b > n/b`},
		{"gitlink-dirty", `git init -q n && ` + commit + ` && git add n && echo b > n/b`},
	}
	for _, c := range cases {
		name := c.name
		e.MustSandbox("start", name, "--agent", "shell", "--", "sh", "-c",
			`set -e; G="git -c user.name=a -c user.email=a@example.com"; mkdir -p `+name+` && cd `+name+` && `+c.script+` && echo top > top.txt`)
		nested := name + "/n"
		d := e.MustSandbox("diff", name)
		if !strings.Contains(d.Stderr, nested+" is a nested git repository") || !strings.Contains(d.Stderr, "--force goes ahead") {
			t.Errorf("%s: diff does not name the nested repository and --force:\n%s", name, d)
		}
		if strings.Contains(d.Stderr, "cannot be stored by git") {
			t.Errorf("%s: diff says the nested repository cannot be stored, which --force does not go past:\n%s", name, d)
		}
		for _, args := range [][]string{{"land", name, "--dry-run"}, {"land", name}} {
			r := e.Sandbox(args...)
			if r.Code != 4 || !strings.Contains(r.Stderr, "nested git repository whose files are in no snapshot: "+nested) ||
				!strings.Contains(r.Stderr, "git sandbox land --force "+name) {
				t.Errorf("%s: %v: want the nested repository's refusal (4), got:\n%s", name, args, r)
			}
		}
		if r := e.Sandbox("land", name, "--dry-run", "--force"); r.Code != 0 || !strings.Contains(r.Stdout, name+"/top.txt") {
			t.Errorf("%s: land --dry-run --force does not show top.txt landing:\n%s", name, r)
		}
		if r := e.Sandbox("land", name, "--force"); r.Code != 0 {
			t.Errorf("%s: land --force: %s", name, r)
		} else if got := e.Git("show", "main:"+name+"/top.txt"); got != "top" {
			t.Errorf("%s: land --force landed top.txt as %q", name, got)
		}
		if e.hasSandbox(name) {
			t.Errorf("%s: land --force left the sandbox", name)
		}
	}
}

// TestLandSubmoduleAtItsCommitIsNotNested: a submodule of the user's
// repository that the agent checked out at the commit the repository
// records is not the agent's work: land goes ahead without --force. (The
// agent makes the very same commit here, as a clone would bring it.)
func TestLandSubmoduleAtItsCommitIsNotNested(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	const same = `git init -q lib && cd lib && printf 'int lib;\n' > lib.c && git add lib.c && ` +
		`GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.com GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.com ` +
		`GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z' git commit -q -m lib`
	if r := e.Run(e.Root, nil, "sh", "-c", same); r.Code != 0 {
		t.Fatal(r)
	}
	e.Git("-c", "protocol.file.allow=always", "submodule", "-q", "add", filepath.Join(e.Root, "lib"), "vendor/lib")
	e.Git("commit", "-q", "-m", "add a submodule")
	link := e.Git("rev-parse", "HEAD:vendor/lib")
	r := e.MustSandbox("start", "sm", "--agent", "shell", "--", "sh", "-c",
		`set -e; rmdir vendor/lib; cd vendor && `+same+` && cd ../.. && git rev-parse HEAD:vendor/lib && git -C vendor/lib rev-parse HEAD && echo app > app.txt`)
	if strings.Count(r.Stdout, link) != 2 {
		t.Fatalf("the agent did not check out the submodule at %s:\n%s", link, r)
	}
	d := e.MustSandbox("diff", "sm")
	if strings.Contains(d.Stderr, "nested git repository") {
		t.Errorf("diff counts the submodule at its commit as a nested repository:\n%s", d)
	}
	e.MustSandbox("land", "sm")
	if got := e.Git("show", "main:app.txt"); got != "app" {
		t.Errorf("main:app.txt = %q", got)
	}
	if got := e.Git("rev-parse", "main:vendor/lib"); got != link {
		t.Errorf("main's vendor/lib = %s, want %s", got, link)
	}
}
