package fetch

import (
	"context"
	"time"
)

// SetSleep replaces the sleep of f's clock for a test: pacing waits and
// Get's waits between attempts go through it.
func SetSleep(f *Fetcher, sleep func(ctx context.Context, d time.Duration) error) {
	f.clock.sleep = sleep
}

// SetNow replaces the now of f's clock for a test: pacing, fetched_at and
// the robots.txt cache's expiry read it.
func SetNow(f *Fetcher, now func() time.Time) {
	f.clock.now = now
}
