package consume

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a loop's counters and gauges, their names prefixed per loop
// (docs/operations.md, Metrics and health): "replicator_" for content.fetch,
// "replicator_replicate_" for content.replicate. Build them with
// NewMetrics, hand them to one Loop through Options.Metrics, and register
// them with Register.
type Metrics struct {
	// Commands counts commands by outcome and failure reason: the
	// capability's outcomes of handled commands, and the loop's own
	// (duplicate, refused, deferred, trimmed, and the Scheduler's parked).
	Commands       *prometheus.CounterVec
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

// NewMetrics returns a loop's metrics, named with prefix.
func NewMetrics(prefix string) *Metrics {
	m := &Metrics{
		Commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "commands_total",
			Help: "Commands by outcome (stored, not_modified, complete, permanent, transient, unclassified, parked, duplicate, refused, deferred, trimmed) and failure reason.",
		}, []string{"outcome", "reason"}),
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

func (m *Metrics) read() (held, parked int) {
	if m.counts == nil {
		return 0, 0
	}
	return m.counts()
}

// Register adds every metric to r. A collision is logged, not fatal:
// metrics must never stop a worker.
func (m *Metrics) Register(r prometheus.Registerer, log *slog.Logger) {
	cs := []prometheus.Collector{m.Commands, m.busy, m.reclaims, m.dlq, m.brokerFailures, m.cycleFailures}
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
func (m *Metrics) count(outcome, reason string, n int) {
	if m != nil {
		m.Commands.WithLabelValues(outcome, reason).Add(float64(n))
	}
}

func (m *Metrics) brokerFailure(op string) {
	if m != nil {
		m.brokerFailures.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) deadLettered(reason string) {
	if m != nil {
		m.dlq.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) reclaimed(n int) {
	if m != nil {
		m.reclaims.Add(float64(n))
	}
}

func (m *Metrics) cycleFailed() {
	if m != nil {
		m.cycleFailures.Inc()
	}
}

func (m *Metrics) handling(delta float64) {
	if m != nil {
		m.busy.Add(delta)
	}
}
