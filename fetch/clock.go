package fetch

import (
	"context"
	"time"
)

// clock is the package's one seam for time. The Fetcher (pacing waits, the
// waits between Get's attempts, fetched_at) reads it; tests replace it
// (export_test.go).
type clock struct {
	now func() time.Time
	// sleep waits d, ending early with ctx.Err() when ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
}

var wallClock = clock{now: time.Now, sleep: sleepFor}

// sleepFor waits d, returning early with ctx.Err() when ctx ends.
func sleepFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
