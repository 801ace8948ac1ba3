package consume

import (
	"context"
	"log/slog"
	"math"
	"os"
	"time"
)

// Defaults for Options fields left zero: the defaults of the REPLICATOR_*
// settings (REPLICATOR_READ_BLOCK_MS, REPLICATOR_CLAIM_MIN_IDLE_MS, … in the
// README's Configuration).
const (
	DefaultStartID                = "$"
	DefaultReadBlock              = 5 * time.Second
	DefaultClaimMinIdle           = 60 * time.Second
	DefaultMaxDeliveryAttempts    = 5
	DefaultBackoffBase            = time.Second
	DefaultBackoffMax             = 30 * time.Second
	DefaultMaxConsecutiveFailures = 20
	DefaultDedupeTTL              = 24 * time.Hour
	// DefaultDrainTimeout bounds the drain when a loop is given none.
	DefaultDrainTimeout = 2 * time.Minute
	// DefaultMaxHeld bounds the commands in memory when a loop is given
	// no bound.
	DefaultMaxHeld = 256
)

// fateTimeout bounds the writes that give one command its fate.
const fateTimeout = 10 * time.Second

// DefaultConsumer returns the default consumer name, "replicator@<hostname>".
func DefaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return "replicator@" + host
}

// Options configures a Loop. Stream, Group, FactsStream, DLQStream and
// DedupePrefix name the capability's keys and are required; for every
// other field zero means the documented default.
type Options struct {
	// Stream is the command stream.
	Stream string
	// Group is the consumer group.
	Group string
	// Consumer names this worker in the group; unique per running worker.
	// Default DefaultConsumer().
	Consumer string
	// StartID is where a newly created group starts reading. Default "$".
	StartID string
	// FactsStream receives the facts.
	FactsStream string
	// DLQStream receives dead letters.
	DLQStream string
	// DedupePrefix prefixes each command_id's dedupe key.
	DedupePrefix string
	// ReadBlock is how long one XREADGROUP blocks. Default 5 s.
	ReadBlock time.Duration
	// ClaimMinIdle is how long an entry must be idle before XAUTOCLAIM
	// takes it. Held commands are kept fresh at a third of it. Default
	// 60 s.
	ClaimMinIdle time.Duration
	// MaxDeliveryAttempts is the delivery count at which an Unclassified
	// failure is closed with the handler_error fact. Default 5.
	MaxDeliveryAttempts int
	// BackoffBase and BackoffMax bound the back-off between failed
	// cycles: BackoffBase doubling up to BackoffMax. Defaults 1 s and 30 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxConsecutiveFailures sizes how long Redis may keep failing before
	// Run returns ErrBrokerUnavailable: the back-offs between this many
	// failed cycles in a row (see OutageLimit). Default 20.
	MaxConsecutiveFailures int
	// DedupeTTL is how long a handled command_id is remembered, rounded up
	// to whole seconds. Default 24 h.
	DedupeTTL time.Duration
	// MaxHeld bounds the commands held in memory (waiting, handled or
	// being closed). Default DefaultMaxHeld.
	MaxHeld int
	// DrainTimeout is how long handlings may run at shutdown before their
	// context is cancelled (they stay pending). Default
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Logger receives the loop's lines. Nil means slog.Default().
	Logger *slog.Logger
	// Metrics counts what the loop does. Nil means no metrics.
	Metrics *Metrics
}

// OutageLimit is how long a loop's cycles may keep failing before Run
// returns ErrBrokerUnavailable: the sum of the back-offs between
// MaxConsecutiveFailures failed cycles in a row (BackoffBase doubling up to
// BackoffMax), that is, how long that many cycles take when each fails at
// once. A cycle that waits out a timeout does not stretch it: Run gives up
// once the outage has lasted this long, however few cycles failed. Zero
// fields take their defaults; 451 s at the defaults (1+2+4+8+16 s, then
// 14 × 30 s).
func (o Options) OutageLimit() time.Duration {
	o = o.withDefaults()
	var sum time.Duration
	for k := 1; k < o.MaxConsecutiveFailures; k++ {
		d := o.backoff(k)
		if d == o.BackoffMax {
			// Every later back-off is the longest: add them at once,
			// saturating rather than overflowing.
			n := time.Duration(o.MaxConsecutiveFailures - k)
			if n > (math.MaxInt64-sum)/d {
				return math.MaxInt64
			}
			return sum + n*d
		}
		sum += d
	}
	return sum
}

// backoff is BackoffBase × 2^(failures-1), capped at BackoffMax.
func (o *Options) backoff(failures int) time.Duration {
	d := o.BackoffBase
	for i := 1; i < failures && d < o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, o.BackoffMax)
}

// clock is the package's one seam for time; tests replace it.
type clock struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

var wallClock = clock{now: time.Now, sleep: sleep}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// withDefaults fills in every zero field.
func (o Options) withDefaults() Options {
	o.Consumer = Or(o.Consumer, DefaultConsumer())
	o.StartID = Or(o.StartID, DefaultStartID)
	o.ReadBlock = OrPositive(o.ReadBlock, DefaultReadBlock)
	o.ClaimMinIdle = OrPositive(o.ClaimMinIdle, DefaultClaimMinIdle)
	o.BackoffBase = OrPositive(o.BackoffBase, DefaultBackoffBase)
	o.BackoffMax = max(OrPositive(o.BackoffMax, DefaultBackoffMax), o.BackoffBase)
	o.DedupeTTL = OrPositive(o.DedupeTTL, DefaultDedupeTTL)
	o.MaxDeliveryAttempts = OrPositive(o.MaxDeliveryAttempts, DefaultMaxDeliveryAttempts)
	o.MaxConsecutiveFailures = OrPositive(o.MaxConsecutiveFailures, DefaultMaxConsecutiveFailures)
	o.MaxHeld = OrPositive(o.MaxHeld, DefaultMaxHeld)
	o.DrainTimeout = OrPositive(o.DrainTimeout, DefaultDrainTimeout)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Or returns v, or def when v is the zero value: how the loops' options
// read "zero means the documented default".
func Or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// OrPositive returns v, or def when v is zero or negative: for a count or
// a duration, where nothing below one means anything.
func OrPositive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
