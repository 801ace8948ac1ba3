package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/consume"
)

// Defaults for Options fields left zero: those of the REPLICATOR_* settings
// (the README's Configuration).
const (
	DefaultStream                 = "content.fetch"
	DefaultGroup                  = "replicator.fetch"
	DefaultStartID                = consume.DefaultStartID
	DefaultFactsStream            = "content.blobs"
	DefaultDLQStream              = "content.fetch.dlq"
	DefaultReadBlock              = consume.DefaultReadBlock
	DefaultClaimMinIdle           = consume.DefaultClaimMinIdle
	DefaultMaxDeliveryAttempts    = consume.DefaultMaxDeliveryAttempts
	DefaultBackoffBase            = consume.DefaultBackoffBase
	DefaultBackoffMax             = consume.DefaultBackoffMax
	DefaultMaxConsecutiveFailures = consume.DefaultMaxConsecutiveFailures
	DefaultDedupeTTL              = consume.DefaultDedupeTTL
	DefaultDedupePrefix           = "replicator:cmd:fetch:"
	DefaultConcurrency            = 16
	DefaultMaxHeldPerHost         = 64
	DefaultMaxActivePerHost       = 4
	// DefaultHeldPerRequest sizes MaxHeld: commands held per request slot.
	DefaultHeldPerRequest = 16
	// NotedPerHeld sizes how many commands left pending for a full host
	// (or a full worker) the Worker keeps the entry ids of, to take them
	// back as soon as there is room: NotedPerHeld × MaxHeld. Beyond that
	// a command left pending returns through the reclaim.
	NotedPerHeld = 64
	// DrainMargin is added to the Fetcher's MaxFetchTime for the default
	// DrainTimeout, so a fetch that ends at its bound can still record its
	// fate.
	DrainMargin = 10 * time.Second
)

// ErrBrokerUnavailable is returned by Worker.Run once Redis has kept
// failing its cycles (reads, claims, acks or writes failing) for the outage
// limit (see Options.MaxConsecutiveFailures), so the process exits non-zero
// and a supervisor restarts it. The error names the stream and the
// operation whose failure began the outage, and wraps that failure.
var ErrBrokerUnavailable = consume.ErrBrokerUnavailable

// DefaultConsumer returns the default consumer name, "replicator@<hostname>".
func DefaultConsumer() string { return consume.DefaultConsumer() }

// Options configures a Worker. The zero value is usable: every zero field
// means the documented default.
//
// # Wiring the Fetcher
//
// The Worker runs the Handler it is given; the Handler's Fetcher enforces
// two bounds the Worker relies on, so build it like this:
//
//   - fetch.Options.Slots = fetch.NewSlots(n), with n the number of
//     requests in flight (REPLICATOR_CONCURRENCY). A command waiting for
//     its host's window holds no slot. Concurrency below defaults to that n.
//   - fetch.Options.MaxWait = ReadBlock: a pacing wait up to ReadBlock is
//     slept through, a longer one parks the command (docs/politeness.md),
//     and the Worker keeps the parked command in memory until its host is
//     due. A command the sink has no room for parks for MaxWait, and is
//     asked about again then (docs/storage.md, local: Room).
//   - fetch.Options.Stop = ctx.Done() of the context passed to Run, so
//     pacing waits are cut short at shutdown and those commands stay
//     pending (never fetched unpaced on the way out). Left unwired, such a
//     command finishes its wait and is fetched within DrainTimeout.
type Options struct {
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
	// MaxConsecutiveFailures sizes the outage limit: Run returns
	// ErrBrokerUnavailable once Redis has kept failing for the back-offs
	// between this many failed cycles in a row, however long each attempt
	// waits (451 s at the defaults: 1+2+4+8+16 s, then 14 × 30 s).
	// Default 20.
	MaxConsecutiveFailures int
	// DedupeTTL is how long a handled command_id is remembered. Rounded up
	// to whole seconds. Default 24 h.
	DedupeTTL time.Duration
	// DedupePrefix prefixes the dedupe key of each command_id. Default
	// DefaultDedupePrefix.
	DedupePrefix string
	// Concurrency is the number of requests in flight: the n given to
	// fetch.NewSlots for the Fetcher. Zero means those Slots' size, or
	// DefaultConcurrency if the Fetcher has none made by fetch.NewSlots.
	// The Worker uses it to size MaxHeld; the bound itself is the Slots'.
	Concurrency int
	// MaxHeld bounds the commands held in memory (waiting, parked or being
	// handled). When full, the Worker reads only while some held commands
	// wait for their host's politeness window: each new command of another
	// host takes the place of the newest of them, which is left pending and
	// taken back once there is room, so a few backlogged hosts cannot hold
	// up the rest. Otherwise a full Worker stops reading. Default
	// DefaultHeldPerRequest × Concurrency.
	MaxHeld int
	// MaxHeldPerHost bounds the commands held for one host; beyond it a
	// command is left pending, and taken back (oldest first) once its host
	// is down to half the bound, so a backlog is fetched at its host's own
	// rate, never waiting for XAUTOCLAIM. The Worker keeps the entry ids of
	// at most NotedPerHeld × MaxHeld such commands; one beyond that returns
	// through XAUTOCLAIM after ClaimMinIdle. Default 64.
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
}

// Worker is the consume loop of content.fetch: it reads commands with a
// consumer group, reclaims idle pending ones, handles many at once, and
// gives each exactly one fate (docs/streams.md): a fact then the dedupe key
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
// Create it with New; the zero value is not usable. Run may be called again
// after it returns, never twice at once; Healthy is safe for concurrent use.
type Worker struct {
	loop *consume.Loop[*task, fetch.Outcome]
	o    Options
}

// New returns a Worker that reads commands through client and hands them
// to handler. See Options for how to build the handler's Fetcher.
func New(client rueidis.Client, handler *fetch.Handler, opts Options) *Worker {
	o := opts
	o.Stream = consume.Or(o.Stream, DefaultStream)
	o.Group = consume.Or(o.Group, DefaultGroup)
	o.FactsStream = consume.Or(o.FactsStream, DefaultFactsStream)
	o.DLQStream = consume.Or(o.DLQStream, DefaultDLQStream)
	o.DedupePrefix = consume.Or(o.DedupePrefix, DefaultDedupePrefix)
	o.MaxHeldPerHost = consume.OrPositive(o.MaxHeldPerHost, DefaultMaxHeldPerHost)
	o.MaxActivePerHost = consume.OrPositive(o.MaxActivePerHost, DefaultMaxActivePerHost)
	var slots fetch.Slots
	maxFetch := fetch.DefaultMaxFetchTime
	if handler != nil && handler.Fetcher() != nil {
		slots = handler.Fetcher().Slots()
		maxFetch = handler.Fetcher().MaxFetchTime()
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
		if s, ok := slots.(sizedSlots); ok {
			o.Concurrency = s.Size()
		}
	}
	o.MaxHeld = consume.OrPositive(o.MaxHeld, DefaultHeldPerRequest*o.Concurrency)
	o.DrainTimeout = consume.OrPositive(o.DrainTimeout, maxFetch+DrainMargin)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if slots == nil {
		o.Logger.Warn("the handler's Fetcher has no Slots: requests are bounded only by MaxHeld", "max_held", o.MaxHeld)
	}

	m := newFetchMetrics(slots, o.Logger)
	cap := &capability{handler: handler, log: o.Logger, m: m}
	sched := newScheduler(o.MaxHeldPerHost, o.MaxActivePerHost, NotedPerHeld*o.MaxHeld, func(h *held, host string, park *fetch.ParkedError) {
		msg := "parked a command until its host is due"
		reason := m.parked(park)
		if reason == parkedStorageFull {
			msg = "parked a command until the blob store has room"
		}
		o.Logger.Debug(msg, "message_id", h.ID, "command_id", h.CommandID, "host", host,
			"reason", reason, "park_ms", park.Wait.Milliseconds(), "parks", h.Command.parks)
	})
	loop := consume.New(client, cap, sched, consume.Options{
		Stream:                 o.Stream,
		Group:                  o.Group,
		Consumer:               o.Consumer,
		StartID:                o.StartID,
		FactsStream:            o.FactsStream,
		DLQStream:              o.DLQStream,
		DedupePrefix:           o.DedupePrefix,
		ReadBlock:              o.ReadBlock,
		ClaimMinIdle:           o.ClaimMinIdle,
		MaxDeliveryAttempts:    o.MaxDeliveryAttempts,
		BackoffBase:            o.BackoffBase,
		BackoffMax:             o.BackoffMax,
		MaxConsecutiveFailures: o.MaxConsecutiveFailures,
		DedupeTTL:              o.DedupeTTL,
		MaxHeld:                o.MaxHeld,
		DrainTimeout:           o.DrainTimeout,
		Logger:                 o.Logger,
		Metrics:                m.loop,
	})
	m.register(o.Registerer, o.Logger)
	// The loop filled in the rest of the defaults.
	lo := loop.Options()
	o.Consumer, o.StartID, o.ReadBlock, o.ClaimMinIdle = lo.Consumer, lo.StartID, lo.ReadBlock, lo.ClaimMinIdle
	o.MaxDeliveryAttempts, o.BackoffBase, o.BackoffMax = lo.MaxDeliveryAttempts, lo.BackoffBase, lo.BackoffMax
	o.MaxConsecutiveFailures, o.DedupeTTL = lo.MaxConsecutiveFailures, lo.DedupeTTL
	return &Worker{loop: loop, o: o}
}

// Options returns the options in force, defaults filled in.
func (w *Worker) Options() Options { return w.o }

// Healthy reports whether the consumer group exists and Redis answered
// recently. It is HealthyAt at the current time.
func (w *Worker) Healthy() bool { return w.loop.Healthy() }

// HealthyAt reports whether, at now, the consumer group exists and a Redis
// command succeeded within the last max(3 × ReadBlock, ClaimMinIdle).
func (w *Worker) HealthyAt(now time.Time) bool { return w.loop.HealthyAt(now) }

// Run consumes commands until ctx is cancelled, then shuts down: it stops
// reading, leaves parked and waiting commands pending, lets in-flight
// fetches finish for up to DrainTimeout (cancelling the rest, which stay
// pending) and returns nil. It returns an error wrapping
// ErrBrokerUnavailable once Redis has kept failing for the outage limit,
// having cancelled in-flight fetches.
func (w *Worker) Run(ctx context.Context) error {
	w.o.Logger.InfoContext(ctx, "worker starting", "stream", w.o.Stream, "group", w.o.Group, "consumer", w.o.Consumer,
		"concurrency", w.o.Concurrency, "max_held", w.o.MaxHeld, "max_held_per_host", w.o.MaxHeldPerHost)
	return w.loop.Run(ctx)
}
