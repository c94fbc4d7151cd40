package egress

// Live changes: entries allowed or denied while a sandbox exists (git
// sandbox net allow / deny). The host writes them to a small file beside
// the proxy's configuration; the proxy reads it again whenever it changes,
// checked at each new connection, so a change takes effect on the agent's
// next connection without a restart. They widen nothing the proxy
// enforces apart from the list: a live entry is an --allow entry, checked
// and vetted like one.

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// LiveFile is the live changes' file in the proxy's configuration
// directory.
const LiveFile = "live.json"

// FromLive is the source of an entry allowed or denied by a live change.
const FromLive Source = "live change"

// LivePolicy is a sandbox's live changes: hosts allowed and denied since it
// started. A denial overrides every allow entry, live or not.
type LivePolicy struct {
	Allow []Rule `json:"allow,omitempty"`
	Deny  []Rule `json:"deny,omitempty"`
	// Once are entries allowed until a time: a held connection's "allow
	// once" (network_prompt).
	Once []OnceRule `json:"once,omitempty"`
}

// OnceRule is an entry allowed until a time.
type OnceRule struct {
	Entry string    `json:"entry"`
	Until time.Time `json:"until"`
}

// FromOnce is the source of an entry allowed once.
const FromOnce Source = "allowed once"

// Empty reports whether l changes nothing.
func (l *LivePolicy) Empty() bool { return l == nil || len(l.Allow)+len(l.Deny)+len(l.Once) == 0 }

// AllowOnce allows entry until until, and drops the entries allowed once
// whose time has passed at now.
func (l *LivePolicy) AllowOnce(entry string, until, now time.Time) {
	l.PruneOnce(now)
	l.Once = append(l.Once, OnceRule{Entry: entry, Until: until.UTC()})
}

// PruneOnce drops the entries allowed once whose time has passed at now.
func (l *LivePolicy) PruneOnce(now time.Time) {
	kept := l.Once[:0:0]
	for _, o := range l.Once {
		if now.Before(o.Until) {
			kept = append(kept, o)
		}
	}
	l.Once = kept
}

// nextExpiry is the earliest time an entry allowed once ends after now;
// zero when none does.
func (l *LivePolicy) nextExpiry(now time.Time) time.Time {
	var next time.Time
	for _, o := range l.Once {
		if now.Before(o.Until) && (next.IsZero() || o.Until.Before(next)) {
			next = o.Until
		}
	}
	return next
}

// Change allows (or, with deny, denies) entries: each is taken out of the
// other list and added to its own unless there already. It returns the
// entries that changed something.
func (l *LivePolicy) Change(deny bool, entries []Entry) []Entry {
	add, drop := &l.Allow, &l.Deny
	if deny {
		add, drop = &l.Deny, &l.Allow
	}
	var changed []Entry
	for _, e := range entries {
		s := e.String()
		was := len(*drop)
		*drop = removeRule(*drop, s)
		have := false
		for _, r := range *add {
			have = have || r.Entry == s
		}
		if !have {
			*add = append(*add, Rule{Entry: s, Source: FromLive})
		}
		if !have || was != len(*drop) {
			changed = append(changed, e)
		}
	}
	return changed
}

func removeRule(rules []Rule, entry string) []Rule {
	out := rules[:0:0]
	for _, r := range rules {
		if r.Entry != entry {
			out = append(out, r)
		}
	}
	return out
}

// With is p with l's entries: its allowed ones added (those allowed once
// while their time has not passed), its denied ones removed (p is not
// changed).
func (p *Policy) With(l *LivePolicy) (*Policy, error) { return p.withAt(l, time.Now()) }

func (p *Policy) withAt(l *LivePolicy, now time.Time) (*Policy, error) {
	out := &Policy{
		Allow:     append([]Entry(nil), p.Allow...),
		Remove:    append([]Entry(nil), p.Remove...),
		HostAddrs: p.HostAddrs,
	}
	if l == nil {
		return out, nil
	}
	for _, step := range []struct {
		dst   *[]Entry
		rules []Rule
		parse func(string, Source) (Entry, error)
	}{{&out.Allow, l.Allow, ParseAllowEntry}, {&out.Remove, l.Deny, ParseEntry}} {
		for _, r := range step.rules {
			e, err := step.parse(r.Entry, FromLive)
			if err != nil {
				return nil, err
			}
			*step.dst = append(*step.dst, e)
		}
	}
	for _, o := range l.Once {
		if !now.Before(o.Until) {
			continue
		}
		e, err := ParseEntry(o.Entry, FromOnce)
		if err != nil {
			return nil, err
		}
		out.Allow = append(out.Allow, e)
	}
	return out, nil
}

// WriteLive writes l to path, atomically (a proxy reading it sees the old
// file or the new one).
func WriteLive(path string, l *LivePolicy) error {
	if l == nil {
		l = &LivePolicy{}
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("write live policy: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write live policy: %w", err)
	}
	return nil
}

// LoadLive reads the live changes at path; a missing file is none.
func LoadLive(path string) (*LivePolicy, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &LivePolicy{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read live policy: %w", err)
	}
	var l LivePolicy
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("read live policy %s: %w", path, err)
	}
	return &l, nil
}

// livePolicy is the proxy's policy: the configuration's, with the live
// file's changes, read again when the file's size or time changes.
type livePolicy struct {
	base *Policy
	path string
	// dir is the live file's directory, opened once, in which each
	// connection's stat looks the file up by name. A stat by path walks
	// every directory from the container's root: on a root served by
	// fuse-overlayfs (rootless Docker, older kernels) that was 30 to 45 us
	// a connection, against 1.5 us by name. It is nil when the directory
	// could not be opened: the path is used then.
	dir  *os.Root
	errs *log.Logger
	cur  atomic.Pointer[Policy]

	mu   sync.Mutex
	last os.FileInfo // the file read last; nil when there was none
	// expires is when an entry allowed once ends (Unix nanoseconds; 0 for
	// none): the file is read again then.
	expires atomic.Int64
}

func newLivePolicy(base *Policy, path string, errs *log.Logger) *livePolicy {
	l := &livePolicy{base: base, path: path, errs: errs}
	l.cur.Store(base)
	if path != "" {
		if d, err := os.OpenRoot(filepath.Dir(path)); err == nil {
			l.dir = d
		}
		l.refresh()
	}
	return l
}

// stat is the live file's, looked up by name in its directory.
func (l *livePolicy) stat() (os.FileInfo, error) {
	if l.dir != nil {
		return l.dir.Stat(filepath.Base(l.path))
	}
	return os.Stat(l.path)
}

// get is the policy now: a stat of the live file, and a read when it
// changed.
func (l *livePolicy) get() *Policy {
	if l.path != "" {
		l.refresh()
	}
	return l.cur.Load()
}

func (l *livePolicy) refresh() {
	fi, err := l.stat()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.last != nil && errors.Is(err, os.ErrNotExist) {
			l.last = nil
			l.cur.Store(l.base)
		}
		return
	}
	// The host replaces the file (a rename): a new file, or one of
	// another size or time, is read again.
	if l.last != nil && os.SameFile(l.last, fi) && fi.Size() == l.last.Size() && fi.ModTime().Equal(l.last.ModTime()) {
		if exp := l.expires.Load(); exp == 0 || time.Now().UnixNano() < exp {
			return
		}
	}
	now := time.Now()
	live, err := LoadLive(l.path)
	var p *Policy
	if err == nil {
		p, err = l.base.withAt(live, now)
	}
	if err != nil {
		// The last good policy stays; the host writes the file whole.
		l.errs.Printf("live policy: %v", err)
		return
	}
	l.last = fi
	var exp int64
	if next := live.nextExpiry(now); !next.IsZero() {
		exp = next.UnixNano()
	}
	l.expires.Store(exp)
	l.cur.Store(p)
}
