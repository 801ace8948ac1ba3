package engine

import (
	"sync"
	"time"
)

// The delivery ceiling (docs/streams.md, Fates) counts the failed
// handlings of an entry: unclassified outcomes, not transient ones, nor
// deliveries left pending unhandled. Redis's own count of deliveries
// cannot serve: every read, reclaim and renewed claim raises it, and
// reading it (XPENDING) is not a command the production broker grants the
// worker. So each worker counts the failures it saw, per entry, in memory:
// an entry that fails on several workers, or across a restart, may be
// handled up to the ceiling on each before it is dead-lettered.

// failureHorizon is how long, in claim times, a count is kept after the
// entry last failed here: long past when it would have come back through
// the reclaim, had it come back to this worker.
const failureHorizon = 10

// failures counts the unclassified failures of entries. It is safe for
// concurrent use.
type failures struct {
	keep time.Duration // how long a count outlives its last failure

	mu sync.Mutex
	n  map[string]failureCount
}

type failureCount struct {
	n    int
	last time.Time
}

func newFailures(claimMinIdle time.Duration) *failures {
	return &failures{keep: failureHorizon * claimMinIdle, n: make(map[string]failureCount)}
}

// add counts one failure of entry id at now and returns how many there
// have been. Counts past their horizon are forgotten on the way.
func (f *failures) add(id string, now time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, c := range f.n {
		if now.Sub(c.last) > f.keep {
			delete(f.n, k)
		}
	}
	c := f.n[id]
	c.n++
	c.last = now
	f.n[id] = c
	return c.n
}

// forget drops the count of an entry that has its fate.
func (f *failures) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.n, id)
}
