package rescue

import (
	"testing"
	"time"
)

func TestNextSnapshotTry(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		failed   int
		busy     bool
		want     time.Duration
	}{
		{time.Second, 0, false, time.Second},
		{time.Second, 1, false, 2 * time.Second},
		{time.Second, 3, false, 8 * time.Second},
		{time.Second, 6, false, FailedSnapshotWait},
		{time.Second, 1000, false, FailedSnapshotWait},
		{2 * time.Minute, 0, false, 2 * time.Minute},
		{2 * time.Minute, 5, false, 2 * time.Minute}, // never sooner than the interval
		{40 * time.Second, 1, false, FailedSnapshotWait},
		{time.Second, 0, true, time.Second},
		{2 * time.Minute, 4, true, BusySnapshotWait},
		{100 * time.Millisecond, 0, true, 100 * time.Millisecond},
	} {
		if got := NextSnapshotTry(c.interval, c.failed, c.busy); got != c.want {
			t.Errorf("NextSnapshotTry(%s, %d, %v) = %s, want %s", c.interval, c.failed, c.busy, got, c.want)
		}
	}
}
