package mcp

import (
	"context"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/rescue"
)

// watchEvery is how often the watcher looks: for sandboxes made or gone
// (the resources listed) and, only while someone subscribes, for diffs
// whose snapshot moved and logs that grew.
const watchEvery = 2 * time.Second

// watcher keeps the resource list current and tells subscribers when a
// resource changed.
type watcher struct {
	s     *Server
	pokec chan struct{}

	mu   sync.Mutex
	subs map[string]int // URI → subscriptions
	// seen is each subscribed diff's last fingerprint (baseline and
	// newest snapshot).
	seen map[string]string
	// logs are the followers of subscribed logs, by URI.
	logs map[string]*follower
}

func newWatcher(s *Server) *watcher {
	return &watcher{s: s, pokec: make(chan struct{}, 1), subs: map[string]int{}, seen: map[string]string{}, logs: map[string]*follower{}}
}

// poke makes the watcher look now (a sandbox was made or removed here).
func (w *watcher) poke() {
	select {
	case w.pokec <- struct{}{}:
	default:
	}
}

// run looks every watchEvery, and when poked, until ctx ends.
func (w *watcher) run(ctx context.Context) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		w.look(ctx)
		select {
		case <-ctx.Done():
			w.mu.Lock()
			for _, f := range w.logs {
				f.stop()
			}
			w.mu.Unlock()
			return
		case <-t.C:
		case <-w.pokec:
		}
	}
}

// look lists the sandboxes' resources and notifies the changed ones.
func (w *watcher) look(ctx context.Context) {
	sbs, _ := w.s.env.All()
	branches := make([]string, len(sbs))
	for i, sb := range sbs {
		branches[i] = sb.Branch
	}
	w.s.listResources(branches)
	for _, uri := range w.changedDiffs(ctx) {
		_ = w.s.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri})
	}
	w.mu.Lock()
	var grown []string
	for uri, f := range w.logs {
		if f.takeDirty() {
			grown = append(grown, uri)
		}
	}
	w.mu.Unlock()
	for _, uri := range grown {
		_ = w.s.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri})
	}
}

// fingerprints are every subscribed diff's baseline and newest snapshot,
// from one for-each-ref (nil when no diff is subscribed).
func (w *watcher) fingerprints(ctx context.Context, uris []string) map[string]string {
	if len(uris) == 0 {
		return nil
	}
	lines, err := w.s.env.Git().Lines(ctx, "for-each-ref", "--format=%(refname) %(objectname)", rescue.RefPrefix)
	if err != nil {
		return nil
	}
	tips := map[string]string{}
	for _, l := range lines {
		if ref, id, ok := strings.Cut(l, " "); ok {
			tips[ref] = id
		}
	}
	out := map[string]string{}
	for _, uri := range uris {
		branch, _, _ := parseURI(uri)
		sb, err := w.s.env.Find(branch)
		if err != nil {
			out[uri] = "gone"
			continue
		}
		out[uri] = sb.Baseline + " " + tips[sb.Refs().Rescue()]
	}
	return out
}

// changedDiffs are the subscribed diffs whose fingerprint changed since
// the last look.
func (w *watcher) changedDiffs(ctx context.Context) []string {
	w.mu.Lock()
	var uris []string
	for uri := range w.seen {
		uris = append(uris, uri)
	}
	w.mu.Unlock()
	now := w.fingerprints(ctx, uris)
	w.mu.Lock()
	defer w.mu.Unlock()
	var changed []string
	for uri, fp := range now {
		if old, ok := w.seen[uri]; ok && old != fp {
			w.seen[uri] = fp
			changed = append(changed, uri)
		}
	}
	return changed
}

// subscribe starts watching a resource: a diff's fingerprint is taken
// now, so a change right after the subscription is not missed; a log
// gets a follower.
func (w *watcher) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	branch, kind, ok := parseURI(uri)
	if !ok {
		return sdk.ResourceNotFoundError(uri)
	}
	w.mu.Lock()
	w.subs[uri]++
	first := w.subs[uri] == 1
	w.mu.Unlock()
	if !first {
		return nil
	}
	if kind == "diff" {
		fp := w.fingerprints(ctx, []string{uri})[uri]
		w.mu.Lock()
		w.seen[uri] = fp
		w.mu.Unlock()
		return nil
	}
	f := startFollower(w.s, branch)
	w.mu.Lock()
	w.logs[uri] = f
	w.mu.Unlock()
	return nil
}

// unsubscribe stops watching a resource when its last subscriber goes.
func (w *watcher) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	uri := req.Params.URI
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs[uri] == 0 {
		return nil
	}
	if w.subs[uri]--; w.subs[uri] > 0 {
		return nil
	}
	delete(w.subs, uri)
	delete(w.seen, uri)
	if f := w.logs[uri]; f != nil {
		f.stop()
		delete(w.logs, uri)
	}
	return nil
}

// follower follows one sandbox's output and notes that it grew; while
// the agent is stopped it asks again every watchEvery.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	dirty  bool
}

func startFollower(s *Server, branch string) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for ctx.Err() == nil {
			if sb, err := s.env.Find(branch); err == nil {
				_ = sb.Logs(ctx, true, "0", f, f)
			}
			select {
			case <-ctx.Done():
			case <-time.After(watchEvery):
			}
		}
	}()
	return f
}

// Write notes new output; the output itself is read when the resource is.
func (f *follower) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.mu.Lock()
		f.dirty = true
		f.mu.Unlock()
	}
	return len(p), nil
}

func (f *follower) takeDirty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dirty
	f.dirty = false
	return d
}

func (f *follower) stop() {
	f.cancel()
	<-f.done
}
