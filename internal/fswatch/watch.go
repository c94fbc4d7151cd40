// Package fswatch watches a worktree on this machine with inotify and
// keeps a journal of the paths that changed, so a snapshot can look at
// those paths only instead of every file.
//
// A Watcher hands out tokens; Since(token) returns the paths changed
// after it. Whenever the watcher may have missed something — the kernel's
// queue overflowed, the journal passed its cap, a watch could not be
// added, the watcher is not the one that made the token (it restarted) —
// the answer is All: the caller looks at everything, as it would without
// a watcher. Nothing is ever answered from a guess.
//
// Paths are relative to the root, with "/" as separator; a directory
// that went away (deleted, or moved out) is named with a trailing "/"
// and stands for everything that was under it. A directory that appears
// (created, or moved in) is watched at once and everything in it is
// reported, so a file written into it before its watch existed is not
// missed. Directories named .git are reported but never entered.
package fswatch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Options bound a watcher.
type Options struct {
	// MaxWatches caps the inotify watches (one per directory); 0 is half
	// of fs.inotify.max_user_watches. A tree with more directories is not
	// watched: every answer is All.
	MaxWatches int
	// MaxPaths caps the journal (distinct paths remembered); 0 is
	// DefaultMaxPaths. Past it the journal is emptied and tokens made
	// before are answered All.
	MaxPaths int
	// MaxLinked caps the files with more than one hard link that are
	// remembered; 0 is DefaultMaxLinked. A tree with more is not watched
	// (every answer is All, as it is while any such file is there).
	MaxLinked int
}

// DefaultMaxPaths is the journal's cap: about 10 MB of paths.
const DefaultMaxPaths = 100_000

// DefaultMaxLinked is the cap of files with hard links remembered.
const DefaultMaxLinked = 10_000

// Answer is what changed since a token.
type Answer struct {
	// Token names this moment: the next Since starts from it. "" when the
	// watcher cannot vouch for anything (not watching).
	Token string
	// All is set when the changes are not known: look at everything.
	All bool
	// Paths changed since the token (All false).
	Paths []string
}

// Stats describe a watcher, for doctor.
type Stats struct {
	Watches, MaxWatches, UserLimit int
	Paths, MaxPaths                int
	// Linked counts the files with more than one hard link: while there
	// is one, every answer is All.
	Linked int
	// Lost counts the times events were lost (queue overflow, journal
	// cap); Blind is why nothing is watched any more ("" while watching).
	Lost  int
	Blind string
}

// Watcher watches one directory tree.
type Watcher struct {
	root string
	id   string
	opts Options

	mu      sync.Mutex
	fd      int
	wds     map[int32]string // watch → directory ("" is the root)
	dirs    map[string]int32
	journal map[string]uint64
	// linked are the files with more than one hard link. A write
	// through one name of a file makes an event for that name only:
	// while there is one, no answer can say what changed (All), nor can
	// one about a token made meanwhile.
	linked map[string]bool
	seq    uint64
	// floor: tokens below it were made before events were lost.
	floor uint64
	lost  int
	blind string
	buf   []byte

	done chan struct{}
	wg   sync.WaitGroup
}

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// UserLimit is fs.inotify.max_user_watches (0 when it cannot be read).
func UserLimit() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// New watches root and everything under it. It returns once every
// directory is watched; from then on Since answers.
func New(root string, opts Options) (*Watcher, error) {
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = max(UserLimit()/2, 1)
	}
	if opts.MaxPaths <= 0 {
		opts.MaxPaths = DefaultMaxPaths
	}
	if opts.MaxLinked <= 0 {
		opts.MaxLinked = DefaultMaxLinked
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	w := &Watcher{
		root: root, id: hex.EncodeToString(id[:]), opts: opts, fd: fd,
		wds: map[int32]string{}, dirs: map[string]int32{}, journal: map[string]uint64{}, linked: map[string]bool{},
		buf: make([]byte, 64<<10), done: make(chan struct{}),
	}
	w.mu.Lock()
	w.addTree("", false)
	w.mu.Unlock()
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

// Close stops watching.
func (w *Watcher) Close() error {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop("closed")
	return nil
}

// loop reads events as they come, so the kernel's queue does not fill
// between two questions.
func (w *Watcher) loop() {
	defer w.wg.Done()
	for {
		select {
		case <-w.done:
			return
		default:
		}
		w.mu.Lock()
		fd := w.fd
		w.mu.Unlock()
		if fd < 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 200); n > 0 {
			w.mu.Lock()
			w.drain()
			w.mu.Unlock()
		}
	}
}

// Since returns what changed after token ("" for none: All). Every event
// the kernel has queued is read first, so a change made before the call
// is in the answer.
func (w *Watcher) Since(token string) Answer {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	if w.blind != "" {
		return Answer{All: true}
	}
	now := Answer{Token: w.id + ":" + strconv.FormatUint(w.seq, 10)}
	if len(w.linked) > 0 {
		now.All = true
		return now
	}
	id, n, ok := strings.Cut(token, ":")
	seq, err := strconv.ParseUint(n, 10, 64)
	if !ok || err != nil || id != w.id || seq < w.floor || seq > w.seq {
		now.All = true
		return now
	}
	for p, s := range w.journal {
		if s > seq {
			now.Paths = append(now.Paths, p)
		}
	}
	return now
}

// Stats describes the watcher.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{
		Watches: len(w.wds), MaxWatches: w.opts.MaxWatches, UserLimit: UserLimit(),
		Paths: len(w.journal), MaxPaths: w.opts.MaxPaths, Linked: len(w.linked), Lost: w.lost, Blind: w.blind,
	}
}

// stop gives up watching: every answer is All from now on.
func (w *Watcher) stop(why string) {
	if w.blind == "" {
		w.blind = why
	}
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
	w.wds, w.dirs, w.journal, w.linked = map[int32]string{}, map[string]int32{}, map[string]uint64{}, map[string]bool{}
}

// lose forgets the journal: tokens made so far are answered All.
func (w *Watcher) lose() {
	w.lost++
	w.journal = map[string]uint64{}
	w.seq++
	w.floor = w.seq
}

func (w *Watcher) record(p string) {
	w.seq++
	w.journal[p] = w.seq
	if len(w.journal) > w.opts.MaxPaths {
		w.lose()
	}
}

// drain reads every queued event.
func (w *Watcher) drain() {
	for w.fd >= 0 {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) {
				w.stop("reading events: " + err.Error())
			}
			return
		}
		w.parse(w.buf[:n])
	}
}

func (w *Watcher) parse(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		w.handle(ev.Wd, ev.Mask, name)
		if w.fd < 0 {
			return
		}
		b = b[end:]
	}
}

// handle records one event.
func (w *Watcher) handle(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		// Events were dropped, and with them perhaps a new directory
		// that is not watched: watch the whole tree again.
		w.wds, w.dirs, w.linked = map[int32]string{}, map[string]int32{}, map[string]bool{}
		w.addTree("", false)
		w.lose()
		return
	}
	dir, ok := w.wds[wd]
	if !ok {
		return // a watch already forgotten
	}
	if mask&unix.IN_IGNORED != 0 {
		w.forget(dir, false)
		return
	}
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		if dir == "" {
			w.stop("the watched directory was removed or moved")
		}
		return // its parent names it
	}
	p := join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case isDir && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.record(p)
		if name != ".git" {
			w.addTree(p, true)
		}
	case isDir && mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		w.forget(p, true)
		w.unlinkUnder(p)
		w.record(p + "/")
	case isDir:
		w.record(p)
	default:
		if mask&(unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ATTRIB|unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 {
			w.checkLinks(p)
		}
		w.record(p)
	}
}

// checkLinks remembers p when it is a file with more than one hard link,
// and forgets it otherwise. (A link made outside the tree to a file of it
// makes no event here: see DESIGN.md.)
func (w *Watcher) checkLinks(p string) {
	var st unix.Stat_t
	err := unix.Lstat(filepath.Join(w.root, p), &st)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink <= 1 {
		w.unlink(p)
		return
	}
	w.linked[p] = true
	if len(w.linked) > w.opts.MaxLinked {
		w.stop(fmt.Sprintf("more than %d files with hard links", w.opts.MaxLinked))
	}
}

// unlinkUnder forgets the linked files under a directory that went away.
func (w *Watcher) unlinkUnder(dir string) {
	for p := range w.linked {
		if strings.HasPrefix(p, dir+"/") {
			w.unlink(p)
		}
	}
}

// unlink forgets a linked file; once none is left, the tokens made while
// there were some are answered All still (a write through another name
// of a file was not seen under this one).
func (w *Watcher) unlink(p string) {
	if !w.linked[p] {
		return
	}
	delete(w.linked, p)
	if len(w.linked) == 0 {
		w.seq++
		w.floor = w.seq
	}
}

// forget drops the watches of dir (and, with below, of every directory
// under it: a directory moved out keeps its watches, which would report
// paths that are no longer there).
func (w *Watcher) forget(dir string, below bool) {
	for d, wd := range w.dirs {
		if d == dir || (below && strings.HasPrefix(d, dir+"/")) {
			if below {
				_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			}
			delete(w.dirs, d)
			delete(w.wds, wd)
		}
	}
}

// addTree watches dir and every directory under it; with report, every
// path found is recorded as changed.
func (w *Watcher) addTree(dir string, report bool) {
	if w.fd < 0 {
		return
	}
	if len(w.wds) >= w.opts.MaxWatches {
		w.stop(fmt.Sprintf("more than %d directories to watch", w.opts.MaxWatches))
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(w.root, dir), watchMask)
	switch {
	case errors.Is(err, unix.ENOSPC):
		w.stop("fs.inotify.max_user_watches reached")
		return
	case err != nil:
		// Gone already, or not a directory any more: its parent's events
		// say so.
		return
	}
	if old, ok := w.dirs[dir]; ok && old != int32(wd) {
		delete(w.wds, old)
	}
	w.wds[int32(wd)], w.dirs[dir] = dir, int32(wd)
	entries, err := os.ReadDir(filepath.Join(w.root, dir))
	if err != nil {
		return
	}
	for _, e := range entries {
		p := join(dir, e.Name())
		if report {
			w.record(p)
		}
		if e.Type().IsRegular() {
			w.checkLinks(p)
			if w.fd < 0 {
				return
			}
		}
		if e.IsDir() && e.Name() != ".git" {
			w.addTree(p, report)
			if w.fd < 0 {
				return
			}
		}
	}
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// Hold stops the reading of events until release is called, as a
// watcher too slow for the changes would (tests: to make the kernel's
// queue overflow).
func (w *Watcher) Hold() (release func()) {
	w.mu.Lock()
	return w.mu.Unlock
}
