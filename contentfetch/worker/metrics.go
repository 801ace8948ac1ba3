package worker

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/consume"
)

// metricsPrefix names the content.fetch loop's metrics (docs/operations.md,
// Metrics and health).
const metricsPrefix = "replicator_"

// Why a command is parked: the reason label of
// replicator_commands_total{outcome="parked"}.
const (
	parkedPoliteness  = "politeness"
	parkedStorageFull = "storage_full"
)

// parkReason says why p parks its command.
func parkReason(p *contentfetch.ParkedError) string {
	if p != nil && errors.Is(p.Cause, fetch.ErrStorageFull) {
		return parkedStorageFull
	}
	return parkedPoliteness
}

// fetchMetrics are the metrics only a fetch has, beside the loop's, and
// the lines that say when the blob store runs out of room and has room
// again (one each, not one per parked command).
type fetchMetrics struct {
	loop        *consume.Metrics
	duration    *prometheus.HistogramVec
	storedBytes prometheus.Counter
	pacingWait  prometheus.Histogram
	inFlight    prometheus.Collector // nil when the fetcher has no bound

	log    *slog.Logger
	noRoom atomic.Bool // the last word from the store was that it has no room
}

func newFetchMetrics(f *fetch.Fetcher, log *slog.Logger) *fetchMetrics {
	m := &fetchMetrics{
		log:  log,
		loop: consume.NewMetrics(metricsPrefix),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricsPrefix + "fetch_duration_seconds",
			Help:    "Time to handle one command, pacing waits included, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"outcome"}),
		storedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "stored_bytes_total",
			Help: "Bytes of bodies stored for blob_available facts.",
		}),
		pacingWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricsPrefix + "pacing_wait_seconds",
			Help:    "Time a handled command waited for its hosts' politeness windows.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
	}
	if _, bound := f.InFlight(); bound > 0 {
		m.inFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: metricsPrefix + "requests_in_flight",
			Help: "Requests in flight, out of the fetcher's MaxInFlight.",
		}, func() float64 { n, _ := f.InFlight(); return float64(n) })
	}
	return m
}

// register adds every metric to r (nil: none). A collision is logged, not
// fatal.
func (m *fetchMetrics) register(r prometheus.Registerer, log *slog.Logger) {
	if r == nil {
		return
	}
	m.loop.Register(r, log)
	cs := []prometheus.Collector{m.duration, m.storedBytes, m.pacingWait}
	if m.inFlight != nil {
		cs = append(cs, m.inFlight)
	}
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			log.Warn("could not register a metric; this worker's values are not exported", "error", err)
		}
	}
}

// observe records one handled command.
func (m *fetchMetrics) observe(out contentfetch.Outcome) {
	m.duration.WithLabelValues(out.Kind.String()).Observe(out.Duration.Seconds())
	if out.Result != nil {
		m.pacingWait.Observe(out.Result.Paced.Seconds())
		if out.Kind == contentfetch.Stored {
			m.storedBytes.Add(float64(out.Result.Blob.Size))
		}
	}
	if out.Kind == contentfetch.Stored && m.noRoom.Load() && m.noRoom.Swap(false) {
		m.log.Info("the blob store has room again: parked fetches resume as they come due")
	}
}

// parked records one command parked until it is due, and returns why.
func (m *fetchMetrics) parked(p *contentfetch.ParkedError) string {
	reason := parkReason(p)
	m.loop.Commands.WithLabelValues("parked", reason).Inc()
	if reason == parkedStorageFull && !m.noRoom.Swap(true) {
		m.log.Warn("the blob store has no room: fetches park, and no request goes out, until it has",
			"reason", reason, "error", p.Cause.Error())
	}
	return reason
}
