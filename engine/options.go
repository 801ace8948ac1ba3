package engine

import (
	"cmp"
	"context"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
)

// fateTimeout bounds the writes that give one command its fate.
const fateTimeout = 10 * time.Second

// options is what one loop runs with: the shared Config and its
// capability, every zero field defaulted, and the loop's metrics.
type options struct {
	Config
	capability.Capability
	Metrics *metrics
}

// newOptions fills in every zero field of cfg and c.
func newOptions(cfg Config, c capability.Capability) options {
	cfg = cfg.WithDefaults()
	c.Consumer = cmp.Or(c.Consumer, ConsumerName(c.Group))
	c.MetricsPrefix = cmp.Or(c.MetricsPrefix, "replicator_"+c.Name+"_")
	c.Concurrency = positive(c.Concurrency, DefaultConcurrency)
	c.MaxHeld = positive(c.MaxHeld, DefaultHeldPerHandling*c.Concurrency)
	c.MaxHeldPerKey = positive(c.MaxHeldPerKey, c.MaxHeld)
	c.MaxActivePerKey = positive(c.MaxActivePerKey, c.Concurrency)
	c.DrainTimeout = positive(c.DrainTimeout, DefaultDrainTimeout)
	return options{Config: cfg, Capability: c}
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
