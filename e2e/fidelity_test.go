package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// parsedTrailers is what git interpret-trailers --parse finds in a
// commit's message.
func (e *Env) parsedTrailers(rev string) string {
	e.t.Helper()
	r := e.Run(e.Repo, nil, "sh", "-c", `git log -1 --format=%B "$1" | git interpret-trailers --parse`, "sh", rev)
	if r.Code != 0 {
		e.t.Fatalf("interpret-trailers: %s", r)
	}
	return r.Stdout
}

// The sandbox trailers join the message's own trailer block, so a DCO
// check still finds Signed-off-by; a forced land says so in a trailer.
func TestLandTrailersJoinTheMessagesTrailerBlock(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", `echo work > work.txt`)
	msg := "feat: add work\n\nThe body.\n\nSigned-off-by: Test User <test@example.com>"
	if r := e.Sandbox("land", "t1", "-m", msg); r.Code != 4 {
		t.Fatalf("land after a failed verify: %s", r)
	}
	e.MustSandbox("land", "t1", "--force", "-m", msg)
	got := e.parsedTrailers("main")
	p := "Signed-off-by: Test User <test@example.com>\nSandbox: t1\nSandbox-Agent: shell\n"
	if !strings.HasPrefix(got, p) || !strings.Contains(got, "\nSandbox-Forced: verify failed\n") {
		t.Errorf("git interpret-trailers --parse of the landed commit:\n%s\nwant Signed-off-by, the sandbox trailers and Sandbox-Forced together", got)
	}
	if subj := e.Git("log", "-1", "--format=%s", "main"); subj != "feat: add work" {
		t.Errorf("subject = %q", subj)
	}

	// A subject-only message that looks like a trailer keeps its subject.
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `echo more > more.txt`)
	e.MustSandbox("land", "t2", "-m", "fix: more")
	if subj := e.Git("log", "-1", "--format=%s", "main"); subj != "fix: more" {
		t.Errorf("subject = %q", subj)
	}
	if got := e.parsedTrailers("main"); !strings.HasPrefix(got, "Sandbox: t2\n") || strings.Contains(got, "Sandbox-Forced") {
		t.Errorf("trailers of a plain land:\n%s", got)
	}
}

// A file of the checkout whose stat data changed but not its content
// (touch) does not stop the checkout from following the land.
func TestLandAfterTouchInTheCheckout(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo changed > README.md`)
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(e.Repo, "README.md"), later, later))
	e.MustSandbox("land", "t1")
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("checkout not clean after land:\n%s", st)
	}
	if got := readFile(filepath.Join(e.Repo, "README.md")); got != "changed\n" {
		t.Errorf("README.md = %q", got)
	}
}

// diffOnTerminal runs git sandbox diff ARGS on a pseudo-terminal and
// returns what the terminal showed.
func (e *Env) diffOnTerminal(extraEnv []string, args ...string) string {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), append([]string{"diff"}, args...)...)
	cmd.Dir = e.Repo
	cmd.Env = append(append(append([]string{}, e.vars...), "TERM=xterm"), extraEnv...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 120})
	must(e.t, err)
	defer ptmx.Close()
	out := &ptyOutput{}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(out, ptmx); close(copied) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatalf("diff %q on a terminal: %v\n%s", args, err, out.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		e.t.Fatalf("diff %q on a terminal did not end:\n%s", args, out.String())
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	return out.String()
}

// diff shows renames as git diff does, takes pathspecs after --, shows
// word diffs, and pages through the user's pager on a terminal.
func TestDiffRenamesPathspecsWordDiffAndPager(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	var long strings.Builder
	for i := 1; i <= 37; i++ {
		fmt.Fprintf(&long, "line %d of a file that moves\n", i)
	}
	e.WriteFile("long.txt", long.String())
	e.Git("add", "long.txt")
	e.Git("commit", "-q", "-m", "long")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `mkdir -p src && mv long.txt src/moved.txt && echo 'hello world' > README.md`)

	r := e.MustSandbox("diff", "t1")
	for _, want := range []string{"rename from long.txt", "rename to src/moved.txt", "-hello", "+hello world"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "deleted file mode") {
		t.Errorf("diff shows the rename as a delete and an add:\n%s", r.Stdout)
	}
	if st := e.MustSandbox("diff", "t1", "--stat").Stdout; !strings.Contains(st, "long.txt => src/moved.txt") {
		t.Errorf("diff --stat shows no rename:\n%s", st)
	}

	r = e.MustSandbox("diff", "t1", "--", "README.md")
	if !strings.Contains(r.Stdout, "+hello world") || strings.Contains(r.Stdout, "long.txt") {
		t.Errorf("diff -- README.md:\n%s", r.Stdout)
	}
	r = e.MustSandbox("diff", "t1", "--name-only", "--", "src/")
	if strings.TrimSpace(r.Stdout) != "src/moved.txt" {
		t.Errorf("diff --name-only -- src/ = %q", r.Stdout)
	}
	r = e.Sandbox("diff", "t1", "--", "nothing-here")
	if r.Code != 0 || r.Stdout != "" || !strings.Contains(r.Stderr, "nothing to land at these paths") {
		t.Errorf("diff of a path with no change: %s", r)
	}

	r = e.MustSandbox("diff", "t1", "--word-diff", "--", "README.md")
	if !strings.Contains(r.Stdout, "hello {+world+}") {
		t.Errorf("diff --word-diff:\n%s", r.Stdout)
	}

	// On a terminal: GIT_PAGER, then core.pager; --no-pager prints directly.
	paged := filepath.Join(e.Root, "paged")
	e.diffOnTerminal([]string{"GIT_PAGER=cat > " + paged}, "t1")
	if got := readFile(paged); !strings.Contains(got, "rename to src/moved.txt") {
		t.Errorf("GIT_PAGER did not get the diff: %q", got)
	}
	if !strings.Contains(readFile(paged), "\x1b[") {
		t.Errorf("the pager got no colour")
	}
	cored := filepath.Join(e.Root, "core-paged")
	e.Git("config", "core.pager", "cat > "+cored)
	e.diffOnTerminal(nil, "t1", "--", "README.md")
	if got := readFile(cored); !strings.Contains(got, "world") {
		t.Errorf("core.pager did not get the diff: %q", got)
	}
	must(t, os.Remove(cored))
	out := e.diffOnTerminal(nil, "t1", "--no-pager")
	if _, err := os.Stat(cored); err == nil || !strings.Contains(out, "rename to src/moved.txt") {
		t.Errorf("diff --no-pager used the pager (%v) or did not print:\n%s", err, out)
	}
	e.diffOnTerminal([]string{"GIT_PAGER=cat"}, "t1")
	if _, err := os.Stat(cored); err == nil {
		t.Errorf("GIT_PAGER=cat did not override core.pager")
	}
}

// Files the agent force-adds (git add -f of an ignored path), committed or
// only staged, are in diff and land; ignored files it left alone are not.
func TestForceAddedFilesAreSnapshottedAndLanded(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".gitignore", "*.out\n")
	e.Git("add", ".gitignore")
	e.Git("commit", "-q", "-m", "ignore outputs")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `set -e
mkdir -p gen
echo kept > gen/kept.out; git add -f gen/kept.out; git commit -q -m "agent: force-add"
echo staged > staged.out; git add -f staged.out
echo junk > junk.out`)
	r := e.MustSandbox("diff", "t1", "--name-only")
	if got := strings.Fields(r.Stdout); strings.Join(got, " ") != "gen/kept.out staged.out" {
		t.Errorf("diff --name-only = %q, want gen/kept.out and staged.out", r.Stdout)
	}
	e.MustSandbox("land", "t1")
	if got := e.Git("show", "main:gen/kept.out"); got != "kept" {
		t.Errorf("main:gen/kept.out = %q", got)
	}
	if got := e.Git("show", "main:staged.out"); got != "staged" {
		t.Errorf("main:staged.out = %q", got)
	}
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", "main:junk.out"); r.Code == 0 {
		t.Errorf("an ignored file the agent did not add was landed")
	}
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("checkout not clean after land:\n%s", st)
	}
}

// -e values reach the agent unchanged, commas included.
func TestEnvFlagKeepsCommas(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "-e", "NO_PROXY=localhost,127.0.0.1", "-e", "B=x,y", "--", "sh", "-c", `printf '%s|%s\n' "$NO_PROXY" "$B" > env.txt`)
	if got := readFile(filepath.Join(e.Worktree("t1"), "env.txt")); got != "localhost,127.0.0.1|x,y\n" {
		t.Errorf("the agent saw %q", got)
	}
}

// dirSize is the bytes the files under dir take on disk.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	must(t, err)
	return n
}

// An untracked file larger than rescue.max_file_size (default 50 MiB) is
// left out of snapshots and said so everywhere; a huge sparse file is
// judged by its size without being read. A file the agent tracks is kept
// whatever its size.
func TestLargeUntrackedFilesAreSkipped(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	gitDir := filepath.Join(e.Repo, ".git")
	// The big file is written under an ignored name and renamed: an
	// interval snapshot while it is still under the limit would take
	// what was written so far, as it should.
	must(t, os.WriteFile(filepath.Join(gitDir, "info", "exclude"), []byte("*.partial\n"), 0o644))
	before := dirSize(t, gitDir)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `set -e
head -c 62914560 /dev/urandom > big.partial
mv big.partial big.bin
truncate -s 4G sparse.img
echo small > small.txt`)
	grown := dirSize(t, gitDir) - before
	if grown > 1<<20 {
		t.Errorf(".git grew by %d bytes with a 60 MiB file and a 4 GiB sparse file skipped", grown)
	}
	ps := e.MustSandbox("ps")
	if !strings.Contains(ps.Stderr, "t1: 2 untracked file(s) larger than rescue.max_file_size") {
		t.Errorf("ps does not warn:\n%s", ps.Stderr)
	}
	d := e.MustSandbox("diff", "t1", "--name-only")
	if strings.TrimSpace(d.Stdout) != "small.txt" || !strings.Contains(d.Stderr, "big.bin (60MiB) is larger than rescue.max_file_size and would not land") ||
		!strings.Contains(d.Stderr, "sparse.img (4GiB)") {
		t.Errorf("diff:\n%s", d)
	}
	snap := e.PsOf("t1").Snapshot
	show := e.MustSandbox("rescue", "show", snap)
	if !strings.Contains(show.Stdout, "skipped  big.bin (60MiB, larger than rescue.max_file_size)") {
		t.Errorf("rescue show does not list the skipped file:\n%s", show.Stdout)
	}
	if msg := e.Git("log", "-1", "--format=%B", snap); !strings.Contains(msg, `Sandbox-Too-Large: 62914560 "big.bin"`) {
		t.Errorf("the snapshot has no trailer for the skipped file:\n%s", msg)
	}
	if r := e.Sandbox("land", "t1"); r.Code != 4 || !strings.Contains(r.Stderr, "big.bin (60MiB, over rescue.max_file_size)") {
		t.Errorf("land without --force would lose big.bin: want a refusal, got:\n%s", r)
	}
	l := e.MustSandbox("land", "t1", "--force")
	if !strings.Contains(l.Stderr, "big.bin (60MiB) is larger than rescue.max_file_size and was not landed") {
		t.Errorf("land does not flag the skipped file:\n%s", l.Stderr)
	}
	if got := e.Git("ls-tree", "--name-only", "main"); got != "README.md\nsmall.txt" {
		t.Errorf("main holds %q", got)
	}
	if grown := dirSize(t, gitDir) - before; grown > 1<<20 {
		t.Errorf(".git grew by %d bytes after land", grown)
	}

	// A lower limit; a file the agent tracks is kept whatever its size.
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\nmax_file_size = \"1m\"\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage)
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `set -e
head -c 2097152 /dev/zero > tracked.bin; git add tracked.bin
head -c 2097152 /dev/zero > loose.bin`)
	d = e.MustSandbox("diff", "t2", "--name-only")
	if strings.TrimSpace(d.Stdout) != "tracked.bin" || !strings.Contains(d.Stderr, "loose.bin (2MiB)") {
		t.Errorf("diff with max_file_size = 1m:\n%s", d)
	}
}

// Snapshots keep a submodule's gitlink as the agent tracks it: restore
// --branch keeps it, land does not trip over it, and files the agent wrote
// inside the (uninitialised) submodule are named, not landed.
func TestSubmoduleGitlinksAreKept(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	sub := filepath.Join(e.Root, "sub")
	must(t, os.MkdirAll(sub, 0o755))
	e.GitIn(sub, "init", "-q")
	must(t, os.WriteFile(filepath.Join(sub, "lib.c"), []byte("int lib;\n"), 0o644))
	e.GitIn(sub, "add", "lib.c")
	e.GitIn(sub, "commit", "-q", "-m", "lib")
	e.Git("-c", "protocol.file.allow=always", "submodule", "-q", "add", sub, "vendor/lib")
	e.Git("commit", "-q", "-m", "add a submodule")
	link := e.Git("rev-parse", "HEAD:vendor/lib")

	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `set -e
mkdir -p vendor/lib
echo hack > vendor/lib/hack.c
echo app > app.txt`)
	p := e.PsOf("t1")
	if got := e.Git("ls-tree", p.Baseline, "vendor/lib"); got != "160000 commit "+link+"\tvendor/lib" {
		t.Errorf("the baseline's vendor/lib = %q, want the gitlink %s", got, link)
	}
	d := e.MustSandbox("diff", "t1", "--name-only")
	if strings.TrimSpace(d.Stdout) != "app.txt" || !strings.Contains(d.Stderr, "the agent wrote files inside the submodule vendor/lib") {
		t.Errorf("diff:\n%s", d)
	}
	e.MustSandbox("rescue", "restore", p.Snapshot, "--branch", "restored")
	if got := e.Git("ls-tree", "restored", "vendor/lib"); got != "160000 commit "+link+"\tvendor/lib" {
		t.Errorf("restore --branch: vendor/lib = %q, want the gitlink %s", got, link)
	}
	if r := e.Sandbox("land", "t1"); r.Code != 4 || !strings.Contains(r.Stderr, "vendor/lib (files inside a submodule)") {
		t.Errorf("land without --force would lose vendor/lib/hack.c: want a refusal, got:\n%s", r)
	}
	l := e.MustSandbox("land", "t1", "--force")
	if !strings.Contains(l.Stderr, "inside the submodule vendor/lib") || strings.Contains(l.Stderr, "~") {
		t.Errorf("land:\n%s", l.Stderr)
	}
	if got := e.Git("ls-tree", "main", "vendor/lib"); got != "160000 commit "+link+"\tvendor/lib" {
		t.Errorf("main's vendor/lib = %q", got)
	}
	if got := e.Git("show", "main:app.txt"); got != "app" {
		t.Errorf("main:app.txt = %q", got)
	}
	if r := e.Run(e.Repo, nil, "git", "cat-file", "-e", "main:vendor/lib/hack.c"); r.Code == 0 {
		t.Errorf("a file inside the submodule was landed")
	}
}

// With commit.gpgSign, the landed commit is signed as git commit signs it:
// ssh and openpgp keys; --no-sign leaves it unsigned.
func TestLandSignsWithCommitGpgSign(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	key := filepath.Join(e.Root, "signing-key")
	if r := e.Run(e.Root, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", key); r.Code != 0 {
		t.Fatalf("ssh-keygen: %s", r)
	}
	pub := strings.TrimSpace(readFile(key + ".pub"))
	allowed := filepath.Join(e.Root, "allowed-signers")
	must(t, os.WriteFile(allowed, []byte("test@example.com "+pub+"\n"), 0o644))
	e.Git("config", "gpg.format", "ssh")
	e.Git("config", "user.signingKey", key+".pub")
	e.Git("config", "gpg.ssh.allowedSignersFile", allowed)
	e.Git("config", "commit.gpgSign", "true")

	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo one > one.txt`)
	l := e.MustSandbox("land", "t1")
	if !strings.Contains(l.Stderr, ", signed") {
		t.Errorf("land does not say it signed:\n%s", l.Stderr)
	}
	if r := e.Run(e.Repo, nil, "git", "verify-commit", "main"); r.Code != 0 {
		t.Errorf("git verify-commit of the landed commit (ssh): %s", r)
	}

	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `echo two > two.txt`)
	e.MustSandbox("land", "t2", "--no-sign")
	if r := e.Run(e.Repo, nil, "git", "verify-commit", "main"); r.Code == 0 {
		t.Errorf("land --no-sign signed the commit")
	}

	// openpgp, with a key of a GnuPG home of the test's own.
	gnupg, err := os.MkdirTemp("", "gpg")
	must(t, err)
	must(t, os.Chmod(gnupg, 0o700))
	genv := []string{"GNUPGHOME=" + gnupg}
	t.Cleanup(func() {
		e.Run(e.Root, genv, "gpgconf", "--kill", "all")
		_ = os.RemoveAll(gnupg)
	})
	if r := e.Run(e.Root, genv, "gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Test User <test@example.com>", "ed25519", "sign", "never"); r.Code != 0 {
		t.Fatalf("gpg --quick-gen-key: %s", r)
	}
	e.Git("config", "gpg.format", "openpgp")
	e.Git("config", "user.signingKey", "test@example.com")
	e.MustSandbox("start", "t3", "--agent", "shell", "--", "sh", "-c", `echo three > three.txt`)
	if r := e.Run(e.Repo, genv, "git", "sandbox", "land", "t3"); r.Code != 0 {
		t.Fatalf("land with an openpgp key: %s", r)
	}
	if r := e.Run(e.Repo, genv, "git", "verify-commit", "main"); r.Code != 0 {
		t.Errorf("git verify-commit of the landed commit (openpgp): %s", r)
	}

	// A key that cannot sign refuses, and nothing lands.
	e.Git("config", "user.signingKey", "nobody@example.com")
	e.MustSandbox("start", "t4", "--agent", "shell", "--", "sh", "-c", `echo four > four.txt`)
	before := e.Git("rev-parse", "main")
	r := e.Run(e.Repo, genv, "git", "sandbox", "land", "t4")
	if r.Code != 4 || !strings.Contains(r.Stderr, "cannot sign the commit") || !strings.Contains(r.Stderr, "--no-sign") {
		t.Errorf("land with a key that cannot sign: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != before {
		t.Errorf("main moved to %s", got)
	}
}

// A bare repository with linked worktrees (a common layout for worktree
// users) works from inside one of its worktrees: the sandbox starts from
// that worktree's branch and land brings that worktree along.
func TestBareRepositoryWithLinkedWorktrees(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	bare := filepath.Join(e.Root, "project.git")
	e.GitIn(e.Root, "clone", "-q", "--bare", e.Repo, bare)
	wt := filepath.Join(e.Root, "main-wt")
	e.GitIn(bare, "worktree", "add", "-q", wt, "main")
	t.Cleanup(func() { e.Run(wt, nil, "git", "sandbox", "rm", "--force", "t1") })

	if r := e.Run(bare, nil, "git", "sandbox", "ps"); r.Code == 0 || !strings.Contains(r.Stderr, "is a bare repository") {
		t.Errorf("ps in the bare repository itself: %s", r)
	}
	if r := e.Run(wt, nil, "git", "sandbox", "start", "t1", "--agent", "shell", "--", "sh", "-c", `echo from-bare > new.txt; echo changed > README.md`); r.Code != 0 {
		t.Fatalf("start in a linked worktree of a bare repository: %s", r)
	}
	if r := e.Run(wt, nil, "git", "sandbox", "diff", "t1", "--name-only"); r.Code != 0 || strings.Join(strings.Fields(r.Stdout), " ") != "README.md new.txt" {
		t.Errorf("diff: %s", r)
	}
	if r := e.Run(wt, nil, "git", "sandbox", "land", "t1"); r.Code != 0 || !strings.Contains(r.Stderr, "updated the checkout "+wt) {
		t.Fatalf("land: %s", r)
	}
	if got := e.GitIn(bare, "show", "main:new.txt"); got != "from-bare" {
		t.Errorf("main:new.txt = %q", got)
	}
	if st := e.GitIn(wt, "status", "--porcelain"); st != "" {
		t.Errorf("the worktree is not clean after land:\n%s", st)
	}
	if got := readFile(filepath.Join(wt, "new.txt")); got != "from-bare\n" {
		t.Errorf("the worktree's new.txt = %q", got)
	}
}

// In a repository whose attributes route *.dat to Git LFS, the landed
// commit holds an LFS pointer and the object is in the host's LFS store,
// as git add would make them; attributes the agent wrote do not count.
func TestLandStoresLFSPointers(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	if r := e.Run(e.Repo, nil, "git", "lfs", "install", "--skip-repo"); r.Code != 0 {
		t.Fatalf("git lfs install: %s", r)
	}
	e.WriteFile(".gitattributes", "*.dat filter=lfs diff=lfs merge=lfs -text\n")
	e.Git("add", ".gitattributes")
	e.Git("commit", "-q", "-m", "lfs")
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `set -e
printf 'data\000\001\002 from the agent\n' > new.dat
echo '*.bin filter=lfs diff=lfs merge=lfs -text' >> .gitattributes
echo raw > new.bin`)

	// Without git-lfs on PATH, land refuses rather than commit raw content.
	before := e.Git("rev-parse", "main")
	r := e.Run(e.Repo, []string{"PATH=" + binDir + ":" + pathWithout(t, "git-lfs")}, "git", "sandbox", "land", "t1")
	if r.Code != 4 || !strings.Contains(r.Stderr, "new.dat is stored with Git LFS here, but git-lfs is not installed") {
		t.Errorf("land without git-lfs: %s", r)
	}
	if got := e.Git("rev-parse", "main"); got != before {
		t.Errorf("main moved to %s", got)
	}

	e.MustSandbox("land", "t1")
	if got := e.Git("lfs", "ls-files", "--name-only"); got != "new.dat" {
		t.Errorf("git lfs ls-files = %q, want new.dat", got)
	}
	if blob := e.Git("cat-file", "blob", "main:new.dat"); !strings.HasPrefix(blob, "version https://git-lfs.github.com/spec/v1") {
		t.Errorf("main:new.dat is not an LFS pointer:\n%s", blob)
	}
	if blob := e.Git("cat-file", "blob", "main:new.bin"); blob != "raw" {
		t.Errorf("main:new.bin = %q: the agent's own attributes were applied", blob)
	}
	// new.bin was committed raw, and the .gitattributes that landed with
	// it now routes it to LFS: git status says so, as it would after a
	// user commits such an edit. Everything else is clean.
	if st := e.Git("status", "--porcelain"); st != "M new.bin" {
		t.Errorf("git status after land = %q, want only new.bin (routed to LFS by the agent's attributes)", st)
	}
	if got := readFile(filepath.Join(e.Repo, "new.dat")); got != "data\x00\x01\x02 from the agent\n" {
		t.Errorf("the checkout's new.dat = %q", got)
	}
	if r := e.Run(e.Repo, nil, "git", "lfs", "fsck", "--objects"); r.Code != 0 {
		t.Errorf("git lfs fsck: %s", r)
	}
}

// pathWithout is a directory of links to every program on PATH but the
// one named, for a PATH that lacks it.
func pathWithout(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin")
	must(t, os.MkdirAll(dir, 0o755))
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(d)
		for _, en := range entries {
			if en.Name() == name {
				continue
			}
			link := filepath.Join(dir, en.Name())
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			_ = os.Symlink(filepath.Join(d, en.Name()), link)
		}
	}
	return dir
}

// TestLandRefusesToLoseLargeFiles: a file over rescue.max_file_size is in
// no snapshot, so the worktree land removes held its only copy. Land was
// warning and deleting it; it now refuses, naming the file and the flags
// (--keep keeps it with the sandbox, --force accepts the loss).
func TestLandRefusesToLoseLargeFiles(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\nmax_file_size = \"1k\"\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage)
	e.MustSandbox("start", "lg", "--agent", "shell", "--", "sh", "-c", `set -e
head -c 4096 /dev/zero > big.bin
echo small > small.txt`)
	wt := e.Worktree("lg")
	oldMain := e.Git("rev-parse", "main")
	for _, args := range [][]string{{"land", "lg"}, {"land", "lg", "--dry-run"}} {
		r := e.Sandbox(args...)
		if r.Code != 4 || !strings.Contains(r.Stderr, "big.bin (4KiB, over rescue.max_file_size)") ||
			!strings.Contains(r.Stderr, "git sandbox land lg --force") || !strings.Contains(r.Stderr, "--keep") {
			t.Errorf("%v with a file in no snapshot: want a refusal (4) naming it and the flags, got:\n%s", args, r)
		}
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("main moved to %s", got)
	}
	if fi, err := os.Stat(filepath.Join(wt, "big.bin")); err != nil || fi.Size() != 4096 {
		t.Fatalf("the large file did not survive the refusal: %v", err)
	}
	l := e.MustSandbox("land", "lg", "--force")
	if !strings.Contains(l.Stderr, "big.bin (4KiB) is larger than rescue.max_file_size and was not landed") {
		t.Errorf("land --force does not name what it left:\n%s", l.Stderr)
	}
	if got := e.Git("ls-tree", "--name-only", "main"); got != "README.md\nsmall.txt" {
		t.Errorf("main holds %q", got)
	}
}
