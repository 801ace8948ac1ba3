package engine_test

import (
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
)

// fetchOptions is what the tests build a content.fetch loop from: the
// loop's settings, the capability's overrides, and the Handler's parts.
// Zero means the capability's default.
type fetchOptions struct {
	Loop     engine.Config
	Consumer string

	Stream, Group, FactsStream, DLQStream, DedupePrefix string

	Fetcher    *fetch.Fetcher
	Sink       sink.Sink
	MaxTimeout time.Duration

	MaxHeld, MaxHeldPerHost, MaxActivePerHost int
	DrainTimeout                              time.Duration
}

// newFetchLoop builds the content.fetch loop o describes, as the binary
// does: the Handler sleeps through politeness waits up to the loop's
// ReadBlock and parks a command whose wait is longer (docs/politeness.md).
func newFetchLoop(client rueidis.Client, o fetchOptions) *engine.Loop {
	cfg := o.Loop.WithDefaults()
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{
		Fetcher:    o.Fetcher,
		Sink:       o.Sink,
		MaxTimeout: o.MaxTimeout,
		MaxWait:    cfg.ReadBlock,
		Logger:     cfg.Logger,
	})
	c := contentfetch.Capability(h)
	override(&c, o.Consumer, o.Stream, o.Group, o.FactsStream, o.DLQStream, o.DedupePrefix)
	setPositive(&c.MaxHeld, o.MaxHeld)
	setPositive(&c.MaxHeldPerKey, o.MaxHeldPerHost)
	setPositive(&c.MaxActivePerKey, o.MaxActivePerHost)
	setPositive(&c.DrainTimeout, o.DrainTimeout)
	return engine.New(client, o.Loop, c)
}

// replicateOptions is what the tests build a content.replicate loop from.
// Zero means the capability's default.
type replicateOptions struct {
	Loop     engine.Config
	Consumer string

	Stream, Group, FactsStream, DLQStream, DedupePrefix string

	Handler *replicate.Handler

	Concurrency, MaxHeld int
	DrainTimeout         time.Duration
}

// newReplicateLoop builds the content.replicate loop o describes.
func newReplicateLoop(client rueidis.Client, o replicateOptions) *engine.Loop {
	c := replicate.Capability(o.Handler)
	override(&c, o.Consumer, o.Stream, o.Group, o.FactsStream, o.DLQStream, o.DedupePrefix)
	setPositive(&c.Concurrency, o.Concurrency)
	setPositive(&c.MaxHeld, o.MaxHeld)
	setPositive(&c.DrainTimeout, o.DrainTimeout)
	return engine.New(client, o.Loop, c)
}

// override sets c's names that are not empty.
func override(c *capability.Capability, consumer, stream, group, facts, dlq, dedupe string) {
	for _, f := range []struct {
		dst *string
		v   string
	}{{&c.Consumer, consumer}, {&c.Stream, stream}, {&c.Group, group}, {&c.FactsStream, facts},
		{&c.DLQStream, dlq}, {&c.DedupePrefix, dedupe}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
}

// setPositive sets *dst to v when v is positive.
func setPositive[T int | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}
