package fetch

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// workerMetrics are the Worker's replicator_* metrics. They always exist;
// they are registered only when WorkerOptions.Registerer is set.
type workerMetrics struct {
	commands       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	storedBytes    prometheus.Counter
	pacingWait     prometheus.Histogram
	busy           prometheus.Gauge
	reclaims       prometheus.Counter
	dlq            *prometheus.CounterVec
	brokerFailures *prometheus.CounterVec
	cycleFailures  prometheus.Counter
	funcs          []prometheus.Collector
}

func newWorkerMetrics(w *Worker, slots Slots) *workerMetrics {
	m := &workerMetrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replicator_commands_total",
			Help: "Commands by outcome (stored, not_modified, permanent, transient, unclassified, parked, duplicate, refused, deferred, trimmed) and failure reason.",
		}, []string{"outcome", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "replicator_fetch_duration_seconds",
			Help:    "Time to handle one command, pacing waits included, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"outcome"}),
		storedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replicator_stored_bytes_total",
			Help: "Bytes of bodies stored for blob_available facts.",
		}),
		pacingWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "replicator_pacing_wait_seconds",
			Help:    "Time a handled command waited for its hosts' politeness windows.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "replicator_handlers_busy",
			Help: "Commands inside the handler (waiting for a host's window or fetching).",
		}),
		reclaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replicator_reclaimed_total",
			Help: "Idle pending entries taken over with XAUTOCLAIM.",
		}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replicator_dlq_writes_total",
			Help: "Dead letters written, by reason.",
		}, []string{"reason"}),
		brokerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replicator_broker_failures_total",
			Help: "Failed Redis operations, by operation.",
		}, []string{"op"}),
		cycleFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replicator_cycle_failures_total",
			Help: "Failed consume-loop cycles.",
		}),
	}
	m.funcs = append(m.funcs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "replicator_held_commands",
			Help: "Commands held in memory: waiting, parked, being handled or being closed.",
		}, func() float64 { n, _ := w.heldCounts(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "replicator_parked_commands",
			Help: "Commands parked in memory until their host is due.",
		}, func() float64 { _, n := w.heldCounts(); return float64(n) }),
	)
	if s, ok := slots.(semaphore); ok {
		m.funcs = append(m.funcs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "replicator_requests_in_flight",
			Help: "Requests holding one of the fetcher's slots.",
		}, func() float64 { return float64(len(s)) }))
	}
	return m
}

// register adds every metric to r (nil: none). A collision is logged, not
// fatal: metrics must never stop the worker.
func (m *workerMetrics) register(r prometheus.Registerer, log *slog.Logger) {
	if r == nil {
		return
	}
	cs := []prometheus.Collector{m.commands, m.duration, m.storedBytes, m.pacingWait, m.busy,
		m.reclaims, m.dlq, m.brokerFailures, m.cycleFailures}
	for _, c := range append(cs, m.funcs...) {
		if err := r.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				log.Warn("metric already registered; this worker's values are not exported", "error", err)
				continue
			}
			log.Warn("could not register a metric", "error", err)
		}
	}
}

// observe records one handled command.
func (m *workerMetrics) observe(out Outcome) {
	kind := out.Kind.String()
	m.commands.WithLabelValues(kind, string(out.Reason)).Inc()
	m.duration.WithLabelValues(kind).Observe(out.Duration.Seconds())
	if out.Result != nil {
		m.pacingWait.Observe(out.Result.Paced.Seconds())
		if out.Kind == Stored {
			m.storedBytes.Add(float64(out.Result.Blob.Size))
		}
	}
}
