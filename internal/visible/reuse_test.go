package visible

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// inode returns a file's inode number.
func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestFirstFillReusesAPackOfReachableObjectsOnly(t *testing.T) {
	r := newRepo(t)
	c1, b1 := r.commit("a.txt", "one\n")
	r.git("tag", "-a", "-m", "release", "v1")
	r.git("gc", "-q")
	packs, _ := filepath.Glob(filepath.Join(r.dir, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("gc made %d packs", len(packs))
	}
	res := r.refresh()
	if res.Reused != 1 || r.packCount() != 1 {
		t.Fatalf("reused %d packs, the store has %d", res.Reused, r.packCount())
	}
	for _, id := range []string{c1, b1, r.git("rev-parse", "v1")} {
		if !r.has(id) {
			t.Errorf("the store lacks %s", id)
		}
	}
	// Linked, not copied.
	if got := inode(t, filepath.Join(r.store.packDir(), filepath.Base(packs[0]))); got != inode(t, packs[0]) {
		t.Error("the pack was copied, not linked")
	}
	// Later refreshes are incremental as before.
	c2, _ := r.commit("b.txt", "two\n")
	if again := r.refresh(); again.Reused != 0 || again.Objects != 3 || !r.has(c2) {
		t.Errorf("second refresh: %+v", again)
	}
}

func TestFirstFillNeverReusesAPackWithWhatAgentsMustNotRead(t *testing.T) {
	r := newRepo(t)
	c1, _ := r.commit("a.txt", "one\n")
	// An old pack of reachable objects only…
	r.git("repack", "-dq")
	// …and a newer one that also holds the stash and a snapshot.
	c2, b2 := r.commit("b.txt", "two\n")
	os.WriteFile(filepath.Join(r.dir, "b.txt"), []byte("stashed secret\n"), 0o644)
	r.git("stash", "-q")
	stashBlob := r.git("rev-parse", "refs/stash:b.txt")
	r.git("checkout", "-q", "-b", "tmp")
	snap, snapBlob := r.commit("dotenv", "SECRET=1\n")
	r.git("update-ref", "refs/sandbox/other/rescue", snap)
	r.git("checkout", "-q", "main")
	r.git("branch", "-D", "tmp")
	r.git("repack", "-dq")
	res := r.refresh()
	if res.Reused != 1 {
		t.Errorf("reused %d packs, want the old one only", res.Reused)
	}
	for _, id := range []string{c1, c2, b2} {
		if !r.has(id) {
			t.Errorf("the store lacks %s, which main reaches", id)
		}
	}
	for name, id := range map[string]string{"stashed blob": stashBlob, "snapshot": snap, "snapshot's blob": snapBlob} {
		if r.has(id) {
			t.Errorf("the store holds the %s %s", name, id)
		}
	}
}

func TestUsage(t *testing.T) {
	r := newRepo(t)
	if u, err := r.store.Usage(filepath.Join(r.dir, ".git", "objects")); err != nil || u.Packs != 0 {
		t.Fatalf("before the first refresh: %+v %v", u, err)
	}
	r.git("gc", "-q")
	r.refresh()
	r.commit("b.txt", "two\n")
	r.refresh()
	u, err := r.store.Usage(filepath.Join(r.dir, ".git", "objects"))
	if err != nil || u.Packs != 2 || u.Shared == 0 || u.Shared >= u.Bytes {
		t.Errorf("usage %+v %v: want 2 packs, one shared", u, err)
	}
}
