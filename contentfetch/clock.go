package contentfetch

import (
	"context"
	"time"
)

// clock is the package's one seam for time: fact times, durations and
// politeness waits; tests replace it.
type clock struct {
	now func() time.Time
	// sleep waits d, ending early with ErrStopping when stop closes or
	// with ctx.Err() when ctx ends.
	sleep func(ctx context.Context, stop <-chan struct{}, d time.Duration) error
}

var wallClock = clock{now: time.Now, sleep: sleepFor}

func sleepFor(ctx context.Context, stop <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-stop:
		return ErrStopping
	case <-ctx.Done():
		return ctx.Err()
	}
}
