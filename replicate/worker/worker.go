// Package worker is the content.replicate consume loop: it reads
// content_replicate commands with a consumer group and hands them to a
// replicate.Handler, with the same fates, delivery ceiling, reclaim,
// back-off and drain as the content.fetch loop, from the same code
// (internal/consume). Facts go to content.artifacts, dead letters to
// content.replicate.dlq (docs/replicate.md).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/consume"
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

// Options configures a Loop. Zero means the documented default; the
// settings the content.fetch loop also has (Consumer, StartID, ReadBlock,
// ClaimMinIdle, MaxDeliveryAttempts, the back-off, DedupeTTL) default as
// it does.
type Options struct {
	// Group is the consumer group on content.replicate. Default
	// replicate.DefaultGroup.
	Group    string
	Consumer string
	StartID  string
	// Stream, FactsStream, DLQStream and DedupePrefix default to the
	// replicate package's names.
	Stream, FactsStream, DLQStream, DedupePrefix string
	ReadBlock                                    time.Duration
	ClaimMinIdle                                 time.Duration
	MaxDeliveryAttempts                          int
	BackoffBase, BackoffMax                      time.Duration
	MaxConsecutiveFailures                       int
	DedupeTTL                                    time.Duration
	// Concurrency is how many commands are handled at once. Default
	// DefaultConcurrency.
	Concurrency int
	// MaxHeld bounds the commands in memory. Default 2 × Concurrency.
	MaxHeld int
	// DrainTimeout bounds the writes let finish at shutdown. Default
	// replicate.DefaultWriteTimeout plus DrainMargin.
	DrainTimeout time.Duration
	// Logger receives one line per handled command and the loop's events.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the replicator_replicate_* metrics. Nil means no
	// metrics.
	Registerer prometheus.Registerer
}

// Loop consumes content.replicate. Create it with New.
type Loop struct {
	loop *consume.Loop[*envelope.ContentReplicate, replicate.Outcome]
}

// New returns a Loop that reads commands through client and hands them to
// handler.
func New(client rueidis.Client, handler *replicate.Handler, opts Options) *Loop {
	o := opts
	o.Concurrency = consume.OrPositive(o.Concurrency, DefaultConcurrency)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := consume.NewMetrics(metricsPrefix)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricsPrefix + "duration_seconds",
		Help:    "Time to handle one content_replicate command, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	}, []string{"outcome"})
	c := &capability{handler: handler, log: o.Logger, duration: duration}
	l := consume.New(client, c, consume.NewFIFO[*envelope.ContentReplicate, replicate.Outcome](o.Concurrency), consume.Options{
		Stream:                 consume.Or(o.Stream, replicate.DefaultStream),
		Group:                  consume.Or(o.Group, replicate.DefaultGroup),
		Consumer:               o.Consumer,
		StartID:                o.StartID,
		FactsStream:            consume.Or(o.FactsStream, replicate.DefaultFactsStream),
		DLQStream:              consume.Or(o.DLQStream, replicate.DefaultDLQStream),
		DedupePrefix:           consume.Or(o.DedupePrefix, replicate.DefaultDedupePrefix),
		ReadBlock:              o.ReadBlock,
		ClaimMinIdle:           o.ClaimMinIdle,
		MaxDeliveryAttempts:    o.MaxDeliveryAttempts,
		BackoffBase:            o.BackoffBase,
		BackoffMax:             o.BackoffMax,
		MaxConsecutiveFailures: o.MaxConsecutiveFailures,
		DedupeTTL:              o.DedupeTTL,
		MaxHeld:                consume.OrPositive(o.MaxHeld, 2*o.Concurrency),
		DrainTimeout:           consume.OrPositive(o.DrainTimeout, handler.WriteTimeout()+DrainMargin),
		Logger:                 o.Logger,
		Metrics:                m,
	})
	if o.Registerer != nil {
		m.Register(o.Registerer, o.Logger)
		if err := o.Registerer.Register(duration); err != nil {
			o.Logger.Warn("could not register a metric", "error", err)
		}
	}
	return &Loop{loop: l}
}

// Run consumes commands until ctx is cancelled, as the content.fetch loop
// does; see consume.Loop.Run.
func (l *Loop) Run(ctx context.Context) error { return l.loop.Run(ctx) }

// Healthy reports whether the consumer group exists and Redis answered
// recently.
func (l *Loop) Healthy() bool { return l.loop.Healthy() }

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
	d := consume.Decoded[*envelope.ContentReplicate]{Err: err}
	if cmd != nil {
		d.CommandID = cmd.CommandID
		d.Attrs = []slog.Attr{slog.String("command_id", cmd.CommandID),
			slog.String("credentials_alias", cmd.CredentialsAlias), slog.String("provider", cmd.Provider)}
	}
	switch {
	case errors.Is(err, envelope.ErrForeignPayload):
		d.Refusal, d.Attrs = envelope.DLQForeignPayload, nil
	case errors.Is(err, envelope.ErrUnsupportedVersion) && cmd != nil:
		d.Refusal = string(envelope.ReplicateReasonUnsupportedSchemaVersion)
		// occurred_at is stamped when the loop publishes it.
		d.Fact = replicate.FailedFact(cmd, envelope.ReplicateReasonUnsupportedSchemaVersion,
			fmt.Sprintf("schema_version=%d", cmd.SchemaVersion), 0, time.Time{})
	case err != nil:
		d.Refusal, d.Attrs = envelope.DLQMalformedFrame, nil
	default:
		d.Command = cmd
	}
	return d
}

func (c *capability) Handle(ctx context.Context, cmd *envelope.ContentReplicate) replicate.Outcome {
	return c.handler.Handle(ctx, cmd)
}

func (c *capability) Fate(out replicate.Outcome) consume.Fate {
	f := consume.Fate{Fact: out.Fact, Outcome: out.Kind.String(), Reason: string(out.Reason), Err: out.Err}
	switch out.Kind {
	case replicate.Complete:
		f.Kind = consume.Complete
	case replicate.Permanent:
		f.Kind = consume.Close
	case replicate.Transient:
		f.Kind = consume.Retry
	default:
		f.Kind, f.Outcome = consume.Unclassified, replicate.Unclassified.String()
	}
	return f
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
