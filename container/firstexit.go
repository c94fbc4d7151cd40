package container

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotStarted is FirstExit's answer for a container that was created
// and never started: it has no exit to wait for.
var ErrNotStarted = errors.New("has not started")

// FirstExit waits until the first of the containers ends and returns its
// index in ids and its exit code. One that has ended already counts at
// once, the first listed winning. A timeout of 0 waits for ever; when it
// passes, the error is context.DeadlineExceeded. A container that is
// missing (ErrNotFound) or never started (ErrNotStarted) is an error
// naming its index.
func FirstExit(ctx context.Context, d Engine, ids []string, timeout time.Duration) (int, int, error) {
	for i, id := range ids {
		st, err := d.Inspect(ctx, id)
		if err != nil {
			return i, -1, err
		}
		if st.Status == "created" {
			return i, -1, fmt.Errorf("container %s %w", id, ErrNotStarted)
		}
		if !st.Running {
			return i, st.ExitCode, nil
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(wctx, timeout)
		defer cancel()
	}
	type done struct {
		i   int
		res WaitResult
	}
	ch := make(chan done, len(ids))
	for i, id := range ids {
		go func() { ch <- done{i, <-d.WaitExit(wctx, id, WaitNotRunning)} }()
	}
	// The first answer decides: an exit, or the wait failing (every
	// waiter fails alike when the timeout or ctx ends).
	r := <-ch
	switch {
	case r.res.Err == nil:
		return r.i, r.res.Code, nil
	case wctx.Err() == nil:
		return r.i, -1, r.res.Err
	case ctx.Err() != nil:
		return -1, -1, ctx.Err()
	}
	return -1, -1, context.DeadlineExceeded
}
