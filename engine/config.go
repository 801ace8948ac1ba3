package engine

import (
	"cmp"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Config fields and capability.Capability sizes left zero:
// the defaults of the REPLICATOR_* settings (docs/settings.md), declared
// here once.
const (
	DefaultStartID                = "$"
	DefaultReadBlock              = 5 * time.Second
	DefaultClaimMinIdle           = 60 * time.Second
	DefaultMaxDeliveryAttempts    = 5
	DefaultBackoffBase            = time.Second
	DefaultBackoffMax             = 30 * time.Second
	DefaultMaxConsecutiveFailures = 20
	DefaultDedupeTTL              = 24 * time.Hour

	// DefaultConcurrency is the handlings at once of a capability that
	// names none.
	DefaultConcurrency = 4
	// DefaultHeldPerHandling sizes the default MaxHeld: commands held per
	// handling at once. task commands beyond the handlings only let the
	// scheduler find other keys' commands while some wait for their key's
	// window, so twice is enough; each costs memory while it waits.
	DefaultHeldPerHandling = 2
	// DefaultDrainTimeout bounds the drain of a capability that names no
	// DrainTimeout.
	DefaultDrainTimeout = 2 * time.Minute
	// NotedPerHeld sizes how many commands left pending for a full key (or
	// a full loop) the scheduler keeps the entry ids of, to take them back
	// as soon as there is room: NotedPerHeld × MaxHeld. Beyond that a
	// command left pending returns through the reclaim.
	NotedPerHeld = 64
)

// Config configures every consume loop of a process: how each reads its
// stream with a consumer group, retries, backs off and remembers what it
// handled. What differs per capability (its streams, its sizes) is in its
// capability.Capability. The zero value is usable: every zero field means
// the documented default. A Config is a plain value; one serves every
// loop.
type Config struct {
	// StartID is where a group created on first deployment starts reading.
	// Default "$" (only entries added after the group exists); "0" drains
	// a backlog.
	StartID string
	// ReadBlock is how long one XREADGROUP blocks. Default 5 s.
	ReadBlock time.Duration
	// ClaimMinIdle is how long an entry must be idle before XAUTOCLAIM
	// takes it (the retry path for transient failures). task commands are
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
	c.StartID = cmp.Or(c.StartID, DefaultStartID)
	c.ReadBlock = positive(c.ReadBlock, DefaultReadBlock)
	c.ClaimMinIdle = positive(c.ClaimMinIdle, DefaultClaimMinIdle)
	c.MaxDeliveryAttempts = positive(c.MaxDeliveryAttempts, DefaultMaxDeliveryAttempts)
	c.BackoffBase = positive(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = max(positive(c.BackoffMax, DefaultBackoffMax), c.BackoffBase)
	c.MaxConsecutiveFailures = positive(c.MaxConsecutiveFailures, DefaultMaxConsecutiveFailures)
	c.DedupeTTL = positive(c.DedupeTTL, DefaultDedupeTTL)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// ConsumerName is the name a worker registers in group when its capability
// names none: the group with its dots as dashes, then the slot "-1"
// (replicator.fetch → replicator-fetch-1). It is the same on every restart
// and every host, so a restart reuses its registration; a second worker in
// one group takes another slot by naming its consumer (docs/operations.md,
// Consumer names).
func ConsumerName(group string) string {
	return strings.ReplaceAll(group, ".", "-") + "-1"
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
	c.BackoffBase = positive(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = max(positive(c.BackoffMax, DefaultBackoffMax), c.BackoffBase)
	d := c.BackoffBase
	for i := 1; i < failures && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// positive is v, or def when v is zero or negative: for a count or a
// duration, nothing below one means anything.
func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
