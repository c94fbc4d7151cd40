package verify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/visible"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// The commit hooks land runs, in the order git commit runs them.
const (
	PreCommit = "pre-commit"
	CommitMsg = "commit-msg"
)

// MaxMessage bounds the message a commit-msg hook may write back.
const MaxMessage = 64 << 10

// FindCommitHooks lists the pre-commit and commit-msg hooks of a hooks
// directory that git commit would run: executable files, symlinks
// followed. A directory that does not exist holds none.
func FindCommitHooks(dir string) []string {
	var out []string
	for _, name := range []string{PreCommit, CommitMsg} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			out = append(out, name)
		}
	}
	return out
}

// CommitHooksOptions describe one run of a repository's commit hooks on a
// tree about to be committed.
type CommitHooksOptions struct {
	// Options is the container run; Tree is the tree to be committed.
	// Command, Argv, Prepare and Collect are set by RunCommitHooks.
	Options
	// HooksDir is the user's hooks directory (core.hooksPath, or the
	// repository's hooks), and Hooks the hooks in it to run.
	HooksDir string
	Hooks    []string
	// Also are more directories of the user's the hooks read, mounted
	// read-only where they are on the host.
	Also []string
	// Branch is the branch committed on (refs/heads/…) and Tip its commit:
	// the HEAD the hooks see.
	Branch string
	Tip    gitcmd.Hash
	// Message is the commit message given to commit-msg.
	Message string
	// VisibleObjects is the repository's visible store (internal/visible),
	// which holds Tip: the hooks' repository borrows from it, never from
	// the user's object store (the tree's files run in the hooks' container
	// too), and gets the tree's own objects in a pack of its own.
	VisibleObjects string
}

// CommitHooksResult is what the hooks did.
type CommitHooksResult struct {
	// Code is the run's exit status: 0 when every hook passed.
	Code int
	// Failed names the hook that refused ("" when none did, or when which
	// one cannot be told).
	Failed string
	// Message is the message after commit-msg, as plain text.
	Message string
}

// hookScript runs the hooks as git commit does: pre-commit, then
// commit-msg with the message file. Exit status 3 or 4 says which failed.
const hookScript = `set -u
hooks=$1 pre=$2 msg=$3
if [ "$pre" = 1 ]; then
	"$hooks/pre-commit" </dev/null || { c=$?; echo "git sandbox: the pre-commit hook exited with status $c" >&2; exit 3; }
fi
if [ "$msg" = 1 ]; then
	"$hooks/commit-msg" .git/COMMIT_EDITMSG </dev/null || { c=$?; echo "git sandbox: the commit-msg hook exited with status $c" >&2; exit 4; }
fi
exit 0
`

// RunCommitHooks runs the hooks in a fresh hardened container on an
// exported copy of the tree, as verify runs. The copy is a repository of
// its own for the hooks' git commands: HEAD on Branch at Tip, the index
// holding the tree, the tree's objects packed into it and the rest
// borrowed read-only from the visible store. The
// hooks directory is mounted read-only where it is on the host (and the
// target of a hook that is a symlink out of it, likewise). Files the hooks
// change are not taken; the message commit-msg leaves is, as plain text
// of at most MaxMessage bytes.
func RunCommitHooks(ctx context.Context, o CommitHooksOptions) (*CommitHooksResult, error) {
	if len(o.Hooks) == 0 {
		return &CommitHooksResult{Message: o.Message}, nil
	}
	if o.VisibleObjects == "" {
		return nil, fmt.Errorf("hooks: no visible store to borrow objects from")
	}
	objects := filepath.Join(o.CommonDir, "objects")
	run := o.Options
	has := map[string]bool{}
	for _, h := range o.Hooks {
		has[h] = true
	}
	flag := func(h string) string {
		if has[h] {
			return "1"
		}
		return "0"
	}
	run.Argv = []string{"/bin/sh", "-c", hookScript, "sh", o.HooksDir, flag(PreCommit), flag(CommitMsg)}
	run.Env = append([]string{"GIT_INDEX_FILE=" + container.Workspace + "/.git/index", "GIT_EDITOR=:", "GIT_SANDBOX_HOOK=1"}, run.Env...)
	run.Mounts = append(run.Mounts, container.Mount{Source: o.HooksDir, Target: o.HooksDir, Why: "your hooks, read-only"})
	for _, d := range o.Also {
		run.Mounts = append(run.Mounts, container.Mount{Source: d, Target: d, Why: "files your hooks run, read-only"})
	}
	for _, h := range o.Hooks {
		p := filepath.Join(o.HooksDir, h)
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", h, err)
		}
		if dir, err := filepath.EvalSymlinks(o.HooksDir); err == nil && !worktree.Within(target, dir) {
			run.Mounts = append(run.Mounts, container.Mount{Source: target, Target: target, Why: "the file your " + h + " hook links to, read-only"})
		}
	}
	run.Mounts = append(run.Mounts, container.Mount{Source: o.VisibleObjects, Target: o.VisibleObjects, Why: "the objects your branches and tags reach, read-only, for the hooks' git"})
	res := &CommitHooksResult{Message: o.Message}
	run.Prepare = func(files string) error {
		return prepareRepo(ctx, o, files, objects)
	}
	run.Collect = func(files string, code int) error {
		if code != 0 || !has[CommitMsg] {
			return nil
		}
		msg, err := readMessage(files)
		if err != nil {
			return err
		}
		res.Message = msg
		return nil
	}
	code, err := Run(ctx, run)
	if err != nil {
		return nil, err
	}
	res.Code = code
	switch code {
	case 0:
	case 3:
		res.Failed = PreCommit
	case 4:
		res.Failed = CommitMsg
	}
	return res, nil
}

// prepareRepo makes files a repository of the hooks' own: written by this
// process under os.Root (the tree holds no .git entry: land refuses one),
// its index built by a configuration-free git into a scratch file first.
func prepareRepo(ctx context.Context, o CommitHooksOptions, files, objects string) error {
	if !strings.HasPrefix(o.Branch, "refs/heads/") || strings.Contains(o.Branch, "..") {
		return fmt.Errorf("hooks: %q is not a branch", o.Branch)
	}
	if _, err := gitcmd.ParseHash(o.Tip.String()); err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	index := filepath.Join(o.WorkDir, "hooks-index")
	scratch, err := scratchGitDir(o.WorkDir)
	if err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	defer os.RemoveAll(scratch)
	g := &gitcmd.Runner{GitDir: scratch, ObjectDir: objects, IndexFile: index, Isolated: true}
	if err := g.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: o.Tree}); err != nil {
		return fmt.Errorf("hooks: index of the landed tree: %w", err)
	}
	idx, err := os.ReadFile(index)
	if err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	root, err := os.OpenRoot(files)
	if err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	defer root.Close()
	if err := root.Mkdir(".git", 0o755); err != nil {
		return fmt.Errorf("hooks: the tree has a .git: %w", err)
	}
	alternates := o.VisibleObjects + "\n"
	write := map[string][]byte{
		".git/HEAD":                    []byte("ref: " + o.Branch + "\n"),
		".git/config":                  []byte("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"),
		".git/" + o.Branch:             []byte(o.Tip.String() + "\n"),
		".git/objects/info/alternates": []byte(alternates),
		".git/index":                   idx,
		".git/COMMIT_EDITMSG":          []byte(o.Message),
	}
	for name, b := range write {
		if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("hooks: %w", err)
		}
		if err := root.WriteFile(name, b, 0o644); err != nil {
			return fmt.Errorf("hooks: %w", err)
		}
	}
	// The tree's objects that Tip's history lacks (the work to land).
	host := &gitcmd.Runner{GitDir: o.CommonDir}
	if _, err := visible.Give(ctx, host, filepath.Join(files, ".git", "objects"), []string{o.Tree}, []string{o.Tip.String()}); err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	return nil
}

// readMessage reads the message commit-msg left: a regular file (not a
// link), at most MaxMessage bytes, UTF-8 without control characters other
// than tab and newline, cleaned up as git commit cleans a -m message.
func readMessage(files string) (string, error) {
	root, err := os.OpenRoot(files)
	if err != nil {
		return "", fmt.Errorf("hooks: %w", err)
	}
	defer root.Close()
	notPlain := func(why string) error {
		return usererr.New("the commit-msg hook left a message git sandbox does not take: %s", why).
			Hint("nothing was landed; the message must be plain text of at most %d KiB; fix the hook, or land with --no-verify", MaxMessage>>10).
			WithCode(usererr.ExitRefused)
	}
	// The container is gone: nothing changes the file between the Lstat
	// and the open (os.Root follows links inside the root, O_NOFOLLOW or
	// not, so the Lstat is what refuses one).
	const name = ".git/COMMIT_EDITMSG"
	lfi, err := root.Lstat(name)
	if err != nil || !lfi.Mode().IsRegular() {
		return "", notPlain("it is not a file that can be opened (a link, a directory, a FIFO, or gone)")
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", notPlain("it is not a file that can be opened")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, lfi) {
		return "", notPlain("it is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxMessage+1))
	if err != nil {
		return "", fmt.Errorf("hooks: read the message: %w", err)
	}
	if len(b) > MaxMessage {
		return "", notPlain("it is larger than the limit")
	}
	if !utf8.Valid(b) {
		return "", notPlain("it is not UTF-8")
	}
	for _, r := range string(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))) {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
			return "", notPlain(fmt.Sprintf("it holds the control character %U", r))
		}
	}
	msg := CleanupMessage(strings.ReplaceAll(string(b), "\r\n", "\n"))
	if msg == "" {
		return "", usererr.New("the commit-msg hook left an empty message").
			Hint("nothing was landed; fix the hook, or land with --no-verify").
			WithCode(usererr.ExitRefused)
	}
	return msg, nil
}

// CleanupMessage cleans a message as git commit does for -m
// (--cleanup=whitespace): trailing spaces go, runs of empty lines become
// one, leading and trailing empty lines go; the result ends in a newline
// (or is empty).
func CleanupMessage(msg string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
			blank = false
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}
