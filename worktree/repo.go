// Package worktree owns a sandbox's place in the user's repository: finding
// the repository and its identity, the state-directory layout of every
// sandbox, and the linked worktree each sandbox works in (create, find,
// remove). It also owns the host-path refusals that no flag overrides.
package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Repo is the user's repository as seen from one of its worktrees.
type Repo struct {
	// CommonDir is the repository's git directory shared by all worktrees
	// (absolute, symlinks resolved): where objects, refs and hooks live.
	CommonDir string
	// GitDir is the git directory of the worktree the command runs in.
	GitDir string
	// WorkTree is the top of the worktree the command runs in.
	WorkTree string
	// MainWorkTree is the repository's main worktree; for a bare
	// repository with linked worktrees, the worktree the command runs in.
	MainWorkTree string
	// Bare is set for a bare repository used through a linked worktree.
	Bare bool
	// ID is stable for every worktree of one repository and differs for two
	// clones of the same name: the directory name plus a hash of CommonDir.
	ID string
	// Name is the main worktree's directory name, for display.
	Name string
}

// Git returns a runner bound to the repository's common git directory with
// the user's (trusted) configuration and no worktree.
func (r *Repo) Git() *gitcmd.Runner {
	return &gitcmd.Runner{GitDir: r.CommonDir}
}

// GitAt returns a runner bound to one worktree of the repository: gitDir is
// that worktree's git directory (the common one for the main worktree).
func (r *Repo) GitAt(gitDir, workTree string) *gitcmd.Runner {
	return &gitcmd.Runner{GitDir: gitDir, WorkTree: workTree}
}

// ObjectsDir is the repository's object store.
func (r *Repo) ObjectsDir() string { return filepath.Join(r.CommonDir, "objects") }

// HooksDir is the directory git runs the repository's hooks from:
// core.hooksPath when the user set it (relative to the main worktree), else
// <common dir>/hooks. The bool reports that core.hooksPath decided.
func (r *Repo) HooksDir(ctx context.Context) (string, bool, error) {
	// Every git process of this tool runs with -c core.hooksPath=/dev/null;
	// the user's own value is the last one from a file, not the command line.
	lines, err := r.Git().Lines(ctx, "config", "--show-scope", "--path", "--get-all", "core.hooksPath")
	if err != nil && gitcmd.ExitCode(err) != 1 {
		return "", false, fmt.Errorf("read core.hooksPath: %w", err)
	}
	p := ""
	for _, l := range lines {
		if scope, v, ok := strings.Cut(l, "\t"); ok && scope != "command" {
			p = v
		}
	}
	if p == "" {
		return filepath.Join(r.CommonDir, "hooks"), false, nil
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.MainWorkTree, p)
	}
	return filepath.Clean(p), true, nil
}

// Open finds the repository containing dir without running git there first:
// the walk up to a .git entry happens in Go, and the repository found is then
// opened with an explicit GIT_DIR. A .git found inside a sandbox's worktree
// (a nested repository the agent made) is refused, so the host never opens
// agent-made git metadata by running a command in the wrong directory.
func Open(ctx context.Context, dir string, sandboxRoots ...string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	top, dotgit, err := findDotGit(abs)
	if err != nil {
		return nil, err
	}
	gitDir, err := resolveDotGit(dotgit)
	if err != nil {
		return nil, err
	}
	commonDir := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		commonDir = filepath.Clean(c)
	}
	if resolved, err := filepath.EvalSymlinks(commonDir); err == nil {
		commonDir = resolved
	}
	if err := refuseNestedInSandbox(top, commonDir, sandboxRoots); err != nil {
		return nil, err
	}
	r := &Repo{CommonDir: commonDir, GitDir: gitDir, WorkTree: top}
	g := &gitcmd.Runner{GitDir: gitDir, WorkTree: top}
	info, err := g.RepositoryInfo(ctx)
	if err != nil {
		return nil, usererr.Wrap(err, "cannot read the repository at %s: %v", top, err).
			Hint("check it with git status there")
	}
	// A linked worktree of a bare repository has a work tree of its own:
	// only the bare repository itself is refused.
	if info.Bare && gitDir == commonDir {
		return nil, errBare(top)
	}
	if info.ObjectFormat != "sha1" {
		return nil, usererr.New("%s uses %s object names, which git sandbox does not support yet", top, info.ObjectFormat).
			Hint("use git sandbox with a SHA-1 repository")
	}
	r.MainWorkTree, err = mainWorkTree(ctx, r)
	if err != nil {
		return nil, err
	}
	r.Name = filepath.Base(r.MainWorkTree)
	if r.MainWorkTree == "" {
		if gitDir == commonDir {
			return nil, errBare(commonDir)
		}
		// Bare, with linked worktrees: sandboxes branch from and land
		// into the worktree in use; the name (and so the id) comes from
		// the repository, the same from every worktree.
		r.Bare, r.MainWorkTree = true, top
		r.Name = strings.TrimSuffix(filepath.Base(commonDir), ".git")
		if r.Name == "" {
			r.Name = "repo"
		}
	}
	r.ID = repoID(r.Name, commonDir)
	return r, nil
}

func errBare(dir string) error {
	return usererr.New("%s is a bare repository: a sandbox needs a working tree to branch from", dir).
		Hint("run git sandbox from a clone with a checkout (git clone %s work)", dir)
}

// findDotGit walks up from dir to the first directory holding a .git entry.
func findDotGit(dir string) (top, dotgit string, err error) {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".git")
		if fi, err := os.Lstat(p); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
			return d, p, nil
		}
		if looksLikeGitDir(d) {
			return "", "", errBare(d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", "", usererr.New("not a git repository: %s", dir).
		Hint("run git sandbox inside a git checkout, or create one with git init")
}

func looksLikeGitDir(d string) bool {
	for _, n := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(d, n)); err != nil {
			return false
		}
	}
	return true
}

// resolveDotGit turns a .git directory or gitfile into a git directory path.
func resolveDotGit(dotgit string) (string, error) {
	fi, err := os.Lstat(dotgit)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return filepath.EvalSymlinks(dotgit)
	}
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", usererr.New("%s is not a gitfile", dotgit)
	}
	target = strings.TrimSpace(target)
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(dotgit), target)
	}
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", usererr.New("%s points to a missing git directory %s", dotgit, target).
			Hint("if the worktree was moved, run git worktree repair from the main checkout")
	}
	return resolved, nil
}

// refuseNestedInSandbox refuses a repository found inside a directory where
// sandboxes live unless it is a sandbox's own worktree root, whose gitfile
// only the host writes (the container sees a different one mounted over it).
func refuseNestedInSandbox(top, commonDir string, roots []string) error {
	for _, root := range roots {
		if root == "" {
			continue
		}
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if !Within(top, root) && !Within(commonDir, root) {
			continue
		}
		if filepath.Base(top) == WorktreeDirName && !Within(commonDir, root) {
			continue
		}
		return usererr.New("%s is a repository inside a sandbox's files, not your repository", top).
			Hint("run git sandbox from your own checkout or from the sandbox worktree's top directory")
	}
	return nil
}

// Within reports whether path p is dir or lies beneath it (lexically).
func Within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// mainWorkTree returns the repository's main worktree: the directory
// holding the common .git in the usual layout, else the first entry of git
// worktree list.
func mainWorkTree(ctx context.Context, r *Repo) (string, error) {
	if filepath.Base(r.CommonDir) == ".git" {
		if _, err := os.Stat(filepath.Join(r.CommonDir, "config")); err == nil && !hasCoreWorktree(r.CommonDir) {
			return filepath.Dir(r.CommonDir), nil
		}
	}
	list, err := List(ctx, r.Git())
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", errBare(r.CommonDir)
	}
	if list[0].Bare {
		return "", nil
	}
	return list[0].Path, nil
}

// hasCoreWorktree reports whether the repository's config may move its
// main worktree (core.worktree), in which case git must be asked.
func hasCoreWorktree(commonDir string) bool {
	b, err := os.ReadFile(filepath.Join(commonDir, "config"))
	return err != nil || strings.Contains(strings.ToLower(string(b)), "worktree")
}

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func repoID(name, commonDir string) string {
	sum := sha256.Sum256([]byte(commonDir))
	n := unsafeIDChars.ReplaceAllString(name, "_")
	if len(n) > 32 {
		n = n[:32]
	}
	if n == "" || n[0] == '.' || n[0] == '-' {
		n = "repo" + n
	}
	return n + "-" + hex.EncodeToString(sum[:])[:12]
}

// ValidBranch checks a new branch name with git's own rules.
func ValidBranch(ctx context.Context, g *gitcmd.Runner, name string) error {
	if name == "" || strings.HasPrefix(name, "-") {
		return errInvalidBranch(name)
	}
	if _, err := g.Output(ctx, "check-ref-format", "--branch", name); err != nil {
		return errInvalidBranch(name)
	}
	return nil
}

func errInvalidBranch(name string) error {
	return usererr.New("invalid branch name %q", name).
		Hint("use a name git accepts for a branch, such as fix-login or agent/fix-login (see git help check-ref-format)")
}

// CurrentBranch returns the branch checked out in the given worktree, or ""
// on a detached HEAD.
func CurrentBranch(ctx context.Context, g *gitcmd.Runner) (string, error) {
	out, err := g.Output(ctx, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		if gitcmd.ExitCode(err) == 1 {
			return "", nil
		}
		return "", fmt.Errorf("read HEAD: %w", err)
	}
	return out, nil
}

// ExcludesFile returns the user's core.excludesFile (their own trusted
// config), expanded, or "" when unset or missing.
func (r *Repo) ExcludesFile() string {
	out, err := r.Git().Output(context.Background(), "config", "--path", "--get", "core.excludesFile")
	if err != nil || out == "" {
		if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
			out = filepath.Join(xdg, "git", "ignore")
		} else if home, herr := os.UserHomeDir(); herr == nil {
			out = filepath.Join(home, ".config", "git", "ignore")
		}
	}
	if _, err := os.Stat(out); err != nil {
		return ""
	}
	return out
}

// CheckCarry refuses --carry unless this checkout is at the base: its
// uncommitted work only makes sense on the commit it was made on.
func (r *Repo) CheckCarry(ctx context.Context, baseCommit string) error {
	head, err := r.GitAt(r.GitDir, r.WorkTree).PeelToCommit(ctx, "HEAD")
	if err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	if head.String() != baseCommit {
		return usererr.New("--carry copies the uncommitted work of this checkout, which is at %s, not at the base %s", head.Short(), gitcmd.Hash(baseCommit).Short()).
			Hint("start from this checkout's branch (drop --base), or check out the base first")
	}
	return nil
}
