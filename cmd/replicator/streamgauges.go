package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/internal/redisclock"
	"github.com/replicator-go/replicator/internal/streamstate"
)

// streamStateInterval is how often the worker reads its streams' state for
// the stream gauges (docs/operations.md, Stream gauges). Every worker of a
// fleet reads the same state, so the series are aggregated with max.
const streamStateInterval = 15 * time.Second

// streamStateTimeout bounds one read of every stream's state.
const streamStateTimeout = 10 * time.Second

// consumedStream is a stream the worker consumes, its group and its
// dead-letter stream.
type consumedStream struct{ stream, group, dlq string }

// The stream gauges' descriptions. The names are documented in
// docs/operations.md and used by deploy/.
var (
	descStreamLength = prometheus.NewDesc("replicator_stream_length",
		"Entries in a stream the worker consumes (XLEN), 0 while it does not exist.", []string{"stream"}, nil)
	descGroupLag = prometheus.NewDesc("replicator_group_lag",
		"Entries of the stream not yet delivered to the consumer group.", []string{"stream", "group"}, nil)
	descGroupPending = prometheus.NewDesc("replicator_group_pending",
		"Entries delivered to the consumer group and not yet acknowledged.", []string{"stream", "group"}, nil)
	descGroupOldestPending = prometheus.NewDesc("replicator_group_oldest_pending_seconds",
		"Longest time since delivery among the group's oldest pending entries.", []string{"stream", "group"}, nil)
	descGroupConsumers = prometheus.NewDesc("replicator_group_consumers",
		"Consumers the group knows, live or not.", []string{"stream", "group"}, nil)
	descDeadLetters = prometheus.NewDesc("replicator_dead_letters",
		"Entries in a dead-letter stream, 0 while it does not exist.", []string{"stream"}, nil)
	descDeadLetterOldest = prometheus.NewDesc("replicator_dead_letter_oldest_age_seconds",
		"Age of the oldest entry of a dead-letter stream; absent while it is empty.", []string{"stream"}, nil)
	descDeadLetterNewest = prometheus.NewDesc("replicator_dead_letter_newest_age_seconds",
		"Age of the newest entry of a dead-letter stream; absent while it is empty.", []string{"stream"}, nil)
	descStreamStateTime = prometheus.NewDesc("replicator_stream_state_timestamp_seconds",
		"When the stream gauges were last read from Redis (Unix time, the server's clock).", nil, nil)
)

// streamState is one read of every consumed stream's state.
type streamState struct {
	at      time.Time // the server's clock
	streams []streamstate.Stream
	groups  [][]streamstate.Group // per stream: its group, when it exists
	dlqs    []streamstate.Stream
}

// streamGauges exports the state of the streams the worker consumes, read
// every streamStateInterval, as a prometheus.Collector. A failed read keeps
// the last values and is counted.
type streamGauges struct {
	client   rueidis.Client
	consumed []consumedStream
	log      *slog.Logger
	failures prometheus.Counter

	mu     sync.Mutex
	last   streamState
	failed bool // the latest read failed (logged once per run of failures)
}

func newStreamGauges(client rueidis.Client, log *slog.Logger, consumed ...consumedStream) *streamGauges {
	return &streamGauges{
		client:   client,
		consumed: consumed,
		log:      log,
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replicator_stream_state_read_failures_total",
			Help: "Failed reads of the streams' state for the stream gauges.",
		}),
	}
}

// run reads the state at once and then every interval until ctx ends.
func (g *streamGauges) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		g.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refresh reads every consumed stream's state once.
func (g *streamGauges) refresh(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, streamStateTimeout)
	defer cancel()
	s, err := readStreamState(ctx, g.client, g.consumed)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if parent.Err() != nil {
			return // stopping
		}
		g.failures.Inc()
		if !g.failed {
			attrs := []any{"error", err}
			if d := (*redisacl.Denied)(nil); errors.As(err, &d) {
				attrs = append(attrs, "grant", d.Grant()) // docs/operations.md, Redis ACL
			}
			g.log.Warn("could not read the streams' state; the stream gauges keep their last values", attrs...)
		}
		g.failed = true
		return
	}
	if g.failed {
		g.log.Info("reading the streams' state again")
	}
	g.failed = false
	g.last = s
}

// readStreamState reads each consumed stream, its group and its
// dead-letter stream.
func readStreamState(ctx context.Context, c rueidis.Client, consumed []consumedStream) (streamState, error) {
	var s streamState
	var err error
	if s.at, err = redisclock.Now(ctx, c); err != nil {
		return s, err
	}
	for _, cs := range consumed {
		st, err := streamstate.ReadStream(ctx, c, cs.stream)
		if err != nil {
			return s, err
		}
		groups, err := streamstate.ReadGroups(ctx, c, cs.stream, s.at, cs.group)
		if err != nil {
			return s, err
		}
		dlq, err := streamstate.ReadStream(ctx, c, cs.dlq)
		if err != nil {
			return s, err
		}
		s.streams = append(s.streams, st)
		s.groups = append(s.groups, groups)
		s.dlqs = append(s.dlqs, dlq)
	}
	return s, nil
}

// Describe implements prometheus.Collector.
func (g *streamGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStreamLength, descGroupLag, descGroupPending, descGroupOldestPending,
		descGroupConsumers, descDeadLetters, descDeadLetterOldest, descDeadLetterNewest, descStreamStateTime} {
		ch <- d
	}
	g.failures.Describe(ch)
}

// Collect implements prometheus.Collector, from the last read.
func (g *streamGauges) Collect(ch chan<- prometheus.Metric) {
	g.failures.Collect(ch)
	g.mu.Lock()
	s := g.last
	g.mu.Unlock()
	if s.at.IsZero() {
		return // never read yet
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descStreamStateTime, float64(s.at.UnixMilli())/1000)
	for i, st := range s.streams {
		gauge(descStreamLength, float64(st.Length), st.Key)
		for _, grp := range s.groups[i] {
			gauge(descGroupLag, float64(grp.Lag), st.Key, grp.Name)
			gauge(descGroupPending, float64(grp.Pending), st.Key, grp.Name)
			gauge(descGroupOldestPending, grp.OldestPendingIdle.Seconds(), st.Key, grp.Name)
			gauge(descGroupConsumers, float64(len(grp.Consumers)), st.Key, grp.Name)
		}
	}
	for _, dlq := range s.dlqs {
		gauge(descDeadLetters, float64(dlq.Length), dlq.Key)
		if dlq.Length > 0 {
			gauge(descDeadLetterOldest, s.at.Sub(dlq.Oldest).Seconds(), dlq.Key)
			gauge(descDeadLetterNewest, s.at.Sub(dlq.Newest).Seconds(), dlq.Key)
		}
	}
}
