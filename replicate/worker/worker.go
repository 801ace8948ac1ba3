// Package worker is the content.replicate consume loop: it reads
// content_replicate commands with a consumer group and hands them to a
// replicate.Handler, with the same fates, delivery ceiling, reclaim,
// back-off and drain as the content.fetch loop, from the same code
// (internal/consume). Facts go to content.artifacts, dead letters to
// content.replicate.dlq (docs/replicate.md).
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/consume"
	"github.com/replicator-go/replicator/loop"
	"github.com/replicator-go/replicator/replicate"
)

// Defaults for Options fields left zero.
const (
	// DefaultConcurrency is how many writes run at once. Each is a whole
	// upload; a few keep the bucket busy without crowding out fetches.
	DefaultConcurrency = 4
	// DrainMargin is added to the Handler's write timeout for the default
	// DrainTimeout, so a write that ends at its bound can still record its
	// fate.
	DrainMargin = 10 * time.Second
	// metricsPrefix names this loop's metrics.
	metricsPrefix = "replicator_replicate_"
)

// Options configures a Worker. Handler is required; for every other field
// zero means the documented default.
type Options struct {
	// Loop is the consumer-group configuration, shared with any other
	// loop of the process.
	Loop loop.Config
	// Group is the consumer group on content.replicate. Default
	// replicate.DefaultGroup.
	Group string
	// Stream, FactsStream, DLQStream and DedupePrefix default to the
	// replicate package's names.
	Stream, FactsStream, DLQStream, DedupePrefix string
	// Handler handles the commands.
	Handler *replicate.Handler
	// Concurrency is how many commands are handled at once. Default
	// DefaultConcurrency.
	Concurrency int
	// MaxHeld bounds the commands in memory. Default 2 × Concurrency.
	MaxHeld int
	// DrainTimeout bounds the writes let finish at shutdown. Default the
	// Handler's write timeout plus DrainMargin.
	DrainTimeout time.Duration
}

// Worker consumes content.replicate. Create it with New.
type Worker struct {
	loop *consume.Loop[*envelope.ContentReplicate, replicate.Outcome]
}

// New returns a Worker that reads commands through client and hands them to
// opts.Handler.
func New(client rueidis.Client, opts Options) *Worker {
	o := opts
	o.Loop = o.Loop.WithDefaults()
	o.Concurrency = consume.OrPositive(o.Concurrency, DefaultConcurrency)
	handler := o.Handler
	m := consume.NewMetrics(metricsPrefix)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricsPrefix + "duration_seconds",
		Help:    "Time to handle one content_replicate command, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	}, []string{"outcome"})
	c := &capability{handler: handler, log: o.Loop.Logger, duration: duration}
	l := consume.New(client, c, consume.NewFIFO[*envelope.ContentReplicate, replicate.Outcome](o.Concurrency), consume.Options{
		Config:       o.Loop,
		Stream:       consume.Or(o.Stream, replicate.DefaultStream),
		Group:        consume.Or(o.Group, replicate.DefaultGroup),
		FactsStream:  consume.Or(o.FactsStream, replicate.DefaultFactsStream),
		DLQStream:    consume.Or(o.DLQStream, replicate.DefaultDLQStream),
		DedupePrefix: consume.Or(o.DedupePrefix, replicate.DefaultDedupePrefix),
		MaxHeld:      consume.OrPositive(o.MaxHeld, 2*o.Concurrency),
		DrainTimeout: consume.OrPositive(o.DrainTimeout, handler.WriteTimeout()+DrainMargin),
		Metrics:      m,
	})
	if r := o.Loop.Registerer; r != nil {
		m.Register(r, o.Loop.Logger)
		if err := r.Register(duration); err != nil {
			o.Loop.Logger.Warn("could not register a metric", "error", err)
		}
	}
	return &Worker{loop: l}
}

// Run consumes commands until ctx is cancelled, as the content.fetch loop
// does; see consume.Loop.Run.
func (w *Worker) Run(ctx context.Context) error { return w.loop.Run(ctx) }

// Healthy reports whether the consumer group exists and Redis answered
// recently.
func (w *Worker) Healthy() bool { return w.loop.Healthy() }

// capability is what content.replicate brings to the consume loop.
type capability struct {
	handler  *replicate.Handler
	log      *slog.Logger
	duration *prometheus.HistogramVec
}

var _ consume.Capability[*envelope.ContentReplicate, replicate.Outcome] = (*capability)(nil)

// Decode refuses a frame that does not decode (malformed_frame), another
// model (foreign_payload, nothing announced: its command_id is another
// command's) and a schema version other than 1 (announced as
// unsupported_schema_version on content.artifacts, then dead-lettered).
func (c *capability) Decode(fields map[string]string) consume.Decoded[*envelope.ContentReplicate] {
	cmd, err := envelope.DecodeReplicateCommand(fields)
	var d consume.Decoded[*envelope.ContentReplicate]
	if cmd != nil {
		d.CommandID = cmd.CommandID
		d.Attrs = []slog.Attr{slog.String("command_id", cmd.CommandID),
			slog.String("credentials_alias", cmd.CredentialsAlias), slog.String("provider", cmd.Provider)}
	}
	if d.Refuse(err, cmd != nil, func() envelope.Model {
		// occurred_at is stamped when the loop publishes it.
		return replicate.FailedFact(cmd, envelope.ReplicateReasonUnsupportedSchemaVersion,
			fmt.Sprintf("schema_version=%d", cmd.SchemaVersion), 0, time.Time{})
	}) {
		return d
	}
	d.Command = cmd
	return d
}

func (c *capability) Handle(ctx context.Context, cmd *envelope.ContentReplicate) replicate.Outcome {
	return c.handler.Handle(ctx, cmd)
}

func (c *capability) Fate(out replicate.Outcome) consume.Fate {
	return consume.FateOf(fates[out.Kind], out.Fact, out.Kind.String(), string(out.Reason), out.Err)
}

// fates maps the Handler's outcomes to the loop's fates; any other kind is
// unclassified.
var fates = map[replicate.Kind]consume.FateKind{
	replicate.Complete:  consume.Complete,
	replicate.Permanent: consume.Close,
	replicate.Transient: consume.Retry,
}

func (c *capability) HandlerError(cmd *envelope.ContentReplicate, attempts int, detail string, now time.Time) envelope.Model {
	return replicate.FailedFact(cmd, envelope.ReplicateReasonHandlerError, detail, attempts, now)
}

// Observe writes the one line per handled command and times it. No
// credential ever reaches it: commands carry none, and the Handler's errors
// name no secret.
func (c *capability) Observe(h *consume.Held[*envelope.ContentReplicate], out replicate.Outcome) {
	c.duration.WithLabelValues(out.Kind.String()).Observe(out.Duration.Seconds())
	level := slog.LevelInfo
	switch out.Kind {
	case replicate.Complete:
	case replicate.Permanent, replicate.Transient:
		level = slog.LevelWarn
	default:
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("message_id", h.ID),
		slog.String("command_id", h.CommandID),
		slog.String("credentials_alias", h.Command.CredentialsAlias),
		slog.String("provider", h.Command.Provider),
		slog.String("destination", h.Command.Destination),
		slog.String("outcome", out.Kind.String()),
		slog.String("reason", string(out.Reason)),
		slog.Int64("duration_ms", out.Duration.Milliseconds()),
		slog.Bool("created", out.Created),
	}
	if out.Err != nil {
		attrs = append(attrs, slog.String("error", out.Err.Error()))
	}
	c.log.LogAttrs(context.Background(), level, "handled replicate command", attrs...)
}
