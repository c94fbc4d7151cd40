package e2e

import (
	"fmt"
	"testing"
	"time"
)

// tripwireRatio is where the tripwire fails: not the targets of make bench
// (1.25x to 1.5x), a guard against the next 4x slowdown going unnoticed.
const tripwireRatio = 2.0

// tripwireRounds is how many paired rounds each short form runs.
const tripwireRounds = 3

// TestSpeedTripwire runs a short form of the snapshot, land and start
// benchmarks (100,000 files for snapshot and land, 5,000 for start; three
// paired rounds each, medians) and
// fails when one is more than twice as slow as the same work by hand. It
// does not run in parallel with the other tests, so that they do not load
// the machine while it measures.
func TestSpeedTripwire(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1h\"\n", baseImage)
	bigRepo(t, e, 100_000)
	check := func(what string, ours, raw []time.Duration) {
		ratio := float64(median(ours)) / float64(median(raw))
		fmt.Printf("tripwire: %-28s ours %8.1f ms  raw %8.1f ms  ratio %.2fx (fails over %.1fx)\n", what, ms(median(ours)), ms(median(raw)), ratio, tripwireRatio)
		if ratio > tripwireRatio {
			t.Errorf("%s is %.2fx the same work by hand (%.1f ms against %.1f ms): over %.1fx; run make bench", what, ratio, ms(median(ours)), ms(median(raw)), tripwireRatio)
		}
	}
	s := snapshotRounds(t, e, tripwireRounds)
	check("snapshot, 100k files, 200 new", s.ours, s.raw)
	ours, raw := landRounds(t, e, tripwireRounds)
	check("land --keep, 100k files", ours, raw)
	small := NewEnv(t)
	bigRepo(t, small, 5000)
	ours, raw = startRounds(t, small, tripwireRounds)
	check("start -d, 5k files", ours, raw)
}
