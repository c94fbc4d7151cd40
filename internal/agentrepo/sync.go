package agentrepo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// maxObjects bounds how much one sync may bring back.
const maxObjects = 2_000_000

// SyncResult says what a sync brought back.
type SyncResult struct {
	// Head is the agent's HEAD commit ("" when it has none).
	Head string
	// Ref is the ref HEAD went through, in the agent's repository.
	Ref string
	// Objects is how many objects were copied into the user's store.
	Objects int
}

// Sync copies the objects of the agent's commits into the user's object
// store and returns the agent's HEAD. Nothing in the agent's repository is
// executed or configured: its objects are read by go-git (confined beneath
// the directory; its config, hooks and alternates play no part), checked
// here, and handed to `git index-pack --strict` of the user's repository,
// which checks them again (fsck: .git-like paths, malformed trees). Only
// commits, trees and blobs reachable from HEAD come back: no tags, no
// other refs.
//
// Every tree of every new commit is checked down to where it equals the
// corresponding tree of trusted (the tree the sandbox started from), also
// when the user's store already holds it: snapshots put the agent's trees
// there without these checks.
//
// known is a commit already checked by an earlier sync ("" if none).
func Sync(ctx context.Context, host *gitcmd.Runner, gitDir, trusted, known string) (*SyncResult, error) {
	head, ref, err := Head(gitDir)
	if errors.Is(err, ErrNoHead) {
		return &SyncResult{}, nil
	}
	if err != nil {
		return nil, err
	}
	res := &SyncResult{Head: head, Ref: ref}
	have, err := newBatchCheck(ctx, host)
	if err != nil {
		return nil, err
	}
	defer have.close()
	present, err := have.has(head)
	if err != nil {
		return nil, err
	}
	if present && (head == trusted || head == known) {
		return res, nil
	}
	fs := regularFS{osfs.New(gitDir, osfs.WithBoundOS())}
	// Only the object store is used: its config, refs and hooks are never read.
	st := filesystem.NewStorage(fs, cache.NewObjectLRUDefault())
	hostStore := filesystem.NewStorage(osfs.New(host.GitDir), cache.NewObjectLRUDefault())
	w := walker{st: st, hostStore: hostStore, have: have, host: host, seen: map[plumbing.Hash]bool{}, checked: map[plumbing.Hash]bool{}}
	if present {
		// The agent can see every commit in the user's store (snapshots
		// included) and point its HEAD at one; its tree is checked all the
		// same before a branch is moved to it.
		if err := w.presentHead(plumbing.NewHash(head), plumbing.NewHash(trusted)); err != nil {
			return nil, refuse(err)
		}
		return res, nil
	}
	if err := w.commits(plumbing.NewHash(head), plumbing.NewHash(trusted)); err != nil {
		return nil, refuse(err)
	}
	if len(w.list) == 0 {
		return res, nil
	}
	if err := w.pack(ctx, host); err != nil {
		return nil, err
	}
	res.Objects = len(w.list)
	return res, nil
}

// refuse wraps a check failure as a user error: the agent handed back
// something the user's repository must not take.
func refuse(err error) error {
	return usererr.Wrap(err, "the agent's commits were refused: %v", err).
		Hint("nothing was copied into your repository; inspect the sandbox with git sandbox exec, or discard it with git sandbox rm --force").
		WithCode(usererr.ExitRefused)
}

type walker struct {
	host      *gitcmd.Runner
	st        *filesystem.Storage // the agent's objects
	hostStore *filesystem.Storage // the user's objects (trusted store)
	have      *batchCheck
	seen      map[plumbing.Hash]bool // known present in, or queued for, the user's store
	checked   map[plumbing.Hash]bool // trees whose names were checked
	list      []plumbing.Hash
}

func (w *walker) add(h plumbing.Hash) error {
	w.seen[h] = true
	w.list = append(w.list, h)
	if len(w.list) > maxObjects {
		return fmt.Errorf("more than %d new objects", maxObjects)
	}
	return nil
}

// missing reports whether h still needs copying.
func (w *walker) missing(h plumbing.Hash) (bool, error) {
	if w.seen[h] {
		return false, nil
	}
	ok, err := w.have.has(h.String())
	if err != nil {
		return false, err
	}
	if ok {
		w.seen[h] = true
	}
	return !ok, nil
}

// getTree reads a tree from the agent's objects or, failing that, the
// user's.
func (w *walker) getTree(h plumbing.Hash) (*object.Tree, error) {
	if t, err := object.GetTree(w.st, h); err == nil {
		return t, nil
	}
	return object.GetTree(w.hostStore, h)
}

func (w *walker) getBlob(h plumbing.Hash) (*object.Blob, error) {
	if b, err := object.GetBlob(w.st, h); err == nil {
		return b, nil
	}
	return object.GetBlob(w.hostStore, h)
}

// trustedTree is the tree of the commit the sandbox started from.
func (w *walker) trustedTree(trusted plumbing.Hash) plumbing.Hash {
	if trusted.IsZero() {
		return plumbing.ZeroHash
	}
	if c, err := object.GetCommit(w.hostStore, trusted); err == nil {
		return c.TreeHash
	}
	return plumbing.ZeroHash
}

// presentHead checks the tree of a HEAD the user's store already has.
func (w *walker) presentHead(head, trusted plumbing.Hash) error {
	c, err := object.GetCommit(w.hostStore, head)
	if err != nil {
		return fmt.Errorf("read commit %s: %w", head, err)
	}
	return w.tree(c.TreeHash, w.trustedTree(trusted), "")
}

func (w *walker) commits(head, trusted plumbing.Hash) error {
	trustedTree := w.trustedTree(trusted)
	queue := []plumbing.Hash{head}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		need, err := w.missing(h)
		if err != nil || !need {
			if err != nil {
				return err
			}
			continue
		}
		c, err := object.GetCommit(w.st, h)
		if err != nil {
			return fmt.Errorf("read commit %s: %w", h, err)
		}
		if err := w.add(h); err != nil {
			return err
		}
		if err := w.tree(c.TreeHash, trustedTree, ""); err != nil {
			return err
		}
		queue = append(queue, c.ParentHashes...)
	}
	return nil
}

// tree checks tree h (down to where it equals trusted) and queues what the
// user's store lacks.
func (w *walker) tree(h, trusted plumbing.Hash, dir string) error {
	if h == trusted || w.checked[h] {
		return nil
	}
	w.checked[h] = true
	t, err := w.getTree(h)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", h, err)
	}
	need, err := w.missing(h)
	if err != nil {
		return err
	}
	if need {
		if err := w.add(h); err != nil {
			return err
		}
	}
	known := map[string]object.TreeEntry{}
	if !trusted.IsZero() {
		if tt, err := object.GetTree(w.hostStore, trusted); err == nil {
			for _, e := range tt.Entries {
				known[e.Name] = e
			}
		}
	}
	for _, e := range t.Entries {
		if err := CheckName(e.Name); err != nil {
			return fmt.Errorf("tree %s%s: %w", dir, e.Name, err)
		}
		prev, hadPrev := known[e.Name]
		switch e.Mode {
		case filemode.Dir:
			var sub plumbing.Hash
			if hadPrev && prev.Mode == filemode.Dir {
				sub = prev.Hash
			}
			if err := w.tree(e.Hash, sub, dir+e.Name+"/"); err != nil {
				return err
			}
		case filemode.Submodule:
			// A gitlink names a commit of another repository; nothing to copy.
		default:
			if IsGitmodules(e.Name) && !(hadPrev && prev.Hash == e.Hash && prev.Mode == e.Mode) {
				if e.Name != ".gitmodules" || e.Mode != filemode.Regular {
					return fmt.Errorf("%s%q is not a plain .gitmodules file", dir, e.Name)
				}
				if err := w.checkGitmodules(e.Hash); err != nil {
					return fmt.Errorf("%s.gitmodules: %w", dir, err)
				}
			}
			need, err := w.missing(e.Hash)
			if err != nil {
				return err
			}
			if need {
				if err := w.add(e.Hash); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (w *walker) checkGitmodules(h plumbing.Hash) error {
	b, err := w.getBlob(h)
	if err != nil {
		return err
	}
	r, err := b.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	content, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return err
	}
	return CheckGitmodules(content)
}

// pack writes the collected objects as a pack into the user's repository
// through git index-pack --strict.
func (w *walker) pack(ctx context.Context, host *gitcmd.Runner) error {
	pr, pw := io.Pipe()
	go func() {
		enc := packfile.NewEncoder(pw, w.st, false)
		_, err := enc.Encode(w.list, 10)
		pw.CloseWithError(err)
	}()
	if _, err := host.Run(ctx, pr, "index-pack", "--stdin", "--strict"); err != nil {
		pr.CloseWithError(err)
		return refuse(err)
	}
	return nil
}

// batchCheck asks the user's repository whether objects exist, through one
// long-running git cat-file --batch-check.
type batchCheck struct {
	in   io.WriteCloser
	out  *bufio.Reader
	wait func() error
}

func newBatchCheck(ctx context.Context, host *gitcmd.Runner) (*batchCheck, error) {
	cmd := host.Command(ctx, "cat-file", "--batch-check=%(objectname)")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	return &batchCheck{in: in, out: bufio.NewReader(out), wait: cmd.Wait}, nil
}

func (b *batchCheck) has(id string) (bool, error) {
	if _, err := io.WriteString(b.in, id+"\n"); err != nil {
		return false, fmt.Errorf("git cat-file: %w", err)
	}
	line, err := b.out.ReadString('\n')
	if err != nil {
		return false, fmt.Errorf("git cat-file: %w", err)
	}
	return !strings.HasSuffix(strings.TrimSpace(line), " missing"), nil
}

func (b *batchCheck) close() {
	b.in.Close()
	_ = b.wait()
}
