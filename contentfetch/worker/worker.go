package worker

import (
	"context"
	"math"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/consume"
	"github.com/replicator-go/replicator/loop"
	"github.com/replicator-go/replicator/sink"
)

// Defaults for Options fields left zero: those of the REPLICATOR_*
// settings (docs/settings.md).
const (
	DefaultStream       = "content.fetch"
	DefaultGroup        = "replicator.fetch"
	DefaultFactsStream  = "content.blobs"
	DefaultDLQStream    = "content.fetch.dlq"
	DefaultDedupePrefix = "replicator:cmd:fetch:"
	// DefaultConcurrency is the requests in flight of a worker whose
	// Fetcher is unbounded (REPLICATOR_CONCURRENCY).
	DefaultConcurrency      = 16
	DefaultMaxHeldPerHost   = 64
	DefaultMaxActivePerHost = 4
	// DefaultHeldPerRequest and MinDefaultMaxHeld size the default
	// MaxHeld: commands held per request in flight, and never fewer than
	// MinDefaultMaxHeld. Held commands beyond the requests in flight only
	// let the scheduler find other hosts' commands while some wait for
	// their host's window, and a full Worker makes room by giving those
	// back, so twice the requests in flight is enough; every held command
	// costs memory while it waits (docs/operations.md, Memory).
	DefaultHeldPerRequest = 2
	MinDefaultMaxHeld     = 256
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
// limit (loop.Config.OutageLimit), so the process exits non-zero and a
// supervisor restarts it. The error names the stream and the operation
// whose failure began the outage, and wraps that failure.
var ErrBrokerUnavailable = consume.ErrBrokerUnavailable

// Options configures a Worker. Sink is required; for every other field
// zero means the documented default.
type Options struct {
	// Loop is the consumer-group configuration, shared with any other
	// loop of the process. Its ReadBlock is also the longest politeness
	// wait a command sleeps through: a longer one parks the command in
	// memory until its host is due (docs/politeness.md).
	Loop loop.Config
	// Stream is the command stream. Default DefaultStream.
	Stream string
	// Group is the consumer group. Default DefaultGroup.
	Group string
	// FactsStream receives blob_available and fetch_failed. Default
	// DefaultFactsStream.
	FactsStream string
	// DLQStream receives dead letters. Default DefaultDLQStream.
	DLQStream string
	// DedupePrefix prefixes the dedupe key of each command_id. Default
	// DefaultDedupePrefix.
	DedupePrefix string
	// Fetcher fetches the commands; its MaxInFlight is the worker's
	// concurrency. Nil means fetch.New with MaxInFlight
	// DefaultConcurrency and the rest of its defaults.
	Fetcher *fetch.Fetcher
	// Sink stores the bodies.
	Sink sink.Sink
	// MaxTimeout is the largest timeout_seconds a command may ask for
	// (REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS). Zero means
	// guard.DefaultMaxTimeout.
	MaxTimeout time.Duration
	// MaxHeld bounds the commands held in memory (waiting, parked or being
	// handled). When full, the Worker reads only while some held commands
	// wait for their host's politeness window: each new command of another
	// host takes the place of the newest of them, which is left pending and
	// taken back once there is room, so a few backlogged hosts cannot hold
	// up the rest. Otherwise a full Worker stops reading. Default
	// DefaultMaxHeld of the Fetcher's MaxInFlight.
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
}

// Worker is the consume loop of content.fetch: it reads commands with a
// consumer group, reclaims idle pending ones, handles many at once, and
// gives each exactly one fate (docs/streams.md): a fact then the dedupe key
// then an ack; a fact then a dead letter; or pending for a retry.
//
// Each held command runs in its own goroutine; requests are bounded by the
// Fetcher's MaxInFlight, commands in memory by MaxHeld (and
// MaxHeldPerHost). A
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
	loop *consume.Loop[*task, contentfetch.Outcome]
	cap  *capability
	o    Options
}

// DefaultMaxHeld is the MaxHeld of a Worker whose Fetcher has concurrency
// requests in flight: DefaultHeldPerRequest × concurrency, at least
// MinDefaultMaxHeld.
func DefaultMaxHeld(concurrency int) int {
	return max(DefaultHeldPerRequest*concurrency, MinDefaultMaxHeld)
}

// OpenFiles is how many file descriptors a Worker whose Fetcher has
// concurrency requests in flight may hold at once when nothing bounds
// them: for each request its connection and, while the body streams to
// the sink, the sink's file or upload; the Fetcher's idle connections
// (fetch.MaxIdleConns); and openFilesSpare for Redis, the metrics
// listener, the blob tree and logs (docs/operations.md, Open files).
func OpenFiles(concurrency int) int {
	return 2*concurrency + fetch.MaxIdleConns + openFilesSpare
}

// MinOpenFiles is the lowest open-file limit a Worker at concurrency fits
// into with a Fetcher built with FetcherOpenFiles: a connection per
// request in flight, openFilesSpare, and minShared for bodies streaming
// to the sink and idle connections to share. Below it, fetches and
// stores fail with "too many open files" under load.
func MinOpenFiles(concurrency int) int {
	return concurrency + openFilesSpare + minShared
}

// FetcherOpenFiles is the fetch.Options.MaxOpenFiles that keeps a Worker
// within a process limit of limit open files: the limit less
// openFilesSpare, at least 1. Zero (no bound) when the limit is unknown
// (0).
func FetcherOpenFiles(limit uint64) int {
	if limit == 0 {
		return 0
	}
	return max(int(min(limit, math.MaxInt32))-openFilesSpare, 1)
}

const (
	openFilesSpare = 256
	minShared      = 128
)

// New returns a Worker that reads commands through client and fetches them
// as opts says.
func New(client rueidis.Client, opts Options) *Worker {
	o := opts
	o.Loop = o.Loop.WithDefaults()
	o.Stream = consume.Or(o.Stream, DefaultStream)
	o.Group = consume.Or(o.Group, DefaultGroup)
	o.FactsStream = consume.Or(o.FactsStream, DefaultFactsStream)
	o.DLQStream = consume.Or(o.DLQStream, DefaultDLQStream)
	o.DedupePrefix = consume.Or(o.DedupePrefix, DefaultDedupePrefix)
	o.MaxHeldPerHost = consume.OrPositive(o.MaxHeldPerHost, DefaultMaxHeldPerHost)
	o.MaxActivePerHost = consume.OrPositive(o.MaxActivePerHost, DefaultMaxActivePerHost)
	log := o.Loop.Logger
	if o.Fetcher == nil {
		o.Fetcher = fetch.New(fetch.Options{MaxInFlight: DefaultConcurrency, Logger: log})
	}
	_, concurrency := o.Fetcher.InFlight()
	if concurrency == 0 {
		concurrency = DefaultConcurrency
		log.Warn("the Fetcher has no MaxInFlight: requests are bounded only by MaxHeld")
	}
	o.MaxHeld = consume.OrPositive(o.MaxHeld, DefaultMaxHeld(concurrency))
	o.DrainTimeout = consume.OrPositive(o.DrainTimeout, o.Fetcher.MaxFetchTime()+DrainMargin)

	handler := contentfetch.NewHandler(contentfetch.HandlerOptions{
		Fetcher:    o.Fetcher,
		Sink:       o.Sink,
		MaxTimeout: o.MaxTimeout,
		MaxWait:    o.Loop.ReadBlock,
		Logger:     log,
	})
	m := newFetchMetrics(o.Fetcher, log)
	cap := &capability{handler: handler, log: log, m: m}
	sched := newScheduler(o.MaxHeldPerHost, o.MaxActivePerHost, NotedPerHeld*o.MaxHeld, func(h *held, host string, park *contentfetch.ParkedError) {
		msg := "parked a command until its host is due"
		reason := m.parked(park)
		if reason == parkedStorageFull {
			msg = "parked a command until the blob store has room"
		}
		log.Debug(msg, "message_id", h.ID, "command_id", h.CommandID, "host", host,
			"reason", reason, "park_ms", park.Wait.Milliseconds(), "parks", h.Command.parks)
	})
	l := consume.New(client, cap, sched, consume.Options{
		Config:       o.Loop,
		Stream:       o.Stream,
		Group:        o.Group,
		FactsStream:  o.FactsStream,
		DLQStream:    o.DLQStream,
		DedupePrefix: o.DedupePrefix,
		MaxHeld:      o.MaxHeld,
		DrainTimeout: o.DrainTimeout,
		Metrics:      m.loop,
	})
	m.register(o.Loop.Registerer, log)
	return &Worker{loop: l, cap: cap, o: o}
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
	_, concurrency := w.o.Fetcher.InFlight()
	w.o.Loop.Logger.InfoContext(ctx, "worker starting", "stream", w.o.Stream, "group", w.o.Group, "consumer", w.o.Loop.Consumer,
		"concurrency", concurrency, "max_held", w.o.MaxHeld, "max_held_per_host", w.o.MaxHeldPerHost)
	// Politeness waits end with the run's context; fetches already sent
	// run on within DrainTimeout.
	stop := ctx.Done()
	w.cap.stop.Store(&stop)
	defer w.cap.stop.Store(nil)
	return w.loop.Run(ctx)
}
