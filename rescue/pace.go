package rescue

import (
	"context"
	"errors"
	"time"

	units "github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/internal/record"
)

// How a supervisor paces its interval snapshots besides the interval.
const (
	// FailedSnapshotWait bounds the wait after interval snapshots that
	// failed in a row, which doubles with each (an interval longer than
	// this is kept as it is).
	FailedSnapshotWait = time.Minute
	// BusySnapshotWait is the wait after an interval snapshot gave way to
	// a command holding or awaiting the sandbox's lock (an interval
	// shorter than this is kept).
	BusySnapshotWait = time.Second
)

// PaceLog is where a Pacer says what its snapshots did (the supervisor's
// log: a soak reads its latencies there).
type PaceLog interface {
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Tracef(format string, args ...any)
}

// Pacer is a supervisor's run of interval snapshots: interval snapshots
// are background work, so they give way to any command holding or
// awaiting the sandbox's lock, and back off when they fail.
type Pacer struct {
	Snap     *Snapshotter
	Interval time.Duration
	Log      PaceLog
	// failed counts the interval snapshots that failed in a row;
	// budgetSaid is set once the spent budget was said.
	failed     int
	budgetSaid bool
}

// Take takes one interval snapshot, and reports whether it gave way to a
// command holding or awaiting the sandbox's lock.
func (p *Pacer) Take(ctx context.Context) (busy bool) {
	var spent *BudgetSpent
	began := time.Now()
	t, err := p.Snap.Take(ctx, ReasonInterval)
	took := time.Since(began)
	now := time.Now().Format(time.RFC3339)
	switch {
	case errors.Is(err, record.ErrBusy):
		// A command of the user's holds the lock or waits for it: it goes
		// first, and this snapshot is tried again soon.
		p.Log.Tracef("interval snapshot of %s: the sandbox's lock is held or awaited; trying again later", p.Snap.Branch)
		return true
	case errors.As(err, &spent):
		p.failed = 0
		if !p.budgetSaid {
			p.budgetSaid = true
			p.Log.Warnf("%s interval snapshots stop: this sandbox's snapshots wrote %s, budget.snapshots is %s; the exit snapshot is still taken", now, units.BytesSize(float64(spent.Used)), units.BytesSize(float64(spent.Budget)))
		}
	case err != nil:
		p.failed++
		p.Log.Warnf("%s snapshot failed (%d in a row; next try in %s): %v", now, p.failed, NextSnapshotTry(p.Interval, p.failed, false), err)
	default:
		p.failed = 0
		if t.New {
			p.Log.Infof("%s snapshot %s (%d changes, took %s)", now, t.ID[:min(12, len(t.ID))], t.Changes, took.Round(time.Millisecond))
		}
	}
	return false
}

// Next is how long to wait after the last Take, which said busy.
func (p *Pacer) Next(busy bool) time.Duration {
	return NextSnapshotTry(p.Interval, p.failed, busy)
}

// NextSnapshotTry is how long a supervisor waits before its next interval
// snapshot: the interval after one taken (or found unchanged); after
// failed ones in a row, twice as long for each, up to FailedSnapshotWait,
// so a snapshot that keeps failing (an engine gone, a tree refused) is not
// retried every interval with the sandbox's lock held each time; after one
// that gave way to a user's command (busy), soon, as the command may not
// take a snapshot of its own.
func NextSnapshotTry(interval time.Duration, failed int, busy bool) time.Duration {
	if busy {
		return min(interval, BusySnapshotWait)
	}
	d := interval
	for range failed {
		if d >= FailedSnapshotWait {
			break
		}
		d *= 2
	}
	return max(interval, min(d, FailedSnapshotWait))
}
