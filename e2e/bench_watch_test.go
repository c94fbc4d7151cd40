package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSnapshotWatched: the snapshots of BenchmarkSnapshot once the
// supervisor's change watcher of the bound worktree answers: 200 changed
// and added files in 100,000 against C git's full-scan git add -A and
// write-tree with a copy of the index (target 0.5×), and a snapshot with
// nothing changed (target 30 ms, the whole command).
func BenchmarkSnapshotWatched(b *testing.B) {
	e := NewEnv(b)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n", baseImage)
	bigRepo(b, e, 100_000)
	dir := filepath.Join(e.State, e.RepoID(), "snap")
	r := snapshotRoundsAfter(b, e, benchRounds, func() {
		Eventually(b, 2*time.Minute, "the change watcher to answer", func() bool {
			_, err := os.Stat(filepath.Join(dir, "watch.sock"))
			return err == nil
		})
	})
	// The snapshots were the watched ones: they left the watcher's token.
	if _, err := os.Stat(filepath.Join(dir, "rescue.index.watch")); err != nil {
		b.Fatalf("the snapshots did not use the change watcher: %v", err)
	}
	report(b, "watched snapshot, 100k, 200 changed", median(r.ours), median(r.raw), 0.5)
	// CPU time of the same rounds.
	n := len(r.ours)
	fmt.Printf("bench: watched snapshot, 100k, 200 changed, CPU time: ours %.1f ms  raw %.1f ms  ratio %.2fx\n",
		ms(median(r.cpu[:n])), ms(median(r.rawCPU[:n])), float64(median(r.cpu[:n]))/float64(median(r.rawCPU[:n])))
	reportTime(b, "watched snapshot, 100k, unchanged", median(r.unchanged), median(r.unchangedRaw), 30*time.Millisecond)
	fmt.Printf("bench: first watched snapshot (looks at everything), 100k files: %.1f ms; peak RSS of the snapshot process tree: %d MiB\n", ms(r.first), r.rss/1024)
	b.ReportMetric(ms(r.first), "ms-first")
}
