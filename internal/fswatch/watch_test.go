package fswatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, root, p, body string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newWatcher(t *testing.T, root string, o Options) *Watcher {
	t.Helper()
	w, err := New(root, o)
	must(t, err)
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func TestWatcherReportsChangesRenamesDeletesAndNewDirectories(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a/one", "1")
	write(t, root, "a/two", "2")
	write(t, root, "b/c/three", "3")
	write(t, root, "keep", "k")
	w := newWatcher(t, root, Options{})
	first := w.Since("")
	if !first.All || first.Token == "" {
		t.Fatalf("no token yet: want All with a token, got %+v", first)
	}
	if a := w.Since(first.Token); a.All || len(a.Paths) != 0 {
		t.Fatalf("nothing changed: got %+v", a)
	}
	write(t, root, "a/one", "changed")
	must(t, os.Rename(filepath.Join(root, "a/two"), filepath.Join(root, "a/two-moved")))
	must(t, os.RemoveAll(filepath.Join(root, "b")))
	// A new directory, with files written at once: found whether or not
	// its watch came before them.
	write(t, root, "new/deep/er/file", "n")
	must(t, os.MkdirAll(filepath.Join(root, "elsewhere"), 0o755))
	outside := t.TempDir()
	write(t, outside, "moved-in/x", "x")
	must(t, os.Rename(filepath.Join(outside, "moved-in"), filepath.Join(root, "moved-in")))
	write(t, root, "sub/.git/HEAD", "ref")
	a := w.Since(first.Token)
	if a.All {
		t.Fatalf("nothing was lost: got All")
	}
	for _, want := range []string{"a/one", "a/two", "a/two-moved", "b/", "new/deep/er/file", "moved-in/x", "sub/.git"} {
		if !slices.Contains(a.Paths, want) {
			t.Errorf("%s not reported: %q", want, a.Paths)
		}
	}
	for _, p := range a.Paths {
		if strings.HasPrefix(p, "sub/.git/") || p == "keep" {
			t.Errorf("%s reported", p)
		}
	}
	// Later changes in the new directories are seen (they are watched).
	write(t, root, "new/deep/er/later", "l")
	write(t, root, "moved-in/later", "l")
	b := w.Since(a.Token)
	if b.All || !slices.Contains(b.Paths, "new/deep/er/later") || !slices.Contains(b.Paths, "moved-in/later") || slices.Contains(b.Paths, "a/one") {
		t.Fatalf("after the second token: %+v", b)
	}
	// A directory moved out is not watched under its old name any more.
	must(t, os.Rename(filepath.Join(root, "moved-in"), filepath.Join(outside, "gone")))
	write(t, outside, "gone/after", "x")
	c := w.Since(b.Token)
	if !slices.Contains(c.Paths, "moved-in/") || slices.Contains(c.Paths, "moved-in/after") {
		t.Fatalf("moved out: %+v", c)
	}
}

func TestWatcherAnswersAllAfterAnOverflowAndWatchesNewDirectoriesAgain(t *testing.T) {
	root := t.TempDir()
	for i := range 50 {
		write(t, root, fmt.Sprintf("burst/%02d/first", i), "x")
	}
	w := newWatcher(t, root, Options{})
	tok := w.Since("").Token
	// The reader is held while more events come than the kernel queues
	// (fs.inotify.max_queued_events, 16384 by default): the queue
	// overflows; a directory made meanwhile is watched again afterwards.
	release := w.Hold()
	for i := range 20_000 {
		write(t, root, fmt.Sprintf("burst/%02d/f%05d", i%50, i), "x")
	}
	write(t, root, "fresh/dir/made", "x")
	release()
	a := w.Since(tok)
	if !a.All {
		t.Fatalf("events were lost: want All, got %d paths", len(a.Paths))
	}
	write(t, root, "burst/07/after", "y")
	write(t, root, "fresh/dir/after", "y")
	b := w.Since(a.Token)
	if b.All || !slices.Contains(b.Paths, "burst/07/after") || !slices.Contains(b.Paths, "fresh/dir/after") {
		t.Fatalf("after the overflow: %+v", b)
	}
	if w.Stats().Lost == 0 {
		t.Fatal("the loss is not counted")
	}
}

func TestWatcherBounds(t *testing.T) {
	root := t.TempDir()
	write(t, root, "d1/f", "x")
	write(t, root, "d2/f", "x")
	if a := newWatcher(t, root, Options{MaxWatches: 2}).Since(""); !a.All || a.Token != "" {
		t.Fatalf("three directories, two watches: want blind, got %+v", a)
	}
	w := newWatcher(t, root, Options{MaxPaths: 5})
	tok := w.Since("").Token
	for i := range 10 {
		write(t, root, fmt.Sprintf("d1/g%d", i), "x")
	}
	if a := w.Since(tok); !a.All {
		t.Fatalf("past the journal's cap: want All, got %+v", a)
	}
	if s := w.Stats(); s.Paths > 5 || s.Watches != 3 {
		t.Fatalf("stats: %+v", s)
	}
	if a := (&Watcher{id: "x", fd: -1}).Since("y:1"); !a.All {
		t.Fatal("a token of another watcher (a restart) must be answered All")
	}
}

func TestServeAndClient(t *testing.T) {
	root := t.TempDir()
	write(t, root, "f", "x")
	w := newWatcher(t, root, Options{})
	// A socket path longer than an address may be.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	must(t, os.MkdirAll(dir, 0o700))
	sock := filepath.Join(dir, "watch.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Serve(ctx, sock) }()
	c := Client{Socket: sock}
	var first Answer
	var err error
	for range 100 {
		if first, err = c.Since(ctx, ""); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, err)
	write(t, root, "g\nwith newline", "y")
	a, err := c.Since(ctx, first.Token)
	must(t, err)
	if a.All || !slices.Equal(a.Paths, []string{"g\nwith newline"}) {
		t.Fatalf("got %+v", a)
	}
	s, err := c.Stats(ctx)
	must(t, err)
	if s.Watches != 1 || s.UserLimit == 0 {
		t.Fatalf("stats %+v", s)
	}
	cancel()
	must(t, <-done)
	if a, err := c.Since(context.Background(), first.Token); err == nil || !a.All {
		t.Fatalf("no watcher: want All and an error, got %+v %v", a, err)
	}
}

// A file with more than one hard link can be written through one name
// with an event for that name only, or none (a name outside the tree):
// while the tree holds one, every answer is All — whether the link was
// there when the watch began or made since — and so is an answer about a
// token made meanwhile, once they are gone.
func TestWatcherAnswersAllWhileFilesHaveHardLinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	write(t, root, "before", "b")
	write(t, root, "plain", "p")
	write(t, outside, "source", "s")
	must(t, os.Link(filepath.Join(root, "before"), filepath.Join(outside, "before")))
	w := newWatcher(t, root, Options{})
	tok := w.Since("").Token
	if a := w.Since(tok); !a.All {
		t.Fatalf("a file linked outside at the start: want All, got %+v", a)
	}
	must(t, os.Remove(filepath.Join(outside, "before")))
	must(t, os.Remove(filepath.Join(root, "before"))) // its event forgets it
	a := w.Since(tok)
	if !a.All {
		t.Fatalf("a token made while a link was there: want All, got %+v", a)
	}
	if b := w.Since(a.Token); b.All || len(b.Paths) != 0 {
		t.Fatalf("no link left, nothing changed: got %+v", b)
	}
	tok = w.Since(a.Token).Token
	must(t, os.MkdirAll(filepath.Join(root, "in"), 0o755))
	must(t, os.Link(filepath.Join(outside, "source"), filepath.Join(root, "in/linked")))
	if a := w.Since(tok); !a.All {
		t.Fatalf("a link made in the tree: want All, got %+v", a)
	}
	if st := w.Stats(); st.Linked != 1 {
		t.Fatalf("stats: want 1 linked file, got %+v", st)
	}
	must(t, os.Rename(filepath.Join(root, "in"), filepath.Join(outside, "in")))
	a = w.Since(tok)
	write(t, root, "plain", "changed")
	if b := w.Since(a.Token); b.All || !slices.Equal(b.Paths, []string{"plain"}) {
		t.Fatalf("the linked file moved out: want plain only, got %+v", b)
	}
}
