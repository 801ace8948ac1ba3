//go:build linux

// Command replicator-bench measures the replicator worker against the
// quality bars of BENCHMARKS.md and runs its crash and hostile-origin suites.
//
// It starts a private redis-server (or uses a Redis database it may flush),
// serves a loopback origin that answers for many host names (the worker
// reaches them through REPLICATOR_RESOLVE), builds the worker binary once,
// loads commands, runs one or more `replicator worker` processes and
// reports what it saw: commands per second, latency from publish to fact,
// the worker's peak RSS (VmHWM from /proc), the smallest gap between two
// requests to one host as the origin saw them, and duplicates.
//
// Usage:
//
//	replicator-bench [flags] MODE...
//
// Run `replicator-bench --help` for the modes and flags. BENCHMARKS.md at
// the repository root records the figures and the commands that produced
// them. Every load is bounded in count and time; all traffic stays on
// 127.0.0.0/8. It runs on Linux only: it reads /proc and the kernel's
// receive timestamps.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// mode is one measurement the bench can run.
type mode struct {
	name    string
	summary string
	run     func(ctx context.Context, b *bench) error
}

func modes() []mode {
	return []mode{
		{"throughput", "commands/s and CPU per command, in one run: the serial worker\n" +
			"(REPLICATOR_CONCURRENCY=1, REPLICATOR_MAX_HELD=1), the worker at its default\n" +
			"concurrency, 3 workers, the naive loop (the same work written the plain way:\n" +
			"XREADGROUP one command, dedupe GET, net/http GET, body to a temp file hashed with\n" +
			"sha256 and renamed under its sha256, XADD fact, SET dedupe key, XACK; as many\n" +
			"commands in flight as the worker) and the bare loop (read, GET, ack: the ceiling);\n" +
			"-commands (20000) over -hosts (1000), -body-size (1024), spacing 0; bars: default\n" +
			fmt.Sprintf("≥ 5× serial, ≥ %.2f× naive, ≥ 60%% of bare, CPU per command ≤ %s", minOverNaive, maxCPUPerCommand), runThroughput},
		{"latency-bound", "an origin answering every request -delay (500ms; with -rate, concurrency ÷ rate when longer)\n" +
			"after it arrived, -hosts (1000 or as many as fetches in flight),\n" +
			"spacing 0: the worker and the bare loop at each REPLICATOR_CONCURRENCY of -sweep\n" +
			"(16,256,1024; the bare loop with as many GETs in flight), enough commands for -steady\n" +
			fmt.Sprintf("(5s) at concurrency ÷ delay, at least %d waves of concurrency; commands/s and its\n", lbMinWaves) +
			"share of concurrency ÷ delay, peak RSS, CPU per command; bar at 1024 in flight:\n" +
			"≥ 90% of concurrency ÷ delay or the bare loop's share; writes an SVG plot (-plot)", runLatencyBound},
		{"latency", "one command at a time on an idle worker: XADD to the fact being readable,\n" +
			"-samples (200) times; p50, p90, p99", runLatency},
		{"memory", "16 concurrent fetches of 64 MiB bodies into the local sink and into the gcs sink\n" +
			"(fake-gcs-server in a child process, not counted); the worker's peak RSS", runMemory},
		{"politeness", "backlogged hosts with 0.2 s, 0.5 s and 1 s intervals (published policies and the\n" +
			"default floor), with 1 and then 3 workers: every gap at the origin against its\n" +
			"interval, and each host's rate against 1/interval", runPoliteness},
		{"fairness", "1000 commands queued for one slow host (1 s interval, 1 s responses); the time\n" +
			"from XADD to fact of commands for other hosts, -samples probes (5)", runFairness},
		{"crash", "3 workers over -commands (10000) published over time; -kills (10) kill -9 of a random\n" +
			"worker at random moments, each restarted; then every command must end with a fact\n" +
			"or a dead letter, every blob_available must name stored bytes with its sha256;\n" +
			"duplicates and silent rows are counted", runCrash},
		{"hostile", "-commands (1000) over origins that trickle, hang, redirect in loops, send gzip\n" +
			"bombs, 100 MB bodies, malformed responses and 429 storms, mixed with healthy ones:\n" +
			"peak RSS under 128 MiB, no gap under a host's interval, every healthy command done", runHostile},
		{"library", "fetch.Fetcher.Get (guard, no spacing, no retries) and an http.Client on\n" +
			"fetch.Transport (Client) beside net/http dialing through the same guard, all hashing the\n" +
			"body with sha256 (Get into a sink that only hashes; also Get+memory, its default sink that\n" +
			"keeps the body), in the bench process against an origin in a child process: 1 KiB and\n" +
			"64 KiB bodies, 1 and 16 in flight, -commands requests per client (20000; 5000 at 64 KiB)\n" +
			"over 16 hosts, and 1 KiB at 16 in flight to one host; requests/s, CPU, allocations and\n" +
			"bytes per request, and the ratios to net/http; bars at 16 in flight: Get's CPU ≤ 1.25×,\n" +
			"requests/s ≥ 0.85× and Client's CPU ≤ 1.10× at 1 KiB, Get's CPU ≤ 1.15× at 64 KiB;\n" +
			"Get's allocations ≤ 2× everywhere", runLibrary},
	}
}

const usageText = `replicator-bench measures the replicator worker (see BENCHMARKS.md).

Usage: replicator-bench [flags] MODE...

MODE is one or more of the modes below, or "all" for every one in this
order. Each mode starts from an empty Redis database and a fresh origin,
runs -runs times, prints each run's figures and, with -runs > 1, the
medians. The exit status is 1 when a mode fails to run or misses a bar it
checks, 2 for usage errors.

Modes:
`

// options are the command-line settings shared by every mode. Zero means
// the mode's own default.
type options struct {
	redisURL    string
	acl         string // "", aclMinimal or aclFull
	workerBin   string
	scratch     string
	keep        bool
	runs        int
	commands    int
	hosts       int
	bodySize    int
	sameBody    bool
	samples     int
	kills       int
	concurrency int
	only        string
	interval    time.Duration
	timeout     time.Duration
	verbose     bool
	delay       time.Duration // latency-bound: the origin's delay
	rate        float64       // latency-bound: grow the delay to concurrency ÷ rate
	sweep       string        // latency-bound: concurrencies
	steady      time.Duration // latency-bound: steady state per point
	plot        string        // latency-bound: the SVG's path
}

func main() {
	// The bench re-executes itself for the parts that must not share its
	// memory: the bare and naive loops, the fake GCS server and the
	// library mode's origin.
	testenv.ServeGCSChild()
	if os.Getenv(bareChildEnv) != "" {
		os.Exit(bareChild(os.Stdout, os.Stderr))
	}
	if os.Getenv(naiveChildEnv) != "" {
		os.Exit(naiveChild(os.Stdout, os.Stderr))
	}
	if os.Getenv(libraryOriginEnv) != "" {
		os.Exit(libraryOriginChild(os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("replicator-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.redisURL, "redis-url", "", "use this Redis `URL` instead of a private redis-server; its database is FLUSHED before every run")
	fs.StringVar(&o.acl, "acl", "", "run the worker as the production broker's worker user: `minimal` (its grants alone: local pacing) or full (with fleet pacing), from deploy/redis-acl; default the private server's default user")
	fs.StringVar(&o.workerBin, "worker", "", "prebuilt replicator `binary` (default: go build ./cmd/replicator, without -race, into the scratch dir)")
	fs.StringVar(&o.scratch, "scratch", "", "working `dir` for blobs and logs (default a new dir under /dev/shm, so blobs are on tmpfs)")
	fs.BoolVar(&o.keep, "keep", false, "keep the scratch dir (worker logs, blobs) instead of removing it")
	fs.IntVar(&o.runs, "runs", 1, "repeat each mode `n` times and report the medians")
	fs.IntVar(&o.commands, "commands", 0, "commands per run (default per mode: throughput 20000, crash 10000, hostile 1000; library: requests per client and case, 20000, 5000 at 64 KiB; latency-bound: per point, enough for -steady)")
	fs.IntVar(&o.hosts, "hosts", 0, "hosts the commands are spread over (default per mode: throughput 1000, crash 100, latency-bound 1000 or as many as fetches in flight)")
	fs.IntVar(&o.bodySize, "body-size", 1024, "throughput, latency-bound: body `bytes` of each healthy response")
	fs.BoolVar(&o.sameBody, "same-body", false, "throughput: every URL answers the same bytes, so every command stores one blob again (a page fetched again unchanged)")
	fs.IntVar(&o.samples, "samples", 0, "latency: commands measured one at a time (default 200); fairness: probes (default 5)")
	fs.IntVar(&o.kills, "kills", 10, "crash: kill -9 of a random worker, at least this many")
	fs.IntVar(&o.concurrency, "concurrency", 0, "REPLICATOR_CONCURRENCY of the non-serial workers and commands in flight in the naive and bare loops (default the worker's, 16); latency-bound: a sweep of this one point unless -sweep")
	fs.StringVar(&o.only, "only", "", "throughput: comma-separated subset of "+strings.Join(throughputVariants, ","))
	fs.DurationVar(&o.interval, "interval", 0, "throughput: spacing of every host (REPLICATOR_MIN_HOST_INTERVAL_SECONDS); the bars use 0")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "bound on one run of one mode")
	fs.BoolVar(&o.verbose, "v", false, "progress lines on stderr")
	fs.DurationVar(&o.delay, "delay", lbDefaultDelay, "latency-bound: the origin answers every request this long after it arrived")
	fs.Float64Var(&o.rate, "rate", 0, "latency-bound: grow each point's delay to concurrency ÷ this many commands/s when longer than -delay, so only the fetches waiting grow (0: -delay at every point)")
	fs.StringVar(&o.sweep, "sweep", "", "latency-bound: comma-separated REPLICATOR_CONCURRENCY `list` (default "+lbDefaultSweep+")")
	fs.DurationVar(&o.steady, "steady", lbDefaultSteady, "latency-bound: steady state per point at concurrency ÷ delay, which sets the commands per point")
	fs.StringVar(&o.plot, "plot", "", "latency-bound: write the SVG plot to this `path` (default: latency-bound.svg in the scratch dir when it is kept, else a new file under $TMPDIR; the report prints where)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		for _, m := range modes() {
			fmt.Fprintf(stderr, "  %s\n", m.name)
			for line := range strings.SplitSeq(m.summary, "\n") {
				fmt.Fprintf(stderr, "      %s\n", line)
			}
		}
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		fmt.Fprintln(stderr, "\nreplicator-bench: name at least one mode")
		return 2
	}
	if o.acl != "" && o.acl != aclMinimal && o.acl != aclFull {
		fmt.Fprintln(stderr, "replicator-bench: -acl must be minimal or full")
		return 2
	}
	if o.acl != "" && o.redisURL != "" {
		fmt.Fprintln(stderr, "replicator-bench: -acl needs the private redis-server, not -redis-url")
		return 2
	}
	if o.runs < 1 || o.commands < 0 || o.hosts < 0 || o.bodySize < 0 || o.samples < 0 || o.kills < 0 || o.concurrency < 0 {
		fmt.Fprintln(stderr, "replicator-bench: -runs must be at least 1 and counts not negative")
		return 2
	}
	var selected []mode
	for _, name := range fs.Args() {
		if name == "all" {
			selected = append(selected, modes()...)
			continue
		}
		found := false
		for _, m := range modes() {
			if m.name == name {
				selected = append(selected, m)
				found = true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "replicator-bench: unknown mode %q (run with --help for the list)\n", name)
			return 2
		}
	}
	if o.delay <= 0 || o.steady <= 0 || o.rate < 0 {
		fmt.Fprintln(stderr, "replicator-bench: -delay and -steady must be positive, -rate not negative")
		return 2
	}
	if o.sweep != "" {
		if _, err := parseSweep(o.sweep); err != nil {
			fmt.Fprintf(stderr, "replicator-bench: %v\n", err)
			return 2
		}
	}
	if o.only != "" {
		for v := range strings.SplitSeq(o.only, ",") {
			if !validVariant(v) {
				fmt.Fprintf(stderr, "replicator-bench: -only: unknown variant %q (want one of %s)\n", v, strings.Join(throughputVariants, ", "))
				return 2
			}
		}
	}

	b, err := newBench(ctx, o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "replicator-bench: %v\n", err)
		return 1
	}
	defer b.close()
	b.printMachine()
	code := 0
	for _, m := range selected {
		if ctx.Err() != nil {
			return 1
		}
		fmt.Fprintf(stdout, "\n== %s ==\n", m.name)
		if err := m.run(ctx, b); err != nil {
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", m.name, err)
			code = 1
		}
	}
	return code
}
