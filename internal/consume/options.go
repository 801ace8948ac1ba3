package consume

import (
	"context"
	"time"

	"github.com/replicator-go/replicator/loop"
)

// Defaults for Options fields left zero; the shared settings default in
// package loop.
const (
	// DefaultDrainTimeout bounds the drain when a loop is given none.
	DefaultDrainTimeout = 2 * time.Minute
	// DefaultMaxHeld bounds the commands in memory when a loop is given
	// no bound.
	DefaultMaxHeld = 256
)

// fateTimeout bounds the writes that give one command its fate.
const fateTimeout = 10 * time.Second

// Options configures a Loop: the shared loop.Config, and the capability's
// keys (Stream, Group, FactsStream, DLQStream and DedupePrefix, all
// required). For every other field zero means the documented default.
type Options struct {
	loop.Config
	// Stream is the command stream.
	Stream string
	// Group is the consumer group.
	Group string
	// FactsStream receives the facts.
	FactsStream string
	// DLQStream receives dead letters.
	DLQStream string
	// DedupePrefix prefixes each command_id's dedupe key.
	DedupePrefix string
	// MaxHeld bounds the commands held in memory (waiting, handled or
	// being closed). Default DefaultMaxHeld.
	MaxHeld int
	// DrainTimeout is how long handlings may run at shutdown before their
	// context is cancelled (they stay pending). Default
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Metrics counts what the loop does. Nil means no metrics.
	Metrics *Metrics
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
	o.Config = o.Config.WithDefaults()
	o.MaxHeld = OrPositive(o.MaxHeld, DefaultMaxHeld)
	o.DrainTimeout = OrPositive(o.DrainTimeout, DefaultDrainTimeout)
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
