package agentrepo

import (
	"bufio"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/go-units"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// maxObjects bounds how much one sync may bring back.
const maxObjects = 2_000_000

// Commits and trees are parsed in memory, so each is size-checked before
// it is read: no honest commit message or directory comes near these.
const (
	maxCommitSize = 4 << 20
	maxTreeSize   = 32 << 20
)

// inMemory is the largest object read whole into memory; larger ones are
// streamed from the file.
const inMemory = 1 << 20

// Budget bounds what one sync copies: the size of one object (a file) and
// of all new objects together. Each object's size is read from its header
// before anything of it is inflated, so a huge object (a gigabyte of zeros
// is a megabyte on disk) costs nothing to refuse.
type Budget struct {
	// MaxObject is the largest object, MaxTotal the largest sum; 0 means
	// no bound.
	MaxObject, MaxTotal int64
	// ObjectSetting and TotalSetting name the settings, for messages.
	ObjectSetting, TotalSetting string
}

// DefaultBudget is the budget of Sync.
var DefaultBudget = Budget{MaxObject: 100 << 20, MaxTotal: 2 << 30}

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
	return SyncWithin(ctx, host, gitDir, trusted, known, DefaultBudget)
}

// SyncWithin is Sync within a budget.
func SyncWithin(ctx context.Context, host *gitcmd.Runner, gitDir, trusted, known string, budget Budget) (*SyncResult, error) {
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
	// Only the object store is used: its config, refs and hooks are never
	// read. Objects over inMemory are streamed, and the caches are small:
	// what sync holds does not grow with what the agent commits.
	opts := filesystem.Options{LargeObjectThreshold: inMemory}
	st := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRU(4*cache.MiByte), opts)
	hostStore := filesystem.NewStorageWithOptions(osfs.New(host.GitDir), cache.NewObjectLRU(4*cache.MiByte), opts)
	w := walker{fs: fs, st: st, hostStore: hostStore, have: have, host: host, budget: budget,
		seen: map[plumbing.Hash]bool{}, checked: map[plumbing.Hash]bool{}}
	if present {
		// The agent can see every commit in the user's store (snapshots
		// included) and point its HEAD at one; its tree is checked all the
		// same before a branch is moved to it.
		if err := checkHistory(ctx, host, []string{head}, trusted, known); err != nil {
			return nil, refuse(err)
		}
		if err := w.presentHead(plumbing.NewHash(head), plumbing.NewHash(trusted)); err != nil {
			return nil, refuse(err)
		}
		return res, nil
	}
	if err := w.commits(plumbing.NewHash(head), plumbing.NewHash(trusted)); err != nil {
		return nil, refuse(err)
	}
	if err := checkHistory(ctx, host, w.boundary, trusted, known); err != nil {
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
	e := usererr.Wrap(err, "the agent's commits were refused: %v", err).
		Hint("nothing was copied into your repository; inspect the sandbox with git sandbox exec, or discard it with git sandbox rm --force").
		WithCode(usererr.ExitRefused)
	var be *budgetError
	if errors.As(err, &be) && be.setting != "" {
		e.Hint("if it belongs in the work, raise %s in your config", be.setting)
	}
	return e
}

// budgetError is an object, or a sync, over its budget.
type budgetError struct {
	msg, setting string
}

func (e *budgetError) Error() string { return e.msg + setting(e.setting) }

type walker struct {
	host      *gitcmd.Runner
	fs        billy.Filesystem // the agent's git directory
	budget    Budget
	total     int64               // bytes of the objects queued so far
	st        *filesystem.Storage // the agent's objects
	hostStore *filesystem.Storage // the user's objects (trusted store)
	have      *batchCheck
	seen      map[plumbing.Hash]bool // known present in, or queued for, the user's store
	checked   map[plumbing.Hash]bool // trees whose names were checked
	list      []plumbing.Hash
	// boundary are the commits of the agent's history the user's store
	// already had: where the walk stopped.
	boundary []string
}

// add queues h for copying; size is its size, already checked.
func (w *walker) add(h plumbing.Hash, size int64) error {
	w.total += size
	if w.budget.MaxTotal > 0 && w.total > w.budget.MaxTotal {
		return &budgetError{fmt.Sprintf("the agent's commits hold more than %s of new objects, over the budget of one sync", units.BytesSize(float64(w.budget.MaxTotal))), w.budget.TotalSetting}
	}
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
		if w.seen[h] {
			continue
		}
		need, err := w.missing(h)
		if err != nil {
			return err
		}
		if !need {
			w.boundary = append(w.boundary, h.String())
			continue
		}
		size, err := w.checkSize(h, maxCommitSize, "commit "+h.String(), "")
		if err != nil {
			return err
		}
		c, err := object.GetCommit(w.st, h)
		if err != nil {
			return fmt.Errorf("read commit %s: %w", h, err)
		}
		if err := w.add(h, size); err != nil {
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
	size, err := w.checkSize(h, maxTreeSize, "the tree of "+dirName(dir), "")
	if err != nil {
		return err
	}
	t, err := w.getTree(h)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", h, err)
	}
	need, err := w.missing(h)
	if err != nil {
		return err
	}
	if need {
		if err := w.add(h, size); err != nil {
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
				size, err := w.checkSize(e.Hash, w.budget.MaxObject, "the file "+termsafe.String(dir+e.Name), w.budget.ObjectSetting)
				if err != nil {
					return err
				}
				if err := w.add(e.Hash, size); err != nil {
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
// through git index-pack --strict. The pack is written one object at a
// time, without deltas, each streamed from the agent's store: what is held
// in memory is one object of at most inMemory bytes. index-pack streams
// blobs over its big-file threshold, set low for the same reason.
func (w *walker) pack(ctx context.Context, host *gitcmd.Runner) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writePack(pw, w.st, w.list))
	}()
	ip := *host
	ip.Config = append(slices.Clone(host.Config), "core.bigFileThreshold=16m")
	if _, err := ip.Run(ctx, pr, "index-pack", "--stdin", "--strict"); err != nil {
		pr.CloseWithError(err)
		return refuse(err)
	}
	return nil
}

// writePack writes the objects as a version 2 pack with no deltas.
func writePack(w io.Writer, st *filesystem.Storage, list []plumbing.Hash) error {
	sum := sha1.New()
	out := bufio.NewWriterSize(io.MultiWriter(w, sum), 64<<10)
	hdr := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(list)))
	if _, err := out.Write(hdr); err != nil {
		return err
	}
	zw, err := zlib.NewWriterLevel(out, zlib.BestSpeed)
	if err != nil {
		return err
	}
	for _, h := range list {
		o, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return fmt.Errorf("read object %s: %w", h, err)
		}
		if _, err := out.Write(packEntryHeader(o.Type(), o.Size())); err != nil {
			return err
		}
		r, err := o.Reader()
		if err != nil {
			return fmt.Errorf("read object %s: %w", h, err)
		}
		zw.Reset(out)
		n, err := io.Copy(zw, r)
		r.Close()
		if err == nil && n != o.Size() {
			err = fmt.Errorf("object %s: %d bytes, its header says %d", h, n, o.Size())
		}
		if err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	_, err = w.Write(sum.Sum(nil))
	return err
}

// packEntryHeader is a pack entry's type and size: the type in bits 4-6 of
// the first byte with the low four bits of the size, then seven bits of
// size per byte, the high bit saying another byte follows.
func packEntryHeader(t plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(t)<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}

// batchCheck asks the user's repository whether objects exist, through one
// long-running git cat-file --batch-check.
type batchCheck struct{ *gitcmd.Batch }

func newBatchCheck(ctx context.Context, host *gitcmd.Runner) (*batchCheck, error) {
	b, err := host.StartBatch(ctx, "cat-file", "--batch-check=%(objectname) %(objectsize)")
	if err != nil {
		return nil, err
	}
	return &batchCheck{b}, nil
}

func (b *batchCheck) has(id string) (bool, error) {
	_, ok, err := b.size(id)
	return ok, err
}

// size returns the size of an object of the user's store, and whether it
// is there.
func (b *batchCheck) size(id string) (int64, bool, error) {
	if _, err := io.WriteString(b.In, id+"\n"); err != nil {
		return 0, false, fmt.Errorf("git cat-file: %w", err)
	}
	line, err := b.Out.ReadString('\n')
	if err != nil {
		return 0, false, fmt.Errorf("git cat-file: %w", err)
	}
	line = strings.TrimSpace(line)
	if strings.HasSuffix(line, " missing") {
		return 0, false, nil
	}
	_, n, _ := strings.Cut(line, " ")
	size, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("git cat-file: %q", line)
	}
	return size, true, nil
}

func (b *batchCheck) close() { _ = b.Close() }

// checkHistory refuses agent history that does not descend from the
// sandbox's start commit, or that takes in a commit of the user's store
// from anywhere but the start commit's history and the agent's own
// commits brought back before (known): another sandbox's snapshot or
// baseline (refs/sandbox/), the stash, a dangling commit. Such a commit
// would reach the user's branch, and a remote, with land --merge or a push
// of the synced branch, although the diff never showed its files.
// boundary are the commits of the agent's history the user's store
// already has (the walk stopped there); everything above them is new.
func checkHistory(ctx context.Context, host *gitcmd.Runner, boundary []string, start, known string) error {
	if start == "" {
		return nil
	}
	if len(boundary) == 0 {
		return fmt.Errorf("the agent's history does not descend from the commit the sandbox started at (%s)", gitcmd.Hash(start).Short())
	}
	// Every commit the store had must be in the start's or the agent's
	// earlier history.
	in := strings.Join(boundary, "\n") + "\n^" + start + "\n"
	if known != "" {
		in += "^" + known + "\n"
	}
	out, err := host.Run(ctx, strings.NewReader(in), "rev-list", "--max-count=1", "--stdin")
	if err != nil {
		return fmt.Errorf("check the agent's history: %w", err)
	}
	if foreign := strings.TrimSpace(string(out)); foreign != "" {
		where := "a commit of your repository that is not in the sandbox's history"
		if refs, err := host.Lines(ctx, "for-each-ref", "--count=1", "--format=%(refname)", "--contains", foreign, "refs/sandbox/"); err == nil && len(refs) > 0 {
			where = "a commit of another sandbox's snapshots (" + termsafe.String(refs[0]) + ")"
		}
		return fmt.Errorf("the agent's history includes %s, %s: landing or pushing it would bring in files the diff never showed", gitcmd.Hash(foreign).Short(), where)
	}
	// And the start must be in the agent's history.
	in = start + "\n^" + strings.Join(boundary, "\n^") + "\n"
	out, err = host.Run(ctx, strings.NewReader(in), "rev-list", "--max-count=1", "--stdin")
	if err != nil {
		return fmt.Errorf("check the agent's history: %w", err)
	}
	if strings.TrimSpace(string(out)) != "" {
		return fmt.Errorf("the agent's history does not descend from the commit the sandbox started at (%s)", gitcmd.Hash(start).Short())
	}
	return nil
}

// size returns an object's size from its header, without inflating the
// rest: from the agent's loose objects or packs, else (an object the
// agent's alternates reach) from the user's store.
func (w *walker) size(h plumbing.Hash) (int64, error) {
	hex := h.String()
	f, err := w.fs.Open(path.Join("objects", hex[:2], hex[2:]))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		// Not a regular file (a FIFO), unreadable: say so, not "missing".
		return 0, fmt.Errorf("read object %s: %w", hex, err)
	}
	if err == nil {
		defer f.Close()
		r, err := objfile.NewReader(f)
		if err != nil {
			return 0, fmt.Errorf("read object %s: %w", hex, err)
		}
		defer r.Close()
		_, size, err := r.Header()
		if err != nil {
			return 0, fmt.Errorf("read object %s: %w", hex, err)
		}
		return size, nil
	}
	if size, err := w.st.EncodedObjectSize(h); err == nil {
		return size, nil
	}
	if size, ok, err := w.have.size(hex); err != nil || ok {
		return size, err
	}
	return 0, fmt.Errorf("object %s: %w", hex, plumbing.ErrObjectNotFound)
}

// checkSize refuses an object of kind (a description for the message)
// over max before it is read.
func (w *walker) checkSize(h plumbing.Hash, max int64, what, settingName string) (int64, error) {
	size, err := w.size(h)
	if err != nil {
		return 0, err
	}
	if max > 0 && size > max {
		return 0, &budgetError{fmt.Sprintf("%s is %s, over the %s allowed", what, units.BytesSize(float64(size)), units.BytesSize(float64(max))), settingName}
	}
	return size, nil
}

func setting(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

func dirName(dir string) string {
	if dir == "" {
		return "the top directory"
	}
	return termsafe.String(strings.TrimSuffix(dir, "/"))
}
