package agentrepo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

func TestCheckName(t *testing.T) {
	bad := []string{".git", ".GIT", ".Git ", ".git.", "git~1", "GIT~1", ".g\u200cit", ".git::$INDEX_ALLOCATION", "..", ".", "", "a/b"}
	for _, n := range bad {
		if CheckName(n) == nil {
			t.Errorf("CheckName(%q) accepted", n)
		}
	}
	for _, n := range []string{".github", ".gitignore", "git", "x.git", ".gitmodules", "main.go"} {
		if err := CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	if CheckPath("src/.GIT/hooks/post-checkout") == nil {
		t.Error("CheckPath accepted a .GIT component")
	}
}

func TestCheckGitmodules(t *testing.T) {
	if err := CheckGitmodules([]byte("[submodule \"a\"]\n\tpath = lib/a\n\turl = https://example.com/a.git\n")); err != nil {
		t.Errorf("a plain .gitmodules was refused: %v", err)
	}
	for _, bad := range []string{
		"[submodule \"a\"]\n\tpath = lib/a\r\n\turl = x\n",
		"[submodule \"a\"]\n\tpath = lib/a\n\turl = --upload-pack=evil\n",
		"[submodule \"a\"]\n\tpath = .git/hooks\n",
		"[submodule \"a\"]\n\tpath = ../../outside\n",
	} {
		if CheckGitmodules([]byte(bad)) == nil {
			t.Errorf("CheckGitmodules accepted %q", bad)
		}
	}
	if !IsGitmodules(".GITMODULES ") || !IsGitmodules(".gitmodules\r") || IsGitmodules(".gitmodules.bak") {
		t.Error("IsGitmodules")
	}
}

func git(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// setup makes a host repository with one commit and an agent repository
// created by Init, plus a worktree for the agent to commit from.
func setup(t *testing.T) (host *gitcmd.Runner, hostDir, priv, wt string) {
	t.Helper()
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	root := t.TempDir()
	hostDir = filepath.Join(root, "host")
	git(t, root, nil, "init", "-q", "-b", "main", hostDir)
	os.WriteFile(filepath.Join(hostDir, "a.txt"), []byte("a\n"), 0o644)
	git(t, hostDir, nil, "add", ".")
	git(t, hostDir, nil, "commit", "-qm", "init")
	git(t, hostDir, nil, "branch", "sb")
	host = &gitcmd.Runner{GitDir: filepath.Join(hostDir, ".git")}
	priv = filepath.Join(root, "priv")
	wt = filepath.Join(root, "wt")
	os.MkdirAll(wt, 0o755)
	git(t, hostDir, nil, "--work-tree", wt, "checkout", "sb", "--", ".")
	refs, err := host.Run(context.Background(), nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/tags/")
	if err != nil {
		t.Fatal(err)
	}
	// The agent's repository borrows the host's whole store here: these
	// tests are about what sync takes back, not what the agent may read
	// (internal/visible).
	if err := Init(InitOptions{GitDir: priv, HostCommonDir: filepath.Join(hostDir, ".git"), Branch: "sb",
		Alternates: []string{filepath.Join(hostDir, ".git", "objects")}, Refs: refs}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wt, ".git"), Gitfile(priv), 0o644)
	git(t, wt, nil, "read-tree", "HEAD")
	return host, hostDir, priv, wt
}

func TestInitAndHead(t *testing.T) {
	_, hostDir, priv, wt := setup(t)
	want := git(t, hostDir, nil, "rev-parse", "sb")
	got, ref, err := Head(priv)
	if err != nil || got != want || ref != "refs/heads/sb" {
		t.Fatalf("Head = %q %q %v, want %q", got, ref, err, want)
	}
	if st := git(t, wt, nil, "status", "--porcelain"); st != "" {
		t.Errorf("status in the agent's worktree: %q", st)
	}
	// The agent commits; its HEAD moves, loose ref.
	os.WriteFile(filepath.Join(wt, "b.txt"), []byte("b\n"), 0o644)
	git(t, wt, nil, "add", "b.txt")
	git(t, wt, nil, "commit", "-qm", "b")
	c := git(t, wt, nil, "rev-parse", "HEAD")
	if got, _, _ := Head(priv); got != c {
		t.Errorf("Head after commit = %q, want %q", got, c)
	}
}

func TestHeadDoesNotFollowSymlinksOut(t *testing.T) {
	_, _, priv, _ := setup(t)
	outside := filepath.Join(t.TempDir(), "ref")
	os.WriteFile(outside, []byte(strings.Repeat("ab", 20)+"\n"), 0o644)
	os.Remove(filepath.Join(priv, "refs", "heads", "sb"))
	os.Remove(filepath.Join(priv, "packed-refs"))
	if err := os.Symlink(outside, filepath.Join(priv, "refs", "heads", "sb")); err != nil {
		t.Fatal(err)
	}
	if id, _, err := Head(priv); err == nil {
		t.Errorf("Head followed a symlink out of the agent's repository: %q", id)
	}
}

func TestSyncBringsCommitsBack(t *testing.T) {
	host, hostDir, priv, wt := setup(t)
	os.MkdirAll(filepath.Join(wt, "d"), 0o755)
	os.WriteFile(filepath.Join(wt, "d", "c.txt"), []byte("c\n"), 0o644)
	git(t, wt, nil, "add", ".")
	git(t, wt, nil, "commit", "-qm", "c")
	os.WriteFile(filepath.Join(wt, "e.txt"), []byte("e\n"), 0o644)
	git(t, wt, nil, "add", ".")
	git(t, wt, nil, "commit", "-qm", "e")
	head := git(t, wt, nil, "rev-parse", "HEAD")
	res, err := Sync(context.Background(), host, priv, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Head != head || res.Objects == 0 {
		t.Errorf("Sync = %+v", res)
	}
	if got := git(t, hostDir, nil, "log", "--format=%s", head); got != "e\nc\ninit" {
		t.Errorf("host log of the agent's head = %q", got)
	}
	git(t, hostDir, nil, "fsck", "--strict", "--no-dangling")
	// Again: nothing new.
	if res, err := Sync(context.Background(), host, priv, "", ""); err != nil || res.Objects != 0 {
		t.Errorf("second Sync = %+v, %v", res, err)
	}
}

func TestSyncRefusesDotGitTree(t *testing.T) {
	host, hostDir, priv, wt := setup(t)
	blob := git(t, wt, nil, "hash-object", "-w", "--stdin")
	_ = blob
	b := strings.TrimSpace(git(t, wt, []string{}, "hash-object", "-w", filepath.Join(wt, "a.txt")))
	hooks := mktree(t, wt, "100644 blob "+b+"\tpost-checkout\n")
	dotgit := mktree(t, wt, "040000 tree "+hooks+"\thooks\n")
	root := mktree(t, wt, "040000 tree "+dotgit+"\t.GIT\n100644 blob "+b+"\ta.txt\n")
	c := git(t, wt, nil, "commit-tree", root, "-p", "HEAD", "-m", "evil")
	git(t, wt, nil, "update-ref", "refs/heads/sb", c)
	_, err := Sync(context.Background(), host, priv, "", "")
	if err == nil || !strings.Contains(err.Error(), ".git") {
		t.Fatalf("Sync accepted a .GIT tree: %v", err)
	}
	if out := exec.Command("git", "-C", hostDir, "cat-file", "-e", c).Run(); out == nil {
		t.Errorf("the evil commit reached the host store")
	}
}

func mktree(t *testing.T, dir, spec string) string {
	t.Helper()
	cmd := exec.Command("git", "mktree", "--missing")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(spec)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mktree: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestSyncChecksTreesTheUserStoreAlreadyHas: snapshots write the agent's
// trees into the user's store unchecked; a commit naming such a tree is
// still checked.
func TestSyncChecksTreesTheUserStoreAlreadyHas(t *testing.T) {
	host, hostDir, priv, wt := setup(t)
	start := git(t, hostDir, nil, "rev-parse", "sb")
	// The "snapshot": a tree with a bad .gitmodules, written to the host.
	bad := filepath.Join(t.TempDir(), "gm")
	os.WriteFile(bad, []byte("[submodule \"s\"]\n\tpath = s\r\n\turl = ./s\n"), 0o644)
	blob := git(t, hostDir, nil, "hash-object", "-w", bad)
	a := git(t, hostDir, nil, "rev-parse", "sb:a.txt")
	tree := mktree(t, hostDir, "100644 blob "+blob+"\t.gitmodules\n100644 blob "+a+"\ta.txt\n")
	// The agent commits that tree (its alternates reach the host store).
	c := git(t, wt, nil, "commit-tree", tree, "-p", "HEAD", "-m", "uses a snapshot tree")
	git(t, wt, nil, "update-ref", "refs/heads/sb", c)
	if _, err := Sync(context.Background(), host, priv, start, ""); err == nil || !strings.Contains(err.Error(), "carriage return") {
		t.Fatalf("Sync accepted a commit whose (already stored) tree has a bad .gitmodules: %v", err)
	}
	// A commit on the start tree itself passes.
	c2 := git(t, wt, nil, "commit-tree", git(t, hostDir, nil, "rev-parse", "sb^{tree}"), "-p", start, "-m", "same tree")
	git(t, wt, nil, "update-ref", "refs/heads/sb", c2)
	if res, err := Sync(context.Background(), host, priv, start, ""); err != nil || res.Head != c2 {
		t.Fatalf("Sync of a commit on the start tree = %+v, %v", res, err)
	}
}

// TestSyncChecksAHeadTheUserStoreHas: the agent points HEAD at a commit
// already in the user's store (a snapshot it found there); its tree is
// still checked.
func TestSyncChecksAHeadTheUserStoreHas(t *testing.T) {
	host, hostDir, priv, _ := setup(t)
	start := git(t, hostDir, nil, "rev-parse", "sb")
	b := git(t, hostDir, nil, "rev-parse", "sb:a.txt")
	hooks := mktree(t, hostDir, "100644 blob "+b+"\tpost-checkout\n")
	dotgit := mktree(t, hostDir, "040000 tree "+hooks+"\thooks\n")
	root := mktree(t, hostDir, "040000 tree "+dotgit+"\t.g\u200cit\n")
	snap := git(t, hostDir, nil, "commit-tree", root, "-p", start, "-m", "a snapshot")
	os.WriteFile(filepath.Join(priv, "refs", "heads", "sb"), []byte(snap+"\n"), 0o644)
	if _, err := Sync(context.Background(), host, priv, start, ""); err == nil {
		t.Fatal("Sync accepted a HEAD already in the user's store whose tree holds .g\u200cit")
	}
	if res, err := Sync(context.Background(), host, priv, start, snap); err != nil || res.Head != snap {
		t.Errorf("a HEAD checked before is not checked again: %+v, %v", res, err)
	}
}

func TestIndexListsStagedEntries(t *testing.T) {
	d := t.TempDir()
	env := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	git(t, d, env, "init", "-q")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(d, ".gitignore"), []byte("*.out\n"), 0o644))
	must(os.WriteFile(filepath.Join(d, "staged.out"), []byte("s\n"), 0o755))
	git(t, d, env, "add", ".gitignore")
	git(t, d, env, "add", "-f", "staged.out")
	git(t, d, env, "update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,sub")
	got, err := Index(filepath.Join(d, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexEntry{
		{Path: ".gitignore", Mode: "100644", ID: "3f6a7d9b4ab8b0f0b3bd0d4c04a0f7b0e0a4c4e1"},
		{Path: "staged.out", Mode: "100755"},
		{Path: "sub", Mode: "160000", ID: "1111111111111111111111111111111111111111"},
	}
	if len(got) != len(want) {
		t.Fatalf("Index = %+v", got)
	}
	for i := range want {
		if got[i].Path != want[i].Path || got[i].Mode != want[i].Mode || (i == 2 && got[i].ID != want[i].ID) {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if es, err := Index(t.TempDir()); err != nil || es != nil {
		t.Errorf("no index: %v %v", es, err)
	}
}

// TestSyncRefusesHistoryOutsideTheSandbox: the agent's history may take in
// no commit of the user's store but the start's history (another
// sandbox's snapshot, a stash), and must descend from the start.
func TestSyncRefusesHistoryOutsideTheSandbox(t *testing.T) {
	host, hostDir, priv, wt := setup(t)
	start := git(t, hostDir, nil, "rev-parse", "sb")
	tree := git(t, hostDir, nil, "rev-parse", "sb^{tree}")
	other := git(t, hostDir, nil, "commit-tree", tree, "-p", start, "-m", "another sandbox's snapshot")
	git(t, hostDir, nil, "update-ref", "refs/sandbox/other/rescue", other)
	stash := git(t, hostDir, nil, "commit-tree", tree, "-m", "a dangling commit")
	for _, tc := range []struct {
		name, want string
		parents    []string
	}{
		{"on a snapshot", "another sandbox's snapshots (refs/sandbox/other/rescue)", []string{other}},
		{"merging a snapshot", "another sandbox's snapshots", []string{start, other}},
		{"merging a dangling commit", "not in the sandbox's history", []string{start, stash}},
		{"without a parent", "does not descend", nil},
	} {
		args := []string{"commit-tree", tree, "-m", tc.name}
		for _, p := range tc.parents {
			args = append(args, "-p", p)
		}
		c := git(t, wt, nil, args...)
		git(t, wt, nil, "update-ref", "refs/heads/sb", c)
		_, err := Sync(context.Background(), host, priv, start, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Sync = %v, want a refusal naming %q", tc.name, err, tc.want)
		}
		if exec.Command("git", "-C", hostDir, "cat-file", "-e", c).Run() == nil {
			t.Errorf("%s: the refused commit reached the host store", tc.name)
		}
	}
	// HEAD moved onto the snapshot itself, or onto an unrelated commit.
	for _, head := range []string{other, stash} {
		os.WriteFile(filepath.Join(priv, "refs", "heads", "sb"), []byte(head+"\n"), 0o644)
		if _, err := Sync(context.Background(), host, priv, start, ""); err == nil {
			t.Errorf("Sync accepted HEAD at %s", head)
		}
	}
}

// TestSyncBudget: an object over the budget is refused from its header,
// before it is read; objects larger than what is read whole come back
// byte for byte; the total is bounded too.
func TestSyncBudget(t *testing.T) {
	host, hostDir, priv, wt := setup(t)
	start := git(t, hostDir, nil, "rev-parse", "sb")
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	os.WriteFile(filepath.Join(wt, "big.bin"), big, 0o644)
	git(t, wt, nil, "add", "big.bin")
	git(t, wt, nil, "commit", "-q", "-m", "big")
	head := git(t, wt, nil, "rev-parse", "HEAD")
	_, err := SyncWithin(context.Background(), host, priv, start, "", Budget{MaxObject: 1 << 20, ObjectSetting: "budget.sync_object"})
	if err == nil || !strings.Contains(err.Error(), "the file big.bin is 3MiB, over the 1MiB allowed (budget.sync_object)") {
		t.Fatalf("SyncWithin accepted a file over the budget: %v", err)
	}
	_, err = SyncWithin(context.Background(), host, priv, start, "", Budget{MaxTotal: 2 << 20, TotalSetting: "budget.sync"})
	if err == nil || !strings.Contains(err.Error(), "more than 2MiB of new objects") {
		t.Fatalf("SyncWithin went over the total budget: %v", err)
	}
	if exec.Command("git", "-C", hostDir, "cat-file", "-e", head).Run() == nil {
		t.Fatal("a refused commit reached the host store")
	}
	res, err := SyncWithin(context.Background(), host, priv, start, "", DefaultBudget)
	if err != nil || res.Head != head {
		t.Fatalf("Sync = %+v, %v", res, err)
	}
	out, err := exec.Command("git", "-C", hostDir, "cat-file", "blob", head+":big.bin").Output()
	if err != nil || string(out) != string(big) {
		t.Fatalf("the streamed blob differs (%d bytes, %v)", len(out), err)
	}
}

func TestPackEntryHeader(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want []byte
	}{
		{0, []byte{0x30}},
		{15, []byte{0x3f}},
		{16, []byte{0xb0, 0x01}},
		{1 << 30, []byte{0xb0, 0x80, 0x80, 0x80, 0x20}},
	} {
		if got := packEntryHeader(3, tc.size); string(got) != string(tc.want) {
			t.Errorf("packEntryHeader(blob, %d) = %x, want %x", tc.size, got, tc.want)
		}
	}
}
