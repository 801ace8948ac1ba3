package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
	"github.com/replicator-go/replicator/sink/local"
)

const workerDescription = `Runs the consume loops. content.fetch: reads content_fetch commands with the
consumer group, fetches them (guarded, paced, many at once), stores the
bytes and publishes one fact per command on content.blobs; permanent
failures are dead-lettered on content.fetch.dlq. content.replicate: copies
blobs this worker stored to the stores provisioned in
REPLICATOR_REPLICATION_ALIASES_FILE (none when unset), announcing each on
content.artifacts, dead letters on content.replicate.dlq. Per-host
politeness comes from content.fetch-policy, replayed before the first
command is read; with the local backend the blob tree is measured (the
first sweep) before then too, so REPLICATOR_BLOB_MAX_TOTAL_BYTES holds from
the first command.

Settings come from the environment, read as the Python worker reads them:
an unset variable takes its default, a blank one (VAR=) means what each
setting below says, and any invalid value stops the start (exit 2) naming
the variable. Logs are JSON on stderr. SIGTERM or SIGINT stops reading, lets
in-flight fetches finish and exits 0; a broker that keeps failing for the
outage limit (the back-offs of REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES
failed cycles, logged at start-up) makes it exit 1 so a supervisor restarts
it.`

// healthTimeout bounds the Redis PING behind /healthz.
const healthTimeout = time.Second

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worker", "worker", workerDescription, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: replicator worker\n\n%s\n\nSettings (docs/settings.md):\n", workerDescription)
		writeSettingsHelp(stderr)
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "replicator worker: takes no arguments (settings come from REPLICATOR_* variables), got %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := loadConfigFrom(os.Environ())
	if err != nil {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintf(stderr, "replicator worker: %s\n", strings.TrimPrefix(line, "replicator: "))
		}
		return 2
	}
	lines := newLogBuffer(stderr)
	defer lines.Close()
	log := slog.New(flushOnWarn{slog.NewJSONHandler(lines, &slog.HandlerOptions{Level: cfg.LogLevel}), lines})
	// The policy table and other packages log through the default logger.
	slog.SetDefault(log)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	if err := work(ctx, cfg, log); err != nil {
		log.Error("worker failed", "error", err)
		return 1
	}
	return 0
}

// work wires the worker from cfg and runs it until ctx ends (nil) or the
// broker gives up (an error). Start-up order follows the reference: storage
// first (a misconfigured store fails the boot before anything else is
// opened), then Redis, the policy replay, and only then the consume loop.
func work(ctx context.Context, cfg Config, log *slog.Logger) error {
	log.Info("replicator starting",
		"version", fetch.Version(),
		"redis_url", guard.RedactURL(cfg.RedisURL),
		"blob_backend", cfg.BlobBackend,
		"group", cfg.ConsumerGroup,
		"consumer", cfg.ConsumerName,
		"replicate_group", cfg.ReplicateConsumerGroup,
		"replicate_consumer", cfg.ReplicateConsumerName,
		"concurrency", cfg.Concurrency,
		"read_block_ms", cfg.ReadBlock.Milliseconds(),
		"min_host_interval_seconds", cfg.MinHostInterval.Seconds(),
		"allow_cidrs", fmt.Sprint(cfg.AllowCIDRs),
		"egress_proxy_cidrs", fmt.Sprint(cfg.EgressProxyCIDRs),
		"metrics_addr", cfg.MetricsAddr,
		"robots", map[bool]string{false: "ignore", true: "obey"}[cfg.ObeyRobots],
		"max_crawl_delay_seconds", cfg.MaxCrawlDelay.Seconds(),
		// How long Redis may keep failing before the process exits 1; a
		// supervisor's restart limits are sized against it.
		"outage_limit_seconds", cfg.engine(nil, nil).OutageLimit().Seconds(),
	)
	openFiles := openFileLimit()
	reportOpenFiles(log, openFiles, cfg.Concurrency)
	if cfg.Resolve != "" {
		log.Warn("REPLICATOR_RESOLVE overrides DNS for some hosts; it is meant for tests and development", "resolve", cfg.Resolve)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	blobs, sweeper, err := openSink(ctx, cfg, log, reg)
	if err != nil {
		return err
	}

	wantFleet, fleetWhy := wantFleetPacing(cfg)
	client, cached, err := connectRedis(cfg.RedisURL, wantFleet)
	if err != nil {
		return err
	}
	defer client.Close()
	if wantFleet && !cached {
		log.Info("this Redis does not offer client-side caching: every pacing decision for an unspaced host asks it")
	}

	// Background tasks (policy tail, sweep, metrics server) end with bg.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	defer func() {
		stopBG()
		bg.Wait()
	}()

	table := policy.NewTable()
	reader := fleet.NewReader(client, table, fleet.ReaderOptions{
		Block:       cfg.ReadBlock,
		BackoffBase: cfg.ErrorBackoffBase,
		BackoffMax:  cfg.ErrorBackoffMax,
		Logger:      log,
	})
	bg.Go(func() { reader.Run(bgCtx) })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replicator_policy_hosts",
		Help: "Hosts with a published fetch policy in force.",
	}, func() float64 { return float64(table.Len()) }))

	interval := cfg.MinHostInterval
	if interval == 0 {
		interval = policy.None // REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0: no spacing
	}
	// The fallback decides while Redis cannot, and mirrors the fleet's
	// decisions meanwhile, so it also knows which hosts are tracked.
	// A granted request reports its departure well inside the whole-fetch
	// bound; the lease only outlives a worker that died in between.
	lease := cfg.MaxFetchTime
	var floors policy.Floors = table
	robotsCache := robotsFor(cfg, log, reg)
	if robotsCache != nil {
		// A Crawl-delay over the floor in force becomes the host's floor,
		// fleet-wide as every floor is.
		floors = robotsCache.Floors(table, interval)
	}
	fallback := policy.NewLocal(policy.LocalOptions{DefaultInterval: interval, Floors: floors, Lease: lease})
	pacer, fleetPacer := choosePacer(ctx, client, wantFleet, fleetWhy, fallback, log)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replicator_pacer_tracked_hosts",
		Help: "Hosts whose spacing or escalation this worker currently tracks.",
	}, func() float64 { return float64(fallback.Tracked()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replicator_pacer_degraded",
		Help: "1 while pacing decisions are made locally because Redis failed.",
	}, func() float64 {
		if fleetPacer != nil && fleetPacer.Degraded() {
			return 1
		}
		return 0
	}))

	gopts, err := guardOptions(cfg.AllowCIDRs, cfg.Resolve)
	if err != nil {
		return err // validated by loadConfig; kept for safety
	}
	gopts.Deny = cfg.BlockedDestinations
	fetcher := fetch.New(fetch.Options{
		Guard:        guard.New(gopts),
		Pacer:        pacer,
		MaxInFlight:  cfg.Concurrency,
		MaxOpenFiles: contentfetch.FetcherOpenFiles(openFiles),
		MaxBodyBytes: cfg.MaxBlobBytes,
		MaxFetchTime: cfg.MaxFetchTime,
		Logger:       log,
		Robots:       robotsCache,
		Proxy:        egressProxy(cfg, log),
	})
	defer fetcher.Close()
	if _, bound := fetcher.InFlight(); bound > 0 {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "replicator_requests_in_flight",
			Help: "Requests in flight, out of the fetcher's MaxInFlight.",
		}, func() float64 { n, _ := fetcher.InFlight(); return float64(n) }))
	}
	engineCfg := cfg.engine(log, reg)
	fetchLoop := engine.New(client, engineCfg, cfg.fetchCapability(fetcher, blobs, log))
	replCap, aliases, closeGCS, err := replicateCapability(ctx, cfg, blobs, log)
	if err != nil {
		return err
	}
	defer closeGCS()
	replLoop := engine.New(client, engineCfg, replCap)
	persistL, persisting, closePersist, err := persistLoop(ctx, cfg, engineCfg, client, blobs, log)
	if err != nil {
		return err
	}
	defer closePersist()
	loops := []*engine.Loop{fetchLoop, replLoop}
	if persistL != nil {
		loops = append(loops, persistL)
	}
	healthy := func() bool {
		for _, l := range loops {
			if !l.Healthy() {
				return false
			}
		}
		return true
	}

	if cfg.MetricsAddr != "" {
		// Bound before the replay so /healthz answers (503) while it runs,
		// and so a taken port fails the boot rather than going unnoticed.
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics server: %w", err)
		}
		srv := &http.Server{Handler: metricsMux(reg, healthy, client), ReadHeaderTimeout: 10 * time.Second}
		bg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "error", err)
			}
		})
		bg.Go(func() {
			<-bgCtx.Done()
			shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(shutCtx)
		})
		log.Info("serving /metrics and /healthz", "addr", ln.Addr().String())
	}
	if sweeper != nil {
		bg.Go(func() { sweeper.Run(bgCtx, cfg.BlobSweepInterval) })
	}
	streams := []consumedStream{
		{streamCommands, cfg.ConsumerGroup, streamDLQ},
		{streamReplicate, cfg.ReplicateConsumerGroup, streamReplicateDLQ},
	}
	if persistL != nil {
		c := persistL.Capability()
		streams = append(streams, consumedStream{c.Stream, c.Group, c.DLQStream})
	}
	gauges := newStreamGauges(client, log, streams...)
	reg.MustRegister(gauges)
	bg.Go(func() { gauges.run(bgCtx, streamStateInterval) })

	// The floors must be known before the first command is paced; pacing an
	// opening burst at the default would be a guess.
	if err := reader.WaitReplayed(ctx); err != nil {
		log.Info("stopped before the fetch policy replay finished")
		return nil
	}
	if sweeper != nil && cfg.BlobMaxTotalBytes > 0 {
		if err := waitMeasured(ctx, sweeper, cfg.BlobMaxTotalBytes, log); err != nil {
			if ctx.Err() != nil {
				log.Info("stopped before the blob tree was measured")
				return nil
			}
			return err
		}
	}
	logReady(ctx, log, cfg, aliases, persisting, fleetPacer != nil, cached)
	bg.Go(func() { takeOverOldConsumers(bgCtx, client, log, cfg) })
	if err := runLoops(ctx, loops...); err != nil {
		return err
	}
	log.Info("worker stopped", "consumer", cfg.ConsumerName, "replicate_consumer", cfg.ReplicateConsumerName)
	return nil
}

// runLoops runs the consume loops side by side until ctx ends (nil) or one
// gives up on the broker: then the others stop too, and its error is
// returned, so a supervisor restarts the whole worker.
func runLoops(ctx context.Context, loops ...*engine.Loop) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(loops))
	for _, l := range loops {
		go func() {
			err := l.Run(ctx)
			if err != nil {
				stop()
			}
			errs <- err
		}()
	}
	var first error
	for range loops {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitMeasured waits for the first sweep (started by the caller) to measure
// the blob tree. Until then the sink's total counts only this process's new
// blobs, so a worker restarted on a tree already over the ceiling would
// fetch and store until the walk ended. The walk runs alongside the policy
// replay, so it only delays consuming by what it takes beyond that.
func waitMeasured(ctx context.Context, s *local.Sink, ceiling int64, log *slog.Logger) error {
	log.Info("waiting for the first blob sweep to measure the tree before reading commands (REPLICATOR_BLOB_MAX_TOTAL_BYTES)",
		"blob_dir", s.Dir(), "max_total_bytes", ceiling)
	started := time.Now()
	if err := s.WaitMeasured(ctx); err != nil {
		return fmt.Errorf("measuring the blob tree for REPLICATOR_BLOB_MAX_TOTAL_BYTES: %w", err)
	}
	attrs := []any{"bytes_held", s.Usage(), "max_total_bytes", ceiling, "duration_ms", time.Since(started).Milliseconds()}
	if err := s.Room(0); err != nil {
		attrs = append(attrs, "error", err.Error())
		log.Warn("blob tree is at or over REPLICATOR_BLOB_MAX_TOTAL_BYTES, or its disk is full; fetches park until there is room", attrs...)
	} else {
		log.Info("blob tree measured", attrs...)
	}
	return nil
}

// openSink builds the blob sink REPLICATOR_BLOB_BACKEND names. For local it
// also returns the sink to sweep (New has already warned about directory
// levels others cannot traverse); for gcs the start-up listing has proved
// the bucket usable.
func openSink(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (sink.Sink, *local.Sink, error) {
	switch cfg.BlobBackend {
	case backendGCS:
		if strings.TrimSpace(os.Getenv("REPLICATOR_BLOB_MAX_TOTAL_BYTES")) != "" {
			log.Info("REPLICATOR_BLOB_MAX_TOTAL_BYTES is not enforced with the gcs backend: the bucket's lifecycle rule reaps")
		}
		client, err := storage.NewClient(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("gcs client: %w", err)
		}
		prefix := cfg.BlobPrefix
		if prefix == "" {
			prefix = "/" // the bucket root; an empty Prefix would mean the default
		}
		s, err := gcs.New(ctx, client, gcs.Options{
			Bucket:  cfg.BlobBucket,
			Prefix:  prefix,
			TTL:     cfg.BlobTTL,
			Timeout: cfg.BlobTimeout,
			Logger:  log,
		})
		if err != nil {
			client.Close()
			log.Error("blob bucket is not usable", "blob_bucket", cfg.BlobBucket, "blob_prefix", cfg.BlobPrefix, "error", err)
			return nil, nil, err
		}
		return s, nil, nil
	default:
		s, err := local.New(local.Options{
			Dir:           cfg.BlobDir,
			TTL:           cfg.BlobTTL,
			TempGrace:     cfg.BlobTempGrace,
			MaxTotalBytes: cfg.BlobMaxTotalBytes,
			Logger:        log,
		})
		if err != nil {
			log.Error("blob directory is not usable", "blob_dir", cfg.BlobDir, "error", err)
			return nil, nil, err
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "replicator_blob_store_bytes",
			Help: "Bytes the local blob tree holds (blobs and temps), as of the last sweep plus blobs stored since.",
		}, func() float64 { return float64(s.Usage()) }))
		if cfg.BlobMaxTotalBytes > 0 {
			ceiling := float64(cfg.BlobMaxTotalBytes)
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "replicator_blob_store_max_bytes",
				Help: "REPLICATOR_BLOB_MAX_TOTAL_BYTES: the ceiling replicator_blob_store_bytes is held under (absent when unset).",
			}, func() float64 { return ceiling }))
		}
		log.Info("blob directory ready", "blob_dir", s.Dir())
		return s, s, nil
	}
}

// metricsMux serves /metrics from reg and /healthz: 200 once every loop's
// consumer group exists (healthy) and Redis answers a PING, else 503.
func metricsMux(reg *prometheus.Registry, healthy func() bool, client rueidis.Client) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !healthy() {
			rw.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(rw, "not ready: the consumer group is not set up or Redis has not answered recently")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
			rw.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(rw, "redis does not answer")
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	return mux
}

// engine is the configuration every loop of the worker shares.
func (c Config) engine(log *slog.Logger, reg prometheus.Registerer) engine.Config {
	return engine.Config{
		StartID:                c.ConsumerStartID,
		ReadBlock:              c.ReadBlock,
		ClaimMinIdle:           c.ClaimMinIdle,
		MaxDeliveryAttempts:    c.MaxDeliveryAttempts,
		BackoffBase:            c.ErrorBackoffBase,
		BackoffMax:             c.ErrorBackoffMax,
		MaxConsecutiveFailures: c.MaxConsecutiveCycleFailures,
		DedupeTTL:              c.DedupeTTL,
		Logger:                 log,
		Registerer:             reg,
	}
}

// parkAfter is the longest politeness wait a command that has not parked
// yet sleeps through: one too short to be worth a trip through the
// scheduler.
const parkAfter = time.Millisecond

// fetchCapability is content.fetch on fetcher and blobs, with the
// settings that size it.
func (c Config) fetchCapability(fetcher *fetch.Fetcher, blobs sink.Sink, log *slog.Logger) capability.Capability {
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{
		Fetcher:    fetcher,
		Sink:       blobs,
		MaxTimeout: c.MaxFetchTimeout,
		// A politeness wait parks the command in memory until its host is
		// due: it then holds no goroutine and no place in flight. Once
		// parked, a command sleeps through waits up to a read's block, so a
		// redirect chain makes progress (docs/politeness.md, Spending a
		// wait).
		MaxWait:   c.ReadBlock,
		ParkAfter: parkAfter,
		// A store with no room is asked again a read's block later.
		RoomWait: c.ReadBlock,
		Logger:   log,
	})
	fc := contentfetch.Capability(h)
	fc.Group, fc.Consumer = c.ConsumerGroup, c.ConsumerName
	if c.MaxHeld > 0 {
		fc.MaxHeld = c.MaxHeld
	}
	return fc
}

// egressProxy is the fetcher's Proxy: the environment's, once
// REPLICATOR_EGRESS_PROXY_CIDRS says where proxies may be; nil otherwise.
func egressProxy(cfg Config, log *slog.Logger) *fetch.Proxy {
	if len(cfg.EgressProxyCIDRs) == 0 {
		return nil
	}
	p := fetch.EnvironmentProxy(cfg.EgressProxyCIDRs)
	if p == nil {
		log.Warn("REPLICATOR_EGRESS_PROXY_CIDRS is set but neither HTTP_PROXY nor HTTPS_PROXY is: every connection is direct")
	}
	return p
}
