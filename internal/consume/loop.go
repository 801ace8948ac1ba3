package consume

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// ErrBrokerUnavailable is returned by Loop.Run after MaxConsecutiveFailures
// consecutive failed cycles (reads, claims, acks or writes failing), so the
// process exits non-zero and a supervisor restarts it. The error wraps the
// last failure as detail.
var ErrBrokerUnavailable = errors.New("consume: broker unavailable")

// errRunning is returned by a second concurrent call to Run.
var errRunning = errors.New("consume: loop is already running")

// Loop is one consumer group's loop: it reads commands, reclaims idle
// pending ones, hands them to its Capability as its Scheduler allows, and
// gives each exactly one fate. See the package documentation.
//
// Create it with New; the zero value is not usable. Run may be called again
// after it returns, never twice at once; Healthy is safe for concurrent use.
type Loop[C, R any] struct {
	o     Options
	b     broker
	cap   Capability[C, R]
	sched Scheduler[C, R]
	clock clock

	running    atomic.Bool
	groupReady atomic.Bool
	lastOK     atomic.Int64 // unix nanoseconds of the latest Redis answer
	cur        atomic.Pointer[run[C, R]]
}

// New returns a Loop on client for cap, scheduled by sched.
func New[C, R any](client rueidis.Client, cap Capability[C, R], sched Scheduler[C, R], opts Options) *Loop[C, R] {
	l := &Loop[C, R]{o: opts.withDefaults(), cap: cap, sched: sched, clock: wallClock}
	l.b = &redisBroker{client: client, o: &l.o, now: func() time.Time { return l.clock.now() }, ok: l.markOK}
	if m := l.o.Metrics; m != nil {
		m.counts = l.counts
	}
	return l
}

// Options returns the options in force, defaults filled in.
func (l *Loop[C, R]) Options() Options { return l.o }

// Healthy reports whether the consumer group exists and Redis answered
// recently. It is HealthyAt at the current time.
func (l *Loop[C, R]) Healthy() bool { return l.HealthyAt(l.clock.now()) }

// HealthyAt reports whether, at now, the consumer group exists and a Redis
// command succeeded within the last max(3 × ReadBlock, ClaimMinIdle): the
// loop talks to Redis at least once per ReadBlock while reading, and the
// ownership refresh at least once per ClaimMinIdle/3 while full.
func (l *Loop[C, R]) HealthyAt(now time.Time) bool {
	if !l.groupReady.Load() {
		return false
	}
	last := l.lastOK.Load()
	return last != 0 && now.Sub(time.Unix(0, last)) <= max(3*l.o.ReadBlock, l.o.ClaimMinIdle)
}

func (l *Loop[C, R]) markOK() { l.lastOK.Store(l.clock.now().UnixNano()) }

// Run consumes commands until ctx is cancelled, then shuts down: it stops
// reading, leaves waiting commands pending, lets handlings finish for up to
// DrainTimeout (cancelling the rest, which stay pending) and returns nil.
// It returns an error wrapping ErrBrokerUnavailable after
// MaxConsecutiveFailures consecutive failed cycles, having cancelled the
// handlings in progress.
func (l *Loop[C, R]) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer l.running.Store(false)

	r := newRun(l, context.WithoutCancel(ctx))
	l.cur.Store(r)
	defer l.cur.Store(nil)
	return r.run(ctx)
}

// counts reads the held and parked commands of the current run, for the
// gauges.
func (l *Loop[C, R]) counts() (held, parked int) {
	if r := l.cur.Load(); r != nil {
		return r.counts()
	}
	return 0, 0
}

// backoff is BackoffBase × 2^(failures-1), capped at BackoffMax.
func (l *Loop[C, R]) backoff(failures int) time.Duration {
	d := l.o.BackoffBase
	for i := 1; i < failures && d < l.o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, l.o.BackoffMax)
}

// reclaimEvery is the XAUTOCLAIM cadence while reads keep returning work.
func (l *Loop[C, R]) reclaimEvery() time.Duration {
	return min(max(l.o.ClaimMinIdle/2, 10*time.Millisecond), 5*time.Second)
}

// refreshEvery is the ownership-refresh cadence for held commands.
func (l *Loop[C, R]) refreshEvery() time.Duration {
	return max(l.o.ClaimMinIdle/3, 10*time.Millisecond)
}

// createGroup creates the consumer group (and the stream) and logs it the
// first time.
func (l *Loop[C, R]) createGroup(ctx context.Context) error {
	if err := l.b.createGroup(ctx); err != nil {
		l.o.Metrics.brokerFailure("group")
		return err
	}
	if !l.groupReady.Swap(true) {
		l.o.Logger.InfoContext(ctx, "consumer group ready", "stream", l.o.Stream, "group", l.o.Group, "start_id", l.o.StartID)
	}
	return nil
}

// groupLost handles a group that is gone (Redis restarted without its
// data): it is recreated at once; the error stands if that fails.
func (l *Loop[C, R]) groupLost(ctx context.Context, err error) error {
	if !errors.Is(err, errNoGroup) {
		return err
	}
	l.groupReady.Store(false)
	l.o.Logger.WarnContext(ctx, "consumer group is gone; recreating it", "stream", l.o.Stream, "group", l.o.Group)
	return l.createGroup(ctx)
}

// loop runs cycles until ctx ends (nil) or the broker has failed too many
// cycles in a row (ErrBrokerUnavailable).
func (r *run[C, R]) loop(ctx context.Context) error {
	l := r.l
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		err := r.cycle(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if n := r.fateFailures.Swap(0); err == nil && n > 0 {
			err = fmt.Errorf("consume: %d fate writes failed", n)
		}
		if err == nil {
			if failures > 0 {
				l.o.Logger.InfoContext(ctx, "consume cycle recovered", "stream", l.o.Stream, "after_failures", failures)
			}
			failures = 0
			continue
		}
		failures++
		l.o.Metrics.cycleFailed()
		if failures >= l.o.MaxConsecutiveFailures {
			l.o.Logger.ErrorContext(ctx, "consume cycles keep failing; giving up", "stream", l.o.Stream,
				"consecutive_failures", failures, "error", err)
			return fmt.Errorf("%w: %d consecutive failed cycles: %w", ErrBrokerUnavailable, failures, err)
		}
		backoff := l.backoff(failures)
		if failures == 1 || failures%15 == 0 {
			l.o.Logger.ErrorContext(ctx, "consume cycle failed; backing off", "stream", l.o.Stream,
				"consecutive_failures", failures, "backoff_ms", backoff.Milliseconds(), "error", err)
		}
		if l.clock.sleep(ctx, backoff) != nil {
			return nil
		}
	}
}

// cycle is one turn of the loop: make sure the group exists, reclaim idle
// pending entries when due, then read new entries while there is room.
func (r *run[C, R]) cycle(ctx context.Context) error {
	l := r.l
	if !l.groupReady.Load() {
		if err := l.createGroup(ctx); err != nil {
			return err
		}
	}
	now := l.clock.now()
	if !now.Before(r.nextReclaim) {
		if err := r.reclaim(ctx); err != nil {
			return err
		}
		r.nextReclaim = now.Add(l.reclaimEvery())
	}
	free := r.room()
	if free <= 0 {
		// Full of commands that can start soon: wait for one to be
		// released, without reading.
		t := time.NewTimer(l.o.ReadBlock)
		defer t.Stop()
		select {
		case <-r.capacity:
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}
	block := min(l.o.ReadBlock, max(r.nextReclaim.Sub(l.clock.now()), time.Millisecond))
	entries, err := l.b.read(ctx, free, block)
	if err != nil {
		if err = l.groupLost(ctx, err); err == nil {
			return nil
		}
		l.o.Metrics.brokerFailure("read")
		return err
	}
	if len(entries) == 0 {
		// Idle: look for abandoned work at once.
		r.nextReclaim = time.Time{}
		return nil
	}
	return r.accept(ctx, entries)
}

// reclaim takes over entries idle for ClaimMinIdle (this worker's transient
// failures, or work abandoned by a dead worker), continuing the scan where
// the previous call stopped. Entries trimmed from the stream while pending
// are logged and acked away.
func (r *run[C, R]) reclaim(ctx context.Context) error {
	l := r.l
	for range 4 {
		free := r.room()
		if free <= 0 {
			return nil
		}
		next, entries, deleted, err := l.b.autoclaim(ctx, r.claimCursor, min(free, 1000))
		if err != nil {
			if err = l.groupLost(ctx, err); err == nil {
				return nil
			}
			l.o.Metrics.brokerFailure("claim")
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		r.claimCursor = next
		if len(deleted) > 0 {
			r.lose(deleted)
			if err := r.dropTrimmed(ctx, deleted); err != nil {
				return err
			}
		}
		if len(entries) > 0 {
			l.o.Metrics.reclaimed(len(entries))
			if err := r.accept(ctx, entries); err != nil {
				return err
			}
		}
		if next == "0-0" || len(entries) == 0 {
			return nil
		}
	}
	return nil
}

// dropTrimmed logs and acks away pending entries that are no longer in the
// stream: there is nothing left to handle, dead-letter or announce.
func (r *run[C, R]) dropTrimmed(ctx context.Context, ids []string) error {
	l := r.l
	for _, id := range ids {
		l.o.Logger.WarnContext(ctx, "pending entry was trimmed from the stream; acking it away", "message_id", id, "stream", l.o.Stream)
	}
	l.o.Metrics.count("trimmed", "", len(ids))
	if err := l.b.ack(ctx, ids...); err != nil {
		l.o.Metrics.brokerFailure("ack")
		return err
	}
	return nil
}

// refreshLoop keeps every held command owned by this consumer.
func (r *run[C, R]) refreshLoop(ctx context.Context) {
	t := time.NewTicker(r.l.refreshEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.refresh(ctx)
		}
	}
}

// refresh resets the idle time of every held command (XCLAIM … JUSTID does
// not count a delivery), so no other worker reclaims it. XCLAIM would also
// take an entry from another consumer, so ownership is checked first: an
// entry no longer pending for this consumer was taken (after an outage long
// enough for a reclaim) or acked elsewhere, and is dropped from memory. One
// XCLAIM does not return was trimmed from the stream.
func (r *run[C, R]) refresh(ctx context.Context) {
	l := r.l
	ids := r.heldIDs()
	if len(ids) == 0 {
		return
	}
	mine, gone, err := l.b.owned(ctx, ids)
	if err == nil {
		var claimed []string
		if claimed, err = l.b.touch(ctx, mine); err == nil {
			r.refreshed(ctx, mine, gone, claimed)
			return
		}
	}
	l.o.Metrics.brokerFailure("refresh")
	l.o.Logger.WarnContext(ctx, "could not refresh held commands", "stream", l.o.Stream, "error", err)
}

// refreshed drops what a refresh found no longer this consumer's.
func (r *run[C, R]) refreshed(ctx context.Context, mine, gone, claimed []string) {
	l := r.l
	if dropped := r.lose(gone); len(dropped) > 0 {
		l.o.Logger.InfoContext(ctx, "dropped held commands no longer pending for this consumer",
			"stream", l.o.Stream, "count", len(dropped), "message_ids", dropped)
	}
	got := make(map[string]bool, len(claimed))
	for _, id := range claimed {
		got[id] = true
	}
	// Not claimed: trimmed from the stream (XCLAIM then drops it from the
	// pending list), or acked here since the check. Only the first deserve
	// the warning.
	var trimmed []string
	for _, id := range mine {
		if got[id] {
			continue
		}
		if _, ok, err := l.b.entry(ctx, id); err == nil && !ok {
			trimmed = append(trimmed, id)
		}
	}
	if len(trimmed) > 0 {
		r.lose(trimmed)
		if err := r.dropTrimmed(ctx, trimmed); err != nil {
			l.o.Logger.WarnContext(ctx, "could not ack trimmed entries", "stream", l.o.Stream, "error", err)
		}
	}
}
