// Package loop holds the configuration every consume loop of the worker
// shares: how it reads a Redis stream with a consumer group, retries, backs
// off and remembers what it handled. The content.fetch and
// content.replicate workers (contentfetch/worker, replicate/worker) each
// take one Config; `replicator worker` builds it once from the
// REPLICATOR_* settings (docs/settings.md) and gives it to both.
package loop

import (
	"log/slog"
	"math"
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
	// MaxDeliveryAttempts is how many handlings of one entry may fail
	// unclassified on a worker before it is dead-lettered with
	// handler_error. A delivery that ends transient, or that is left
	// pending unhandled, does not count. Default 5.
	MaxDeliveryAttempts int
	// BackoffBase and BackoffMax bound the back-off between failed cycles:
	// BackoffBase doubling up to BackoffMax (never below BackoffBase).
	// Defaults 1 s and 30 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxConsecutiveFailures sizes the outage limit (OutageLimit): a loop
	// gives up, so a supervisor restarts the process, once Redis has kept
	// failing for the back-offs between this many failed cycles in a row,
	// however long each attempt waits. Default 20.
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

// OutageLimit is how long Redis may keep failing before a loop gives up:
// the sum of the back-offs between MaxConsecutiveFailures failed cycles in
// a row (BackoffBase doubling up to BackoffMax), that is, how long that
// many cycles take when each fails at once. A cycle that waits out a
// timeout does not stretch it. Zero fields take their defaults; 451 s at
// the defaults (1+2+4+8+16 s, then 14 × 30 s).
func (c Config) OutageLimit() time.Duration {
	c = c.WithDefaults()
	var sum time.Duration
	for k := 1; k < c.MaxConsecutiveFailures; k++ {
		d := c.Backoff(k)
		if d == c.BackoffMax {
			// Every later back-off is the longest: add them at once,
			// saturating rather than overflowing.
			n := time.Duration(c.MaxConsecutiveFailures - k)
			if n > (math.MaxInt64-sum)/d {
				return math.MaxInt64
			}
			return sum + n*d
		}
		sum += d
	}
	return sum
}

// Backoff is the wait after the given number of consecutive failed cycles:
// BackoffBase × 2^(failures-1), capped at BackoffMax. Zero fields take
// their defaults.
func (c Config) Backoff(failures int) time.Duration {
	c.BackoffBase = positiveOr(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = max(positiveOr(c.BackoffMax, DefaultBackoffMax), c.BackoffBase)
	d := c.BackoffBase
	for i := 1; i < failures && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
