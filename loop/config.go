// Package loop holds the configuration every consume loop of the worker
// shares: how it reads a Redis stream with a consumer group, retries, backs
// off and remembers what it handled. The content.fetch and
// content.replicate workers (contentfetch/worker, replicate/worker) each
// take one Config; `replicator worker` builds it once from the
// REPLICATOR_* settings (docs/settings.md) and gives it to both.
package loop

import (
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Config fields left zero: the defaults of the REPLICATOR_*
// settings (docs/settings.md).
const (
	DefaultStartID                = "$"
	DefaultReadBlock              = 5 * time.Second
	DefaultClaimMinIdle           = 60 * time.Second
	DefaultMaxDeliveryAttempts    = 5
	DefaultBackoffBase            = time.Second
	DefaultBackoffMax             = 30 * time.Second
	DefaultMaxConsecutiveFailures = 20
	DefaultDedupeTTL              = 24 * time.Hour
)

// DefaultConsumer returns the default consumer name, "replicator@<hostname>".
func DefaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "replicator@" + host
}

// Config configures a consume loop. The zero value is usable: every zero
// field means the documented default. A Config is a plain value; one may
// serve several loops.
type Config struct {
	// Consumer names this worker in each group; unique per running worker.
	// Default DefaultConsumer().
	Consumer string
	// StartID is where a group created on first deployment starts reading.
	// Default "$" (only entries added after the group exists); "0" drains
	// a backlog.
	StartID string
	// ReadBlock is how long one XREADGROUP blocks. It also bounds the
	// politeness wait a content.fetch command sleeps through before it is
	// parked (docs/politeness.md). Default 5 s.
	ReadBlock time.Duration
	// ClaimMinIdle is how long an entry must be idle before XAUTOCLAIM
	// takes it (the retry path for transient failures). Held commands are
	// kept fresh at a third of it. Default 60 s.
	ClaimMinIdle time.Duration
	// MaxDeliveryAttempts is the delivery count (XPENDING times-delivered)
	// at which an unclassified failure is dead-lettered with handler_error.
	// A delivery that ends transient, or that is left pending unhandled, is
	// given back and does not count. Default 5.
	MaxDeliveryAttempts int
	// BackoffBase and BackoffMax bound the back-off between failed cycles:
	// BackoffBase doubling up to BackoffMax (never below BackoffBase).
	// Defaults 1 s and 30 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxConsecutiveFailures is how many consecutive failed cycles make a
	// loop give up (so a supervisor restarts the process). Default 20.
	MaxConsecutiveFailures int
	// DedupeTTL is how long a handled command_id is remembered, rounded up
	// to whole seconds. Default 24 h.
	DedupeTTL time.Duration
	// Logger receives the loops' lines. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the loops' metrics. Nil means no metrics.
	Registerer prometheus.Registerer
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Consumer == "" {
		c.Consumer = DefaultConsumer()
	}
	if c.StartID == "" {
		c.StartID = DefaultStartID
	}
	c.ReadBlock = positiveOr(c.ReadBlock, DefaultReadBlock)
	c.ClaimMinIdle = positiveOr(c.ClaimMinIdle, DefaultClaimMinIdle)
	c.MaxDeliveryAttempts = positiveOr(c.MaxDeliveryAttempts, DefaultMaxDeliveryAttempts)
	c.BackoffBase = positiveOr(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = max(positiveOr(c.BackoffMax, DefaultBackoffMax), c.BackoffBase)
	c.MaxConsecutiveFailures = positiveOr(c.MaxConsecutiveFailures, DefaultMaxConsecutiveFailures)
	c.DedupeTTL = positiveOr(c.DedupeTTL, DefaultDedupeTTL)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
