package workspace

// The change watcher of a bound worktree: the supervisor runs it while the
// agent runs, and snapshots ask it over a socket in the sandbox's state
// directory which paths changed (rescue.Local.Watch). Copy mode has none:
// its snapshots walk the worktree in the helper, as before.

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/fswatch"
	"github.com/git-sandbox/git-sandbox/rescue"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Watch watches the worktree until ctx ends or the returned function is
// called. A watcher that cannot start is said and left out: snapshots
// then look at every file, as without one.
func (b *Bind) Watch(ctx context.Context) (stop func()) {
	w, err := fswatch.New(b.rec.Worktree, fswatch.Options{})
	if err != nil {
		b.env.UI.Warnf("no change watcher (snapshots look at every file): %v", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Serve(ctx, b.env.Layout.WatchSocket(b.rec.Branch)); err != nil {
			b.env.UI.Warnf("change watcher: %v", err)
		}
	}()
	return func() {
		cancel()
		<-done
		_ = w.Close()
	}
}

// watcher is the worktree's change watcher, asked at each snapshot
// whether it runs (the supervisor makes its snapshotter before it starts
// its watcher).
func (b *Bind) watcher() rescue.Watcher {
	return watchClient{fswatch.Client{Socket: b.env.Layout.WatchSocket(b.rec.Branch)}}
}

type watchClient struct{ c fswatch.Client }

// Running reports whether the watcher's socket is there.
func (w watchClient) Running() bool {
	_, err := os.Stat(w.c.Socket)
	return err == nil
}

func (w watchClient) Since(ctx context.Context, token string) (rescue.Changed, error) {
	a, err := w.c.Since(ctx, token)
	return rescue.Changed{Token: a.Token, All: a.All, Paths: a.Paths}, err
}

// WatcherStat is one running change watcher, for doctor.
type WatcherStat struct {
	// Sandbox is the sandbox's state directory's name (its branch,
	// escaped).
	Sandbox string
	fswatch.Stats
	// Err is why it did not answer.
	Err error
}

// Watchers asks every change watcher of the repository's sandboxes how
// it is.
func Watchers(ctx context.Context, l worktree.Layout) []WatcherStat {
	socks, _ := filepath.Glob(filepath.Join(l.RepoDir(), "*", filepath.Base(l.WatchSocket("x"))))
	sort.Strings(socks)
	var out []WatcherStat
	for _, s := range socks {
		st, err := fswatch.Client{Socket: s}.Stats(ctx)
		name := filepath.Base(filepath.Dir(s))
		name = strings.NewReplacer("%2F", "/", "%25", "%").Replace(name)
		out = append(out, WatcherStat{Sandbox: name, Stats: st, Err: err})
	}
	return out
}
