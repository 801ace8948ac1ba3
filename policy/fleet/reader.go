package fleet

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/policy"
)

// Reader defaults, for the zero fields of ReaderOptions.
const (
	// DefaultPolicyStream is the policy stream's key, content.fetch-policy.
	DefaultPolicyStream = "content.fetch-policy"
	// DefaultBatchSize is how many entries one read asks for.
	DefaultBatchSize = 500
	// DefaultBlock is how long one tailing XREAD waits.
	DefaultBlock = 5 * time.Second
	// DefaultMaxSkips is the run of undecodable frames that pauses the
	// reader.
	DefaultMaxSkips = 100
	// DefaultBackoffBase is the first wait after a failed read.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax is the longest wait after failed reads.
	DefaultBackoffMax = 30 * time.Second
)

// ReaderOptions configures a Reader. The zero value is valid and means the
// defaults documented on each field.
type ReaderOptions struct {
	// Stream is the policy stream's key. Empty means DefaultPolicyStream.
	Stream string
	// BatchSize is how many entries one XRANGE or XREAD asks for. Zero means
	// DefaultBatchSize.
	BatchSize int
	// Block is how long one tailing XREAD waits for new entries
	// (REPLICATOR_READ_BLOCK_MS). Zero means DefaultBlock.
	Block time.Duration
	// MaxSkips bounds a run of consecutive frames that do not decode. Each
	// is skipped, counted and logged; when a run reaches MaxSkips the reader
	// logs it, ends the initial replay if it is still going (so a stream of
	// garbage cannot hold the worker back; the rest is read as the tail
	// goes on from the same place) and pauses for Block before reading on,
	// so a producer writing garbage costs bounded work. No well-formed
	// frame is ever lost to a skip. Zero means DefaultMaxSkips.
	MaxSkips int
	// BackoffBase and BackoffMax bound the wait after a failed read: it
	// starts at BackoffBase and doubles up to BackoffMax
	// (REPLICATOR_ERROR_BACKOFF_*). Zero means DefaultBackoffBase and
	// DefaultBackoffMax.
	BackoffBase, BackoffMax time.Duration
	// Logger receives the reader's lines. Nil means slog.Default().
	Logger *slog.Logger
}

// Reader keeps a policy.Table up to date from the policy stream: it replays the
// stream from its first entry in batches, then tails it with blocking XREAD
// from the last entry it saw. It uses no consumer group (every worker needs
// every frame), acknowledges nothing and dead-letters nothing.
//
// Create it with NewReader and call Run once. A Reader's methods are safe
// for concurrent use.
type Reader struct {
	client rueidis.Client
	table  *policy.Table
	opts   ReaderOptions
	log    *slog.Logger

	replayed     chan struct{}
	replayedOnce sync.Once
	applied      atomic.Int64
	skipped      atomic.Int64

	// afterBatch, when set (by tests, before Run), is called after each
	// successful read has been applied.
	afterBatch func()
}

// NewReader returns a Reader that applies client's policy stream to table.
func NewReader(client rueidis.Client, table *policy.Table, opts ReaderOptions) *Reader {
	opts.Stream = cmp.Or(opts.Stream, DefaultPolicyStream)
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Block <= 0 {
		opts.Block = DefaultBlock
	}
	if opts.MaxSkips <= 0 {
		opts.MaxSkips = DefaultMaxSkips
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = DefaultBackoffBase
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	opts.BackoffMax = max(opts.BackoffMax, opts.BackoffBase)
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Reader{
		client:   client,
		table:    table,
		opts:     opts,
		log:      log.With("stream", opts.Stream),
		replayed: make(chan struct{}),
	}
}

// Replayed returns a channel closed once the initial replay is done: every
// entry present when Run started has been applied (or skipped). It is also
// closed early if the replay is abandoned: on an error reply from Redis
// (waiting would not mend the stream) or a run of MaxSkips undecodable
// frames. A connection failure does not abandon it: the worker could not
// consume commands then anyway.
func (r *Reader) Replayed() <-chan struct{} { return r.replayed }

// WaitReplayed blocks until the initial replay is done or ctx ends, and
// returns ctx.Err() in the latter case.
func (r *Reader) WaitReplayed(ctx context.Context) error {
	select {
	case <-r.replayed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Applied returns how many frames changed the table so far.
func (r *Reader) Applied() int64 { return r.applied.Load() }

// Skipped returns how many frames did not decode and were skipped so far.
func (r *Reader) Skipped() int64 { return r.skipped.Load() }

// Run reads the stream until ctx ends, and then returns ctx.Err(). Its own
// failures (Redis unreachable, error replies) never end it: they are logged
// and retried with backoff, and the table keeps what it has.
func (r *Reader) Run(ctx context.Context) error {
	var (
		cursor    string // last entry seen; "" before the first
		replaying = true
		started   = time.Now()
		failures  int
		run       int // consecutive undecodable frames
		messages  int // frames read during the replay
	)
	endReplay := func(how string) {
		replaying = false
		r.replayedOnce.Do(func() { close(r.replayed) })
		r.log.Info(how,
			"tracked_hosts", r.table.Len(), "messages", messages, "skipped", r.skipped.Load(),
			"duration_ms", time.Since(started).Milliseconds())
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var (
			entries []rueidis.XRangeEntry
			err     error
		)
		// rueidis retries read-only commands until the context's deadline,
		// so without one an outage would be retried silently forever.
		rctx, cancel := context.WithTimeout(ctx, 2*r.opts.Block+time.Second)
		if replaying {
			entries, err = r.readRange(rctx, cursor)
		} else {
			entries, err = r.readTail(rctx, cursor)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			r.log.Warn("fetch policy read failed", "error", err, "consecutive_failures", failures)
			if _, isReply := rueidis.IsRedisErr(err); isReply && replaying {
				endReplay("could not finish replaying the fetch policy stream; continuing with what arrived")
			}
			if !sleepCtx(ctx, backoff(r.opts.BackoffBase, r.opts.BackoffMax, failures)) {
				return ctx.Err()
			}
			continue
		}
		if failures > 0 {
			r.log.Info("fetch policy reads recovered", "after_failures", failures)
			failures = 0
		}
		pause := false
		for _, e := range entries {
			cursor = e.ID
			if replaying {
				messages++
			}
			if r.handle(e) {
				run = 0
				continue
			}
			run++
			if run >= r.opts.MaxSkips {
				r.log.Warn("pausing the fetch policy reader after a run of malformed frames", "skipped_in_a_row", run, "id", e.ID)
				if replaying {
					endReplay("gave up replaying the fetch policy stream after a run of malformed frames; the tail reads on")
				}
				run, pause = 0, true
			}
		}
		if replaying && len(entries) < r.opts.BatchSize {
			endReplay("fetch policy replay complete")
		}
		if r.afterBatch != nil {
			r.afterBatch()
		}
		if pause && !sleepCtx(ctx, r.opts.Block) {
			return ctx.Err()
		}
	}
}

// ReplayOnce applies every entry now on the stream to the table, in
// batches, and returns without tailing: a read-only tool's view of the
// floors in force (replicator status). It returns the first failed read,
// and ctx.Err() when ctx ends.
func (r *Reader) ReplayOnce(ctx context.Context) error {
	cursor := ""
	for {
		entries, err := r.readRange(ctx, cursor)
		if err != nil {
			return err
		}
		for _, e := range entries {
			cursor = e.ID
			r.handle(e)
		}
		if len(entries) < r.opts.BatchSize {
			return nil
		}
	}
}

// handle applies one entry, and reports false when it did not decode.
func (r *Reader) handle(e rueidis.XRangeEntry) bool {
	m, err := envelope.FromWire(e.FieldValues)
	switch {
	case errors.Is(err, envelope.ErrUnsupportedVersion):
		r.log.Info("ignoring a fetch policy frame of an unsupported schema version", "id", e.ID, "error", err)
		return true
	case err != nil:
		r.skipped.Add(1)
		r.log.Warn("skipping a malformed frame on the fetch policy stream", "id", e.ID, "error", err)
		return false
	}
	switch err := r.table.Apply(m); {
	case err == nil:
		r.applied.Add(1)
		r.logApplied(m)
	case errors.Is(err, policy.ErrStale):
		// A replay meets these whenever a host was republished.
		r.log.Info("ignoring a fetch policy older than the one already applied", "id", e.ID, "error", err)
	default:
		r.log.Warn("ignoring a frame on the fetch policy stream", "id", e.ID, "error", err)
	}
	return true
}

// logApplied logs, at DEBUG, what an applied frame put in force.
func (r *Reader) logApplied(m envelope.Model) {
	if !r.log.Enabled(context.Background(), slog.LevelDebug) {
		return // a replay applies thousands; skip the HostKey
	}
	p := m.(*envelope.FetchPolicyState) // Apply accepts nothing else
	host := policy.HostKey(p.Host)
	if p.Revoked {
		r.log.Debug("revoked a host fetch policy; it falls back to the default", "host", host)
		return
	}
	d, _ := r.table.Floor(host)
	r.log.Debug("applied a host fetch policy", "host", host, "min_interval_seconds", d.Seconds())
}

// readRange reads the next batch of the replay with XRANGE, after cursor.
func (r *Reader) readRange(ctx context.Context, cursor string) ([]rueidis.XRangeEntry, error) {
	start := "-"
	if cursor != "" {
		start = "(" + cursor
	}
	cmd := r.client.B().Xrange().Key(r.opts.Stream).Start(start).End("+").Count(int64(r.opts.BatchSize)).Build()
	return r.client.Do(ctx, cmd).AsXRange()
}

// readTail waits up to Block for entries after cursor. client.Do sends a
// command built with Block() on a dedicated connection from rueidis's
// blocking pool, so it never stalls the client's shared pipeline, and
// returns early when ctx is cancelled.
func (r *Reader) readTail(ctx context.Context, cursor string) ([]rueidis.XRangeEntry, error) {
	if cursor == "" {
		cursor = "0-0"
	}
	cmd := r.client.B().Xread().Count(int64(r.opts.BatchSize)).Block(r.opts.Block.Milliseconds()).
		Streams().Key(r.opts.Stream).Id(cursor).Build()
	streams, err := r.client.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil // the block ran out with nothing new
	}
	if err != nil {
		return nil, err
	}
	return streams[r.opts.Stream], nil
}

// backoff is base·2^(n-1), capped at maxWait.
func backoff(base, maxWait time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}

// sleepCtx waits d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
