package engine

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicator-go/replicator/engine/capability"
)

// metrics are a loop's counters and gauges, their names prefixed per loop
// (capability.Capability.MetricsPrefix; docs/operations.md, Metrics and
// health): "replicator_" for content.fetch, "replicator_replicate_" for
// content.replicate. New builds and registers them.
type metrics struct {
	// Commands counts commands by outcome and failure reason: the
	// capability's outcomes of handled commands, and the loop's own
	// (duplicate, refused, deferred, trimmed, and the scheduler's parked).
	Commands       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	storedBytes    prometheus.Counter
	pacingWait     prometheus.Histogram
	busy           prometheus.Gauge
	reclaims       prometheus.Counter
	dlq            *prometheus.CounterVec
	brokerFailures *prometheus.CounterVec
	cycleFailures  prometheus.Counter
	gauges         []prometheus.Collector

	// counts reads the loop's held and parked commands, unwritten its
	// handled commands whose fate waits to be written again; set by New.
	counts    func() (held, parked int)
	unwritten func() int
}

// newMetrics returns a loop's metrics, named with prefix.
func newMetrics(prefix, name string) *metrics {
	m := &metrics{
		Commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "commands_total",
			Help: "Commands by outcome (stored, not_modified, complete, permanent, transient, unclassified, parked, duplicate, refused, deferred, trimmed) and failure reason.",
		}, []string{"outcome", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "replicator_" + name + "_duration_seconds",
			Help:    "Time to handle one command, pacing waits included, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"outcome"}),
		storedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: prefix + "stored_bytes_total",
			Help: "Bytes stored by handled commands.",
		}),
		pacingWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    prefix + "pacing_wait_seconds",
			Help:    "Time a handled command waited for its key's politeness window.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: prefix + "handlers_busy",
			Help: "Commands inside the handler.",
		}),
		reclaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: prefix + "reclaimed_total",
			Help: "Idle pending entries taken over with XAUTOCLAIM.",
		}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "dlq_writes_total",
			Help: "Dead letters written, by reason.",
		}, []string{"reason"}),
		brokerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "broker_failures_total",
			Help: "Failed Redis operations, by operation.",
		}, []string{"op"}),
		cycleFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: prefix + "cycle_failures_total",
			Help: "Failed consume-loop cycles.",
		}),
	}
	m.gauges = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: prefix + "held_commands",
			Help: "Commands held in memory: waiting, parked, being handled or being closed.",
		}, func() float64 { n, _ := m.read(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: prefix + "parked_commands",
			Help: "Commands held back in memory until a time (politeness).",
		}, func() float64 { _, n := m.read(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: prefix + "unwritten_fates",
			Help: "Handled commands whose fate Redis refused or failed to write, waiting to be written again; while any wait, the loop takes no new command.",
		}, func() float64 {
			if m.unwritten == nil {
				return 0
			}
			return float64(m.unwritten())
		}),
	}
	return m
}

func (m *metrics) read() (held, parked int) {
	if m.counts == nil {
		return 0, 0
	}
	return m.counts()
}

// Register adds every metric to r. A collision is logged, not fatal:
// metrics must never stop a worker.
func (m *metrics) Register(r prometheus.Registerer, log *slog.Logger) {
	if r == nil {
		return
	}
	cs := []prometheus.Collector{m.Commands, m.duration, m.storedBytes, m.pacingWait, m.busy, m.reclaims, m.dlq, m.brokerFailures, m.cycleFailures}
	for _, c := range append(cs, m.gauges...) {
		if err := r.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				log.Warn("metric already registered; this loop's values are not exported", "error", err)
				continue
			}
			log.Warn("could not register a metric", "error", err)
		}
	}
}

// count adds n commands of outcome and reason.
func (m *metrics) count(outcome, reason string, n int) {
	if m != nil {
		m.Commands.WithLabelValues(outcome, reason).Add(float64(n))
	}
}

func (m *metrics) brokerFailure(op string) {
	if m != nil {
		m.brokerFailures.WithLabelValues(op).Inc()
	}
}

func (m *metrics) deadLettered(reason string) {
	if m != nil {
		m.dlq.WithLabelValues(reason).Inc()
	}
}

func (m *metrics) reclaimed(n int) {
	if m != nil {
		m.reclaims.Add(float64(n))
	}
}

func (m *metrics) cycleFailed() {
	if m != nil {
		m.cycleFailures.Inc()
	}
}

func (m *metrics) handling(delta float64) {
	if m != nil {
		m.busy.Add(delta)
	}
}

// handled records one handled command.
func (m *metrics) handled(out capability.Outcome, took time.Duration) {
	if m == nil {
		return
	}
	m.Commands.WithLabelValues(out.Name(), out.Reason).Inc()
	m.duration.WithLabelValues(out.Name()).Observe(took.Seconds())
	m.pacingWait.Observe(out.Paced.Seconds())
	if out.Stored > 0 {
		m.storedBytes.Add(float64(out.Stored))
	}
}
