package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
)

// Defaults for WorkerOptions fields left zero: the reference's settings
// (SPEC section 9) and the project's own additions.
const (
	DefaultStream                 = "content.fetch"
	DefaultGroup                  = "replicator.fetch"
	DefaultStartID                = "$"
	DefaultFactsStream            = "content.blobs"
	DefaultDLQStream              = "content.fetch.dlq"
	DefaultReadBlock              = 5 * time.Second
	DefaultClaimMinIdle           = 60 * time.Second
	DefaultMaxDeliveryAttempts    = 5
	DefaultBackoffBase            = time.Second
	DefaultBackoffMax             = 30 * time.Second
	DefaultMaxConsecutiveFailures = 20
	DefaultDedupeTTL              = 24 * time.Hour
	DefaultDedupePrefix           = "replicator:cmd:fetch:"
	DefaultConcurrency            = 16
	DefaultMaxHeldPerHost         = 64
	DefaultMaxActivePerHost       = 4
	// DefaultHeldPerRequest sizes MaxHeld: commands held per request slot.
	DefaultHeldPerRequest = 16
	// DrainMargin is added to the Fetcher's MaxFetchTime for the default
	// DrainTimeout, so a fetch that ends at its bound can still record its
	// fate.
	DrainMargin = 10 * time.Second
)

// ErrBrokerUnavailable is returned by Worker.Run after
// MaxConsecutiveFailures consecutive failed cycles (reads, claims, acks or
// writes failing), so the process exits non-zero and a supervisor restarts
// it. The error wraps the last failure as detail.
var ErrBrokerUnavailable = errors.New("fetch: broker unavailable")

// errRunning is returned by a second concurrent call to Run.
var errRunning = errors.New("fetch: worker is already running")

// DefaultConsumer returns the default consumer name, "replicator@<hostname>".
func DefaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return "replicator@" + host
}

// WorkerOptions configures a Worker. The zero value is usable: every zero
// (or negative) field means the documented default.
//
// # Wiring the Fetcher
//
// The Worker runs the Handler it is given; the Handler's Fetcher enforces
// two bounds the Worker relies on, so build it like this:
//
//   - Options.Slots = NewSlots(n), with n the number of requests in flight
//     (REPLICATOR_CONCURRENCY). A command waiting for its host's window
//     holds no slot. Concurrency below defaults to that n.
//   - Options.MaxWait = ReadBlock: a pacing wait up to ReadBlock is slept
//     through, a longer one parks the command (SPEC section 7), and the
//     Worker keeps the parked command in memory until its host is due.
//   - Options.Stop = ctx.Done() of the context passed to Run, so pacing
//     waits are cut short at shutdown and those commands stay pending
//     (never fetched unpaced on the way out). Left unwired, such a command
//     finishes its wait and is fetched within DrainTimeout.
type WorkerOptions struct {
	// Stream is the command stream. Default DefaultStream.
	Stream string
	// Group is the consumer group. Default DefaultGroup.
	Group string
	// Consumer names this worker in the group; it must be unique per
	// running worker. Default DefaultConsumer().
	Consumer string
	// StartID is where a newly created group starts reading. Default "$"
	// (only entries added after the group exists); "0" drains a backlog.
	StartID string
	// FactsStream receives blob_available and fetch_failed. Default
	// DefaultFactsStream.
	FactsStream string
	// DLQStream receives dead letters. Default DefaultDLQStream.
	DLQStream string
	// ReadBlock is how long one XREADGROUP blocks. Default 5 s. Give the
	// Fetcher the same value as its MaxWait.
	ReadBlock time.Duration
	// ClaimMinIdle is how long an entry must be idle before XAUTOCLAIM takes
	// it (the retry path for transient failures). Held commands are kept
	// fresh at a third of it. Default 60 s.
	ClaimMinIdle time.Duration
	// MaxDeliveryAttempts is the delivery count (XPENDING times-delivered)
	// at which an unclassified failure is dead-lettered with handler_error.
	// A delivery that ends transient, or that is left pending unhandled, is
	// given back and does not count. Default 5.
	MaxDeliveryAttempts int
	// BackoffBase and BackoffMax bound the back-off between failed cycles:
	// BackoffBase doubling up to BackoffMax. Defaults 1 s and 30 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxConsecutiveFailures is how many consecutive failed cycles make Run
	// return ErrBrokerUnavailable. Default 20.
	MaxConsecutiveFailures int
	// DedupeTTL is how long a handled command_id is remembered. Rounded up
	// to whole seconds. Default 24 h.
	DedupeTTL time.Duration
	// DedupePrefix prefixes the dedupe key of each command_id. Default
	// DefaultDedupePrefix.
	DedupePrefix string
	// Concurrency is the number of requests in flight: the n given to
	// NewSlots for the Fetcher. Zero means that Slots' capacity, or
	// DefaultConcurrency if the Fetcher has none made by NewSlots. The
	// Worker uses it to size MaxHeld; the bound itself is the Slots'.
	Concurrency int
	// MaxHeld bounds the commands held in memory (waiting, parked or being
	// handled). When full, the Worker reads only while some held commands
	// wait for their host's politeness window: each new command of another
	// host takes the place of the newest of them, which is left pending and
	// returns through XAUTOCLAIM, so a few backlogged hosts cannot hold up
	// the rest. Otherwise a full Worker stops reading. Default
	// DefaultHeldPerRequest × Concurrency.
	MaxHeld int
	// MaxHeldPerHost bounds the commands held for one host; beyond it a
	// command is left pending and returns through XAUTOCLAIM after
	// ClaimMinIdle. For a backlogged host to be fetched at its full rate,
	// MaxHeldPerHost × its interval should exceed ClaimMinIdle (the
	// defaults: 64 × 1 s against 60 s). Default 64.
	MaxHeldPerHost int
	// MaxActivePerHost bounds the commands for one host inside the Handler
	// at once (requests are spaced by the pacer anyway). While a host has
	// parked commands only one runs at a time, so its backlog does not wake
	// together. Default 4.
	MaxActivePerHost int
	// DrainTimeout is how long in-flight fetches may run at shutdown before
	// their context is cancelled (they then stay pending). Default the
	// Fetcher's MaxFetchTime plus DrainMargin.
	DrainTimeout time.Duration
	// Logger receives one line per handled command and the loop's events.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the replicator_* metrics. Nil means no metrics.
	Registerer prometheus.Registerer

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// Worker is the consume loop of the command stream: it reads commands with
// a consumer group, reclaims idle pending ones, handles many at once, and
// gives each exactly one fate (SPEC section 3): a fact then the dedupe key
// then an ack; a fact then a dead letter; or pending for a retry.
//
// Each held command runs in its own goroutine; requests are bounded by the
// Fetcher's Slots, commands in memory by MaxHeld (and MaxHeldPerHost). A
// command parked for politeness waits in a per-host FIFO whose head alone
// is armed for when the host is due. Every held command's idle time is
// refreshed (XCLAIM … JUSTID) so no other worker reclaims it.
//
// Every Redis command touches one key, so the Worker runs against Redis
// Cluster as well as a single server.
//
// Create it with NewWorker; the zero value is not usable. Run may be called
// again after it returns, never twice at once; Healthy is safe for
// concurrent use.
type Worker struct {
	client  rueidis.Client
	handler *Handler
	o       WorkerOptions
	log     *slog.Logger
	m       *workerMetrics
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error

	running    atomic.Bool
	groupReady atomic.Bool
	lastOK     atomic.Int64 // unix nanoseconds of the latest Redis success

	// fateFailures counts failed fate writes since the last cycle; a cycle
	// with any counts as failed.
	fateFailures atomic.Int64

	// Per-run state, set by Run before any goroutine reads it.
	handleCtx     context.Context
	cancelHandles context.CancelFunc
	writeCtx      context.Context
	wg            sync.WaitGroup // handler goroutines
	claimCursor   string
	nextReclaim   time.Time

	// commit batches the fate writes of completed commands.
	commit committer

	// capacity is signalled whenever a held command is released.
	capacity chan struct{}

	mu        sync.Mutex
	held      map[string]*item
	byCommand map[string]*item
	hosts     map[string]*hostQueue
	seq       uint64
	stopping  bool
}

// NewWorker returns a Worker that reads commands through client and hands
// them to handler. See WorkerOptions for how to build the handler's Fetcher.
func NewWorker(client rueidis.Client, handler *Handler, opts WorkerOptions) *Worker {
	w := &Worker{
		client:    client,
		handler:   handler,
		o:         opts,
		log:       opts.Logger,
		now:       opts.now,
		sleep:     opts.sleep,
		capacity:  make(chan struct{}, 1),
		held:      make(map[string]*item),
		byCommand: make(map[string]*item),
		hosts:     make(map[string]*hostQueue),
	}
	o := &w.o
	o.Stream = orString(o.Stream, DefaultStream)
	o.Group = orString(o.Group, DefaultGroup)
	o.Consumer = orString(o.Consumer, DefaultConsumer())
	o.StartID = orString(o.StartID, DefaultStartID)
	o.FactsStream = orString(o.FactsStream, DefaultFactsStream)
	o.DLQStream = orString(o.DLQStream, DefaultDLQStream)
	o.DedupePrefix = orString(o.DedupePrefix, DefaultDedupePrefix)
	o.ReadBlock = orDuration(o.ReadBlock, DefaultReadBlock)
	o.ClaimMinIdle = orDuration(o.ClaimMinIdle, DefaultClaimMinIdle)
	o.BackoffBase = orDuration(o.BackoffBase, DefaultBackoffBase)
	o.BackoffMax = max(orDuration(o.BackoffMax, DefaultBackoffMax), o.BackoffBase)
	o.DedupeTTL = orDuration(o.DedupeTTL, DefaultDedupeTTL)
	o.MaxDeliveryAttempts = orInt(o.MaxDeliveryAttempts, DefaultMaxDeliveryAttempts)
	o.MaxConsecutiveFailures = orInt(o.MaxConsecutiveFailures, DefaultMaxConsecutiveFailures)
	o.MaxHeldPerHost = orInt(o.MaxHeldPerHost, DefaultMaxHeldPerHost)
	o.MaxActivePerHost = orInt(o.MaxActivePerHost, DefaultMaxActivePerHost)
	var slots Slots
	maxFetch := DefaultMaxFetchTime
	if handler != nil && handler.fetcher != nil {
		slots = handler.fetcher.slots
		maxFetch = handler.fetcher.maxFetch
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
		if s, ok := slots.(semaphore); ok {
			o.Concurrency = cap(s)
		}
	}
	o.MaxHeld = orInt(o.MaxHeld, DefaultHeldPerRequest*o.Concurrency)
	o.DrainTimeout = orDuration(o.DrainTimeout, maxFetch+DrainMargin)
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.sleep == nil {
		w.sleep = func(ctx context.Context, d time.Duration) error { return sleepFor(ctx, nil, d) }
	}
	if _, ok := slots.(noSlots); ok {
		w.log.Warn("the handler's Fetcher has no Slots: requests are bounded only by MaxHeld",
			"max_held", o.MaxHeld)
	}
	w.m = newWorkerMetrics(w, slots)
	w.m.register(o.Registerer, w.log)
	return w
}

// Options returns the options in force, defaults filled in.
func (w *Worker) Options() WorkerOptions {
	o := w.o
	o.now, o.sleep = nil, nil
	return o
}

// Healthy reports whether the consumer group exists and Redis answered
// recently. It is HealthyAt at the current time.
func (w *Worker) Healthy() bool { return w.HealthyAt(w.now()) }

// HealthyAt reports whether, at now, the consumer group exists and a Redis
// command succeeded within the last max(3 × ReadBlock, ClaimMinIdle): the
// loop talks to Redis at least once per ReadBlock while reading and the
// ownership refresh at least once per ClaimMinIdle/3 while full.
func (w *Worker) HealthyAt(now time.Time) bool {
	if !w.groupReady.Load() {
		return false
	}
	last := w.lastOK.Load()
	return last != 0 && now.Sub(time.Unix(0, last)) <= max(3*w.o.ReadBlock, w.o.ClaimMinIdle)
}

// Run consumes commands until ctx is cancelled, then shuts down: it stops
// reading, leaves parked and waiting commands pending, lets in-flight
// fetches finish for up to DrainTimeout (cancelling the rest, which stay
// pending) and returns nil. It returns an error wrapping
// ErrBrokerUnavailable after MaxConsecutiveFailures consecutive failed
// cycles, having cancelled in-flight fetches.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer w.running.Store(false)

	base := context.WithoutCancel(ctx)
	w.handleCtx, w.cancelHandles = context.WithCancel(base)
	defer w.cancelHandles()
	w.writeCtx = base
	w.claimCursor = "0-0"
	w.nextReclaim = time.Time{}
	w.fateFailures.Store(0)
	w.mu.Lock()
	w.stopping = false
	clear(w.held)
	clear(w.byCommand)
	clear(w.hosts)
	w.mu.Unlock()

	refreshCtx, stopRefresh := context.WithCancel(base)
	var bg sync.WaitGroup
	bg.Go(func() { w.refreshLoop(refreshCtx) })

	w.log.InfoContext(ctx, "worker starting", "stream", w.o.Stream, "group", w.o.Group, "consumer", w.o.Consumer,
		"concurrency", w.o.Concurrency, "max_held", w.o.MaxHeld, "max_held_per_host", w.o.MaxHeldPerHost)
	err := w.loop(ctx)

	dropped := w.beginStop()
	if err != nil {
		w.cancelHandles()
	}
	w.drain()
	stopRefresh()
	bg.Wait()
	w.log.InfoContext(base, "worker stopped", "consumer", w.o.Consumer, "left_pending", dropped)
	return err
}

// loop runs cycles until ctx ends (nil) or the broker has failed too many
// cycles in a row (ErrBrokerUnavailable).
func (w *Worker) loop(ctx context.Context) error {
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		err := w.cycle(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if n := w.fateFailures.Swap(0); err == nil && n > 0 {
			err = fmt.Errorf("fetch: %d fate writes failed", n)
		}
		if err == nil {
			if failures > 0 {
				w.log.InfoContext(ctx, "worker cycle recovered", "after_failures", failures)
			}
			failures = 0
			continue
		}
		failures++
		w.m.cycleFailures.Inc()
		if failures >= w.o.MaxConsecutiveFailures {
			w.log.ErrorContext(ctx, "worker cycles keep failing; giving up", "consecutive_failures", failures, "error", err)
			return fmt.Errorf("%w: %d consecutive failed cycles: %w", ErrBrokerUnavailable, failures, err)
		}
		backoff := w.backoff(failures)
		if failures == 1 || failures%15 == 0 {
			w.log.ErrorContext(ctx, "worker cycle failed; backing off", "consecutive_failures", failures,
				"backoff_ms", backoff.Milliseconds(), "error", err)
		}
		if w.sleep(ctx, backoff) != nil {
			return nil
		}
	}
}

// backoff is BackoffBase × 2^(failures-1), capped at BackoffMax.
func (w *Worker) backoff(failures int) time.Duration {
	d := w.o.BackoffBase
	for i := 1; i < failures && d < w.o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, w.o.BackoffMax)
}

// cycle is one turn of the loop: make sure the group exists, reclaim idle
// pending entries when due, then read new entries while there is room.
func (w *Worker) cycle(ctx context.Context) error {
	if !w.groupReady.Load() {
		if err := w.createGroup(ctx); err != nil {
			return err
		}
	}
	now := w.now()
	if !now.Before(w.nextReclaim) {
		if err := w.reclaim(ctx); err != nil {
			return err
		}
		w.nextReclaim = now.Add(w.reclaimEvery())
	}
	free := w.room()
	if free <= 0 {
		// Full of commands that can start soon: wait for one to be
		// released, without reading.
		t := time.NewTimer(w.o.ReadBlock)
		defer t.Stop()
		select {
		case <-w.capacity:
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}
	block := min(w.o.ReadBlock, max(w.nextReclaim.Sub(w.now()), time.Millisecond))
	entries, err := w.read(ctx, free, block)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		// Idle: look for abandoned work at once.
		w.nextReclaim = time.Time{}
		return nil
	}
	return w.accept(ctx, entries)
}

// reclaimEvery is the XAUTOCLAIM cadence while reads keep returning work.
func (w *Worker) reclaimEvery() time.Duration {
	return min(max(w.o.ClaimMinIdle/2, 10*time.Millisecond), 5*time.Second)
}

// refreshEvery is the ownership-refresh cadence for held commands.
func (w *Worker) refreshEvery() time.Duration {
	return max(w.o.ClaimMinIdle/3, 10*time.Millisecond)
}

// room is how many entries a read or a reclaim may bring in: the free
// places, or, when the worker is full, as many as held commands waiting
// for their host could give up (makeRoomLocked).
func (w *Worker) room() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if free := w.o.MaxHeld - len(w.held); free > 0 {
		return free
	}
	return w.evictableLocked()
}

func (w *Worker) markOK() { w.lastOK.Store(w.now().UnixNano()) }

// brokerFailure records a failed Redis operation.
func (w *Worker) brokerFailure(op string) { w.m.brokerFailures.WithLabelValues(op).Inc() }

// fateFailure records a failed fate write; the current cycle then counts as
// failed, so a broker refusing writes ends the loop like one refusing reads.
func (w *Worker) fateFailure(op string) {
	w.brokerFailure(op)
	w.fateFailures.Add(1)
}

// beginStop stops scheduling: waiting and parked commands are dropped from
// memory (they stay pending) and no handler starts again. It returns how
// many were dropped.
func (w *Worker) beginStop() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopping = true
	dropped := 0
	for key, q := range w.hosts {
		q.stopTimer()
		for _, it := range q.waiting {
			w.forgetLocked(it)
			dropped++
		}
		q.waiting, q.parked = nil, 0
		if q.active == 0 {
			delete(w.hosts, key)
		}
	}
	return dropped
}

// drain waits for handler goroutines, cancelling their context after
// DrainTimeout.
func (w *Worker) drain() {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	t := time.NewTimer(w.o.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	w.log.Warn("in-flight fetches outlived the drain timeout; cancelling them (they stay pending)",
		"drain_timeout_ms", w.o.DrainTimeout.Milliseconds())
	w.cancelHandles()
	<-done
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDuration(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

func orInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
