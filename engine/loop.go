package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine/capability"
)

// ErrBrokerUnavailable is returned by Loop.Run once Redis has kept failing
// the loop's cycles (reads, claims, acks or writes failing) for
// Config.OutageLimit, so the process exits non-zero and a supervisor
// restarts it. The error names the loop's stream and the operation whose
// failure began the outage, and wraps that failure.
var ErrBrokerUnavailable = errors.New("engine: broker unavailable")

// errRunning is returned by a second concurrent call to Run.
var errRunning = errors.New("engine: loop is already running")

// Loop is one consumer group's loop: it reads commands, reclaims idle
// pending ones, hands them to its Handler as its scheduler allows, and
// gives each exactly one fate. See the package documentation.
//
// Create it with New; the zero value is not usable. Run may be called again
// after it returns, never twice at once; Healthy is safe for concurrent use.
type Loop struct {
	o       options
	b       broker
	handler capability.Handler
	sched   *scheduler
	clock   clock

	running    atomic.Bool
	groupReady atomic.Bool
	lastOK     atomic.Int64 // unix nanoseconds of the latest Redis answer
	cur        atomic.Pointer[run]

	// trustOwnFor is how long after a delivery or renewal a command's
	// ownership is taken as certain at its fate (see run.own).
	trustOwnFor time.Duration

	// Only the goroutine in Run touches these. everReady is set once the
	// group has existed; position is the newest entry id this loop has
	// read ("" before the first).
	everReady bool
	position  string
}

// New returns the loop of capability c on client, configured by cfg. Its
// metrics are registered with cfg.Registerer, named with c.MetricsPrefix.
func New(client rueidis.Client, cfg Config, c capability.Capability) *Loop {
	o := newOptions(cfg, c)
	o.Metrics = newMetrics(o.MetricsPrefix, o.Name)
	l := &Loop{o: o, handler: o.Handler, clock: wallClock,
		sched: newScheduler(o.MaxHeldPerKey, o.MaxActivePerKey, o.Concurrency, NotedPerHeld*o.MaxHeld)}
	// Half the claim time, less the bound on the fate's writes: the writes
	// end before the entry could have been idle for ClaimMinIdle.
	l.trustOwnFor = max(0, l.o.ClaimMinIdle/2-fateTimeout)
	l.b = &redisBroker{client: client, o: &l.o, now: func() time.Time { return l.clock.now() }, ok: l.markOK}
	m := l.o.Metrics
	m.counts, m.unwritten = l.counts, l.unwritten
	m.Register(o.Registerer, o.Logger)
	return l
}

// Capability returns the capability the loop runs, defaults filled in.
func (l *Loop) Capability() capability.Capability { return l.o.Capability }

// Config returns the configuration in force, defaults filled in.
func (l *Loop) Config() Config { return l.o.Config }

// Healthy reports whether the consumer group exists and Redis answered
// recently. It is HealthyAt at the current time.
func (l *Loop) Healthy() bool { return l.HealthyAt(l.clock.now()) }

// HealthyAt reports whether, at now, the consumer group exists and a Redis
// command succeeded within the last max(3 × ReadBlock, ClaimMinIdle): the
// loop talks to Redis at least once per ReadBlock while reading, and the
// ownership refresh at least once per ClaimMinIdle/3 while full.
func (l *Loop) HealthyAt(now time.Time) bool {
	if !l.groupReady.Load() {
		return false
	}
	last := l.lastOK.Load()
	return last != 0 && now.Sub(time.Unix(0, last)) <= max(3*l.o.ReadBlock, l.o.ClaimMinIdle)
}

func (l *Loop) markOK() { l.lastOK.Store(l.clock.now().UnixNano()) }

// Run consumes commands until ctx is cancelled, then shuts down: it stops
// reading, leaves waiting commands pending, lets handlings finish for up to
// DrainTimeout (cancelling the rest, which stay pending) and returns nil.
// It returns an error wrapping ErrBrokerUnavailable once Redis has kept
// failing its cycles for OutageLimit, having cancelled the handlings and
// fate writes in progress.
func (l *Loop) Run(ctx context.Context) error {
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
func (l *Loop) counts() (held, parked int) {
	if r := l.cur.Load(); r != nil {
		return r.counts()
	}
	return 0, 0
}

// unwritten counts the current run's handled commands whose fate waits to
// be written again.
func (l *Loop) unwritten() int {
	if r := l.cur.Load(); r != nil {
		return int(r.unwritten.Load())
	}
	return 0
}

// backoff is the back-off after the given number of failed cycles in a
// row.
func (l *Loop) backoff(failures int) time.Duration { return l.o.Backoff(failures) }

// reclaimEvery is the XAUTOCLAIM cadence while reads keep returning work.
func (l *Loop) reclaimEvery() time.Duration {
	return min(max(l.o.ClaimMinIdle/2, 10*time.Millisecond), 5*time.Second)
}

// refreshEvery is the ownership-refresh cadence for held commands.
func (l *Loop) refreshEvery() time.Duration {
	return max(l.o.ClaimMinIdle/3, 10*time.Millisecond)
}

// CreateGroup creates the loop's consumer group (and its stream) now, as
// Run would first, and returns the broker's error if it refuses: a caller
// can find a capability the broker does not grant (a Redis ACL without its
// stream) and leave it off rather than let Run back off until the outage
// limit. Run creates the group anyway; calling this first is optional.
func (l *Loop) CreateGroup(ctx context.Context) error {
	if l.running.Load() {
		return errRunning
	}
	return l.ensureGroup(ctx)
}

// ensureGroup creates the consumer group (and the stream) if it is not
// known to exist: at Config.StartID the first time, and where this loop
// left off when the group has vanished since (docs/streams.md, Group).
func (l *Loop) ensureGroup(ctx context.Context) error {
	if l.groupReady.Load() {
		return nil
	}
	at := l.o.StartID
	if l.everReady {
		at = l.resumeAt()
	}
	if err := l.b.createGroup(ctx, at); err != nil {
		return l.brokerFailure("group", err)
	}
	l.groupReady.Store(true)
	l.everReady = true
	l.o.Logger.InfoContext(ctx, "consumer group ready", "stream", l.o.Stream, "group", l.o.Group, "start_id", at)
	return nil
}

// resumeAt is where a vanished group is recreated: after the newest entry
// this loop has read, or at the start of the stream when it has read none.
// entry ids grow with time, so on a stream emptied by a restart every new
// command lies after it, while on one that kept its history nothing this
// loop has not seen is skipped.
func (l *Loop) resumeAt() string { return cmp.Or(l.position, "0") }

// groupLost handles a group that is gone (Redis restarted without its
// data, or the group or its stream was deleted): it is recreated at once
// where this loop left off; the error stands if that fails.
func (l *Loop) groupLost(ctx context.Context) error {
	l.groupReady.Store(false)
	l.o.Logger.WarnContext(ctx, "consumer group is gone; recreating it where this worker left off", "stream", l.o.Stream,
		"group", l.o.Group, "start_id", l.resumeAt())
	return l.ensureGroup(ctx)
}

// read notes the newest of entries as read.
func (l *Loop) read(entries []entry) {
	for _, e := range entries {
		if idAfter(e.ID, l.position) {
			l.position = e.ID
		}
	}
}

// idAfter reports whether stream entry id a ("ms-seq") comes after b; any
// id comes after "".
func idAfter(a, b string) bool {
	if b == "" {
		return a != ""
	}
	am, as := splitID(a)
	bm, bs := splitID(b)
	return am > bm || am == bm && as > bs
}

func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}

// brokerFailure counts a failed Redis operation and returns err marked
// with it, for the loop to tell which operation began an outage.
func (l *Loop) brokerFailure(op string, err error) error {
	l.o.Metrics.brokerFailure(op)
	return &opError{failure{op: op, err: err}}
}

// failure is one failed Redis operation.
type failure struct {
	// op names it as the broker-failure metric does: read, claim,
	// publish, …
	op string
	// since is when Redis was due to answer it: when the call was made, or
	// for a blocking read when its block ended. Zero when only the cycle
	// it failed in is known.
	since time.Time
	err   error
}

// opError is a failure returned by a cycle.
type opError struct{ failure }

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// errNoContact is returned by a cycle that did not talk to Redis (the loop
// was full and waited for room): it neither fails nor ends an outage.
var errNoContact = errors.New("engine: cycle did not reach Redis")

// loop runs cycles until ctx ends (nil) or Redis has kept failing them for
// the outage limit (ErrBrokerUnavailable). An outage begins with a failed
// cycle, at the earliest time Redis was due to answer an operation that
// failed (so a busy loop's write that failed names it, not an idle loop's
// read that was still blocking); a successful cycle ends it. While it
// lasts, each cycle may run only until the limit, so an attempt that hangs
// (a silent network) does not stretch it.
func (r *run) loop(ctx context.Context) error {
	l := r.l
	limit := l.o.OutageLimit()
	var (
		failures int
		first    failure // the failure that began the outage
		last     error
		giveUpAt time.Time
	)
	for {
		if ctx.Err() != nil {
			return nil
		}
		if failures > 0 && !l.clock.now().Before(giveUpAt) {
			return r.giveUp(ctx, first, failures, limit, last)
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if failures > 0 {
			cctx, cancel = context.WithTimeout(ctx, giveUpAt.Sub(l.clock.now()))
		}
		start := l.clock.now()
		err := r.cycle(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		f, failed := r.cycleFailure(start, err)
		switch {
		case failed:
			// A failure seen later may have been due earlier (a write that
			// waited out its timeout): the outage began with it.
			if failures == 0 || f.since.Before(first.since) {
				first, giveUpAt = f, f.since.Add(limit)
			}
			failures++
			last = f.err
			l.o.Metrics.cycleFailed()
		case errors.Is(err, errNoContact):
			// Neither a failure nor a sign that Redis is back.
			continue
		default:
			if failures > 0 {
				l.o.Logger.InfoContext(ctx, "consume cycle recovered", "stream", l.o.Stream, "after_failures", failures,
					"outage_seconds", l.clock.now().Sub(first.since).Seconds())
			}
			failures = 0
			continue
		}
		left := giveUpAt.Sub(l.clock.now())
		if left <= 0 {
			continue
		}
		backoff := min(l.backoff(failures), left)
		if failures == 1 || failures%15 == 0 {
			l.o.Logger.ErrorContext(ctx, "consume cycle failed; backing off", "stream", l.o.Stream, "op", f.op,
				"consecutive_failures", failures, "backoff_ms", backoff.Milliseconds(),
				"gives_up_in_ms", left.Milliseconds(), "error", f.err)
		}
		if l.clock.sleep(ctx, backoff) != nil {
			return nil
		}
	}
}

// cycleFailure tells whether a cycle that started at start failed, and
// with which failure: the earliest of its own (err) and those of the fate
// writes since the previous cycle.
func (r *run) cycleFailure(start time.Time, err error) (failure, bool) {
	f, failed := failure{}, false
	if err != nil && !errors.Is(err, errNoContact) {
		f, failed = failure{op: "cycle", err: err}, true
		var oe *opError
		if errors.As(err, &oe) {
			f.op, f.since = oe.op, oe.since
		}
		if f.since.IsZero() || f.since.Before(start) {
			f.since = start
		}
	}
	if n, ff := r.fates.take(); n > 0 {
		ff.err = fmt.Errorf("fate writes failed (%d); the first: %w", n, ff.err)
		if !failed || ff.since.Before(f.since) {
			f, failed = ff, true
		}
	}
	return f, failed
}

// giveUp logs the end of the loop and returns its error.
func (r *run) giveUp(ctx context.Context, first failure, failures int, limit time.Duration, last error) error {
	l := r.l
	lasted := l.clock.now().Sub(first.since)
	l.o.Logger.ErrorContext(ctx, "Redis has kept failing for the outage limit; giving up", "stream", l.o.Stream,
		"op", first.op, "failing_since", first.since.UTC(), "outage_seconds", lasted.Seconds(),
		"outage_limit_seconds", limit.Seconds(), "consecutive_failures", failures,
		"first_error", first.err.Error(), "error", errString(last))
	return fmt.Errorf("%w: %s: Redis failing for %s, since op %q at %s (outage limit %s): %w", ErrBrokerUnavailable,
		l.o.Stream, lasted.Round(time.Millisecond), first.op, first.since.UTC().Format(time.RFC3339Nano), limit, first.err)
}

// cycle is one turn of the loop: make sure the group exists, reclaim idle
// pending entries when due, then read new entries while there is room.
func (r *run) cycle(ctx context.Context) error {
	l := r.l
	if r.unwritten.Load() > 0 {
		// A handled command's fate could not be written: take no new
		// command until it is (its handler writes it again). The failed
		// writes make these cycles failed ones.
		r.waitForRoom(ctx)
		return errNoContact
	}
	if err := l.ensureGroup(ctx); err != nil {
		return err
	}
	now := l.clock.now()
	if !now.Before(r.nextReclaim) {
		if err := r.reclaim(ctx); err != nil {
			return stamp(err, now)
		}
		r.nextReclaim = now.Add(l.reclaimEvery())
	}
	free := r.room()
	if free <= 0 {
		// Full of commands that can start soon: wait for one to be
		// released, without reading.
		r.waitForRoom(ctx)
		return errNoContact
	}
	block := min(l.o.ReadBlock, max(r.nextReclaim.Sub(l.clock.now()), time.Millisecond))
	// Redis answers a blocking read once its block ends; one still
	// unanswered a ReadBlock later has failed (a silent network would
	// otherwise hold it forever).
	started := l.clock.now()
	rctx, cancel := context.WithTimeout(ctx, block+l.o.ReadBlock)
	entries, err := l.b.read(rctx, free, block)
	cancel()
	if err != nil {
		if errors.Is(err, errNoGroup) {
			return l.groupLost(ctx)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s: %w", block+l.o.ReadBlock, err)
		}
		// Due when its block ended, or when it failed if that was sooner.
		since := started.Add(block)
		if now := l.clock.now(); now.Before(since) {
			since = now
		}
		l.o.Metrics.brokerFailure("read")
		return &opError{failure{op: "read", since: since, err: err}}
	}
	if len(entries) == 0 {
		// Idle: look for abandoned work at once.
		r.nextReclaim = time.Time{}
		return nil
	}
	l.read(entries)
	at := l.clock.now()
	return stamp(r.accept(ctx, entries, started), at)
}

// waitForRoom waits until a held command is released, or ReadBlock.
func (r *run) waitForRoom(ctx context.Context) {
	t := time.NewTimer(r.l.o.ReadBlock)
	defer t.Stop()
	select {
	case <-r.capacity:
	case <-t.C:
	case <-ctx.Done():
	}
}

// stamp dates a failure returned without its own time: it was due no
// earlier than at, when the step it failed in began.
func stamp(err error, at time.Time) error {
	var oe *opError
	if errors.As(err, &oe) && oe.since.IsZero() {
		oe.since = at
	}
	return err
}

// reclaim takes over entries idle for ClaimMinIdle (this worker's transient
// failures, or work abandoned by a dead worker), continuing the scan where
// the previous call stopped. Entries trimmed from the stream while pending
// are logged and acked away.
func (r *run) reclaim(ctx context.Context) error {
	l := r.l
	for range 4 {
		free := r.room()
		if free <= 0 {
			return nil
		}
		claimed := l.clock.now()
		next, entries, deleted, err := l.b.autoclaim(ctx, r.claimCursor, min(free, 1000))
		if err != nil {
			if errors.Is(err, errNoGroup) {
				return l.groupLost(ctx)
			}
			return l.brokerFailure("claim", err)
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
			l.read(entries)
			l.o.Metrics.reclaimed(len(entries))
			if err := r.accept(ctx, entries, claimed); err != nil {
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
func (r *run) dropTrimmed(ctx context.Context, ids []string) error {
	l := r.l
	for _, id := range ids {
		l.o.Logger.WarnContext(ctx, "pending entry was trimmed from the stream; acking it away", "message_id", id, "stream", l.o.Stream)
	}
	l.o.Metrics.count("trimmed", "", len(ids))
	if err := l.b.ack(ctx, ids...); err != nil {
		return l.brokerFailure("ack", err)
	}
	return nil
}

// refreshLoop keeps every held command owned by this consumer.
func (r *run) refreshLoop(ctx context.Context) {
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

// refresh renews this consumer's claim on every held command by reading it
// again from this consumer's own pending list (redeliver), so no other
// worker reclaims it; the read cannot take an entry from another consumer.
// One no longer pending here was taken (after an outage long enough for a
// reclaim) or acked elsewhere, and is dropped from memory; one trimmed from
// the stream is dropped and reported.
func (r *run) refresh(ctx context.Context) {
	l := r.l
	ids := r.heldIDs()
	if len(ids) == 0 {
		return
	}
	start := l.clock.now()
	states, err := l.b.own(ctx, ids)
	if err != nil {
		l.o.Metrics.brokerFailure("refresh")
		l.o.Logger.WarnContext(ctx, "could not refresh held commands", "stream", l.o.Stream, "error", err)
		return
	}
	var gone, cut []string
	r.renewed(ids, states, start)
	for i, s := range states {
		switch s {
		case taken:
			gone = append(gone, ids[i])
		case trimmed:
			cut = append(cut, ids[i])
		}
	}
	if dropped := r.lose(gone); len(dropped) > 0 {
		l.o.Logger.InfoContext(ctx, "dropped held commands no longer pending for this consumer",
			"stream", l.o.Stream, "count", len(dropped), "message_ids", dropped)
	}
	if len(cut) > 0 {
		r.lose(cut)
		if err := r.dropTrimmed(ctx, cut); err != nil {
			l.o.Logger.WarnContext(ctx, "could not ack trimmed entries", "stream", l.o.Stream, "error", err)
		}
	}
}
